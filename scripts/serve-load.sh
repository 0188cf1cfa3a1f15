#!/usr/bin/env bash
# serve-load.sh - the load benchmark of one `jev serve` (bench/serve-load.c): builds the load
# generator, starts the server on a free loopback port with the given options, runs the
# concurrency steps against it, stops it with SIGTERM (and records its exit status), and writes
# everything needed to read the figures again into OUT: the results (serve-load.json, one per
# run), the server's log, the commit, the machine and the exact commands (run.md).
#
# It is not a test (the answers are not checked, only their statuses) and it is bounded in time:
# every step runs WARMUP + DURATION seconds, plus the last answers (at most TIMEOUT).
#
#   scripts/serve-load.sh OUT MODEL_DIR [-- jev serve options...]
#
# Environment: BUILD (build), JEV (the jev binary; default $BUILD/jev), STEPS (1,4,16,32),
# DURATION (30), WARMUP (5), QUESTIONS (4, or A-B), TYPES (choice|mixed), RUNS (1: runs of every
# step, one server each), TIMEOUT (300), SEED (1), IMAGE (assets/dog.jpg),
# LOAD (a serve-load binary to use instead of building $BUILD/bench/serve-load).
#
# The H200 (the issue's targets: 4 questions, distinct crops, concurrency 32, medians of 3 runs):
#   make CUDA=1 build/jev build/bench/serve-load
#   RUNS=3 STEPS=1,4,16,32 scripts/serve-load.sh bench/results/DATE-h200-serve-exact MODEL -- --backend cuda
#   RUNS=3 STEPS=1,4,16,32 scripts/serve-load.sh bench/results/DATE-h200-serve-fast MODEL -- --backend cuda --precision fast
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -ge 2 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
out=$1 model=$2
shift 2
[ "${1:-}" = "--" ] && shift
BUILD=${BUILD:-build}
JEV=${JEV:-$root/$BUILD/jev}
STEPS=${STEPS:-1,4,16,32}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-5}
QUESTIONS=${QUESTIONS:-4}
TYPES=${TYPES:-choice}
RUNS=${RUNS:-1}
TIMEOUT=${TIMEOUT:-300}
SEED=${SEED:-1}
IMAGE=${IMAGE:-assets/dog.jpg}
load=${LOAD:-$root/$BUILD/bench/serve-load}

[ -n "${LOAD:-}" ] || make --no-print-directory -s "$BUILD/bench/serve-load" >/dev/null
. scripts/http.sh
[ -x "$JEV" ] || { echo "serve-load: $JEV is missing; run make first" >&2; exit 1; }
mkdir -p "$out"

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap cleanup EXIT

{
    echo "# serve-load run"
    echo
    echo "- commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- src tools common || echo ' (with local changes)')"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
    command -v nvidia-smi >/dev/null && echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    echo "- model: $model ($(sha256sum "$model/model.safetensors" 2>/dev/null | cut -c1-16)...)"
    echo "- server: \`$JEV serve --model $model --port 0 $*\`"
    echo "- load: \`serve-load --concurrency $STEPS --duration $DURATION --warmup $WARMUP --questions $QUESTIONS --types $TYPES --seed SEED --image $IMAGE --timeout $TIMEOUT\`, $RUNS run(s), seeds $SEED.."
    echo
} >"$out/run.md"

for run in $(seq 1 "$RUNS"); do
    log=$out/server-$run.log
    "$JEV" serve --model "$model" --port 0 "$@" >"$log.out" 2>"$log" &
    pid=$!
    port=
    for _ in $(seq 1 1200); do
        port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log.out" | head -1)
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$port" ] || { echo "serve-load: the server did not start" >&2; exit 1; }
    echo "run $run: server pid $pid on port $port" | tee -a "$out/run.md"
    rc=0
    "$load" --url "http://127.0.0.1:$port" --concurrency "$STEPS" --duration "$DURATION" --warmup "$WARMUP" \
        --questions "$QUESTIONS" --types "$TYPES" --seed $((SEED + run - 1)) --image "$IMAGE" --timeout "$TIMEOUT" \
        --server-pid "$pid" --output "$out/serve-load-$run.json" | tee -a "$out/run.md" || rc=$?
    http "http://127.0.0.1:$port/metrics" >"$out/metrics-$run.txt" || true
    kill -TERM "$pid"
    status=0
    wait "$pid" || status=$?
    pid=
    echo "run $run: load exit $rc, server exit status $status" | tee -a "$out/run.md"
    echo >>"$out/run.md"
done
