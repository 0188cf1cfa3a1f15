#!/usr/bin/env bash
# scripts/device/scaling.sh - where the CPU backend's time goes as threads grow, on a many-core
# machine (made for the GPU machine's CPU cores; runs anywhere).
#
# What it is: one command that prints (1) the CPU layout (lscpu), (2) bench/cpu-scaling: FMA
# peak, the backend's split-sgemm scheme against OpenBLAS's own threads, and the pool's
# empty-job cost for 1, 2, 4, ... threads, (3) `jev run` prefill/decode rates per thread count,
# and (4) JEV_PROFILE=1 `jev decide` (the main job's 8 questions) per thread count: the phases
# and the per-op table (src/backend/profile.h), (5) bench/gemm-bench: exact mode's two product
# kernels (OpenBLAS, the AVX-512 kernel of cpu-gemm-avx512.c) side by side at the model's shapes on
# every core, and the decision's profile with the AVX-512 kernel at the largest thread count.
# Everything also goes to $OUT/scaling.txt.
#
# What it is not: a build. Carry build-portable (make PORTABLE=1 BUILD=build-portable jev
# build-portable/bench/cpu-scaling build-portable/bench/gemm-bench) and .cache/tokenizer-qwen3
# (for jev synth).
#   usage: bash scripts/device/scaling.sh [THREADS...]   (default: 16 8 4 2, capped at nproc)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build-portable}
OUT=${OUT:-/tmp/jev-scaling}
MODEL=${MODEL:-/tmp/jev-scaling-model}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/scaling.txt") 2>&1
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(16 8 4 2)
n=$(nproc)
echo "== lscpu"; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA|MHz|L1d|L2|L3|Flags' | cut -c1-200
# the CLI re-executes itself with a matching OPENBLAS_CORETYPE; the bench program does not, so set it
case "$(grep -m1 -o 'avx512f' /proc/cpuinfo)" in avx512f) export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} ;; esac
echo "== cpu-scaling (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto})"
"$B/bench/cpu-scaling" --max-threads "$n" --repeats 7
"$B/bench/cpu-scaling" --max-threads "$n" --repeats 7 --tokens 100 --rows 6144
if [ ! -f "$MODEL/config.json" ]; then
  "$B/jev" synth --config configs/qwen3.5-0.8b.json --seed 1 --layout mlx4 --out "$MODEL" --force >/dev/null
fi
for t in "${threads[@]}"; do
  [ "$t" -le "$n" ] || continue
  echo "== jev run, $t threads"
  "$B/jev" run --model "$MODEL" --random-tokens 512 --chunk 512 --decode 16 --top 0 --peak --threads "$t" | grep -E 'prefill|jev run'
  "$B/jev" run --model "$MODEL" --random-tokens 532 --chunk 532 --decode 0 --top 0 --forks 16 --suffix 25 --threads "$t" | grep -E 'fork|jev run'
  echo "== jev decide (JEV_PROFILE=1), $t threads"
  JEV_PROFILE=1 "$B/jev" decide --model "$MODEL" --workload bench/dog-workload.json --decisions 8 --threads "$t" | grep -v '^q0'
done
if [ -x "$B/bench/gemm-bench" ]; then
  echo "== gemm-bench, $n threads: OpenBLAS against the AVX-512 kernel"
  "$B/bench/gemm-bench" --threads "$n" --repeats 7
  "$B/bench/gemm-bench" --threads "$n" --repeats 7 --tokens 216
  t=${threads[0]}
  [ "$t" -le "$n" ] || t=$n
  echo "== jev decide (JEV_PROFILE=1, JEV_CPU_GEMM=avx512), $t threads"
  JEV_CPU_GEMM=avx512 JEV_PROFILE=1 "$B/jev" decide --model "$MODEL" --workload bench/dog-workload.json --decisions 8 \
    --threads "$t" | grep -v '^q0'
fi
