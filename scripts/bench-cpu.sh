#!/usr/bin/env bash
# CPU speed of the language model (a benchmark, not a test): `make bench`.
#
# Synthesizes the full-size Qwen3.5-0.8B shapes (configs/qwen3.5-0.8b.json) in
# the MLX 4-bit layout once into .models/synth-0.8b-mlx4 (seeded random
# weights, ~0.5 GB), then runs `jev run` three times: a 512-token prefill in
# one chunk followed by 32 greedy decode steps, with the f32 FMA peak of the
# machine measured in the same run. Prints each run's summary line and the
# median prefill and decode rates.
#   usage: bash scripts/bench-cpu.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
jev=$root/$build/jev
model=$root/.models/synth-0.8b-mlx4
if [ ! -f "$model/model.safetensors" ]; then
  echo "bench-cpu: synthesizing $model (once)"
  "$jev" synth --config "$root/configs/qwen3.5-0.8b.json" --seed 1 --layout mlx4 --out "$model"
fi
echo "bench-cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
pre=(); dec=()
for i in $(seq 1 "$repeats"); do
  out=$("$jev" run --model "$model" --random-tokens 512 --chunk 512 --decode 32 --top 0 --peak)
  echo "$out" | grep -E '^prefill:|^jev run:'
  pre+=("$(echo "$out" | sed -n 's/.*prefill [0-9]* tok [0-9.]* ms (\([0-9.]*\) tok\/s).*/\1/p')")
  dec+=("$(echo "$out" | sed -n 's/.*decode [0-9]* tok \([0-9.]*\) tok\/s.*/\1/p')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "bench-cpu: median of $repeats: prefill $(median "${pre[@]}") tok/s (512 tokens), decode $(median "${dec[@]}") tok/s"
