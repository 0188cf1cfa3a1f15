#!/usr/bin/env bash
# The vision tower's speed (a benchmark, not a test): the full-size synthetic
# Qwen3.5-0.8B (configs/qwen3.5-0.8b.json, mlx4 layout, synthesized once into
# .models/synth-0.8b-mlx4) on the benchmark photo (assets/dog.jpg bounded
# within 768 -> 768x608, 456 image tokens): forward ms, GFLOP/s and the f32
# peak measured in the same run.
# Usage: scripts/bench-vision.sh [BUILD] [--threads N] [--repeats R]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift
make -s -j"$(nproc)" BUILD="$build" "$build/libjev.a" "$build/jev"
model=.models/synth-0.8b-mlx4
if [ ! -f "$model/config.json" ]; then
  mkdir -p .models
  "$build/jev" synth --config configs/qwen3.5-0.8b.json --seed 1 --layout mlx4 --out "$model" >/dev/null
fi
cc -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v3 -mtune=generic -Wall -Wextra -Werror -pthread -Iinclude -Isrc \
  bench/vision-bench.c "$build/libjev.a" -ljansson -lturbojpeg -lspng -lpcre2-8 -lutf8proc -lcrypto -lopenblas -lm \
  -o "$build/vision-bench"
"$build/vision-bench" "$model" assets/dog.jpg "$@"
