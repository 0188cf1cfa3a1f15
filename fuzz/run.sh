#!/usr/bin/env bash
# Builds each fuzz/fuzz-*.c with clang's libFuzzer (+ASan/UBSan) against the
# library and runs it for FUZZ_SECONDS (default 30) from its seed corpus in
# fuzz/corpus/NAME/. A crash fails the run. The library objects are compiled
# once (-fsanitize=fuzzer-no-link) with the tool code of common/ and shared by every target; the CUDA backend
# (src/backend/cuda, nvcc) is not part of it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
[ $# -eq 0 ] && { echo "fuzz: no targets"; exit 0; }
out=build-fuzz
mkdir -p "$out/obj"
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-std=c11 -D_GNU_SOURCE -g -O1 $san -Iinclude -Isrc -I. -pthread -DJEV_FUZZING"
libs="-ljansson -lturbojpeg -ljpeg -lspng -lpcre2-8 -lutf8proc -lcurl -lcrypto -lopenblas -lm"
echo "fuzz: building the library"
# an object is rebuilt when its source is newer; a changed header (a struct's layout) rebuilds them all
if [ -f "$out/libjev-fuzz.a" ] && [ -n "$(find src common include -name '*.h' -newer "$out/libjev-fuzz.a" | head -1)" ]; then
  rm -f "$out"/obj/*.o
fi
find src common -name '*.c' -not -path 'src/backend/cuda/*' | sort | xargs -P "$(nproc)" -I{} sh -c \
  'o='"$out"'/obj/$(echo {} | tr / _).o; [ "$o" -nt {} ] || clang '"$cflags"' -fsanitize=fuzzer-no-link -c {} -o "$o"'
rm -f "$out/libjev-fuzz.a"
ar rcs "$out/libjev-fuzz.a" "$out"/obj/*.o
for t in "$@"; do
  name=$(basename "$t" .c)
  clang $cflags -fsanitize=fuzzer -o "$out/$name" "$t" "$out/libjev-fuzz.a" $libs
  corpus="fuzz/corpus/${name#fuzz-}"
  work="$out/corpus-$name"; mkdir -p "$work"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "fuzz: running $name for ${secs}s"
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$out/$name-" \
    "$work" 2>"$out/$name.log" || { tail -50 "$out/$name.log"; echo "fuzz: $name FAILED"; exit 1; }
  grep -E '^Done' "$out/$name.log" | tail -1 || true
done
echo "fuzz: all targets ran clean"
