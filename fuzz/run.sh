#!/usr/bin/env bash
# Builds each fuzz/fuzz-*.c with clang's libFuzzer (+ASan/UBSan) against the
# library sources and runs it for FUZZ_SECONDS (default 30) from its seed
# corpus in fuzz/corpus/NAME/. A crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
[ $# -eq 0 ] && { echo "fuzz: no targets"; exit 0; }
out=build-fuzz
mkdir -p "$out"
srcs=$(find src -name '*.c' | sort)
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Isrc -pthread -DJEV_FUZZING"
libs="-ljansson -lturbojpeg -lspng -lpcre2-8 -lutf8proc -lcrypto -lopenblas -lm"
for t in "$@"; do
  name=$(basename "$t" .c)
  echo "fuzz: building $name"
  clang $flags -o "$out/$name" "$t" $srcs $libs
  corpus="fuzz/corpus/${name#fuzz-}"
  work="$out/corpus-$name"; mkdir -p "$work"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "fuzz: running $name for ${secs}s"
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 "$work" 2>"$out/$name.log" \
    || { tail -50 "$out/$name.log"; echo "fuzz: $name FAILED"; exit 1; }
  grep -E '^Done|#[0-9]+.*DONE' "$out/$name.log" | tail -1 || true
done
