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
make -s -j"$(nproc)" BUILD="$build" "$build/jev" "$build/bench/vision-bench"
model=.models/synth-0.8b-mlx4
if [ ! -f "$model/config.json" ]; then
  mkdir -p .models
  "$build/jev" synth --config configs/qwen3.5-0.8b.json --seed 1 --layout mlx4 --out "$model" >/dev/null
fi
"$build/bench/vision-bench" "$model" assets/dog.jpg "$@"
