#!/usr/bin/env bash
# The README's main job: answer the benchmark's eight questions about the
# bundled photo (assets/dog.jpg) on the shared path, and print the table.
#
# The model: .models/Qwen3.5-0.8B-4bit when it is there (the real weights,
# `jev download mlx-community/Qwen3.5-0.8B-4bit`); otherwise a synthetic model
# with the real 0.8B shapes and seeded random weights, written on first use
# into .models/synth-0.8b-mlx4. Its answers are meaningless: the run then
# shows the machinery and its speed, not the model's knowledge.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
jev="$build/jev"
model=.models/Qwen3.5-0.8B-4bit
if [ ! -f "$model/config.json" ]; then
  model=.models/synth-0.8b-mlx4
  echo "main job: no real model in .models/Qwen3.5-0.8B-4bit; using a SYNTHETIC full-size model"
  echo "          (random weights: its answers are meaningless, the timings are real)"
  if [ ! -f "$model/config.json" ]; then
    mkdir -p .models
    "$jev" synth --config configs/qwen3.5-0.8b.json --seed 1 --layout mlx4 --out "$model"
  fi
fi
exec "$jev" decide --model "$model" --workload bench/dog-workload.json --decisions 8
