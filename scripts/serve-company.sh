#!/usr/bin/env bash
# serve-company.sh - how much a request's answers depend on the requests batched with it, on any
# model and backend: N distinct requests (bench/serve-load.c --dump: photo crops, mixed question
# counts and types) answered one at a time by one server, then all at once by a fresh one, and
# compared (serve-load --compare: the largest |dp| and whether keys, choices or usage differ).
# The tests hold the tiny model to the same rule (tests/test-serve-batch.c); this measures it where
# the tests cannot run (the full-size model, the GPU).
#
#   scripts/serve-company.sh OUT MODEL_DIR N [-- jev serve options...]
#
# Environment: BUILD (build), JEV (default $BUILD/jev), SEED (1), QUESTIONS (1-6), TYPES (mixed), LOAD (as in
# serve-load.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -ge 3 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
out=$1 model=$2 n=$3
shift 3
[ "${1:-}" = "--" ] && shift
BUILD=${BUILD:-build}
JEV=${JEV:-$root/$BUILD/jev}
load=${LOAD:-$root/$BUILD/bench/serve-load}
[ -n "${LOAD:-}" ] || make --no-print-directory -s "$BUILD/bench/serve-load" >/dev/null
. scripts/http.sh
mkdir -p "$out/bodies" "$out/alone" "$out/company"
"$load" --dump "$out/bodies" "$n" --seed "${SEED:-1}" --questions "${QUESTIONS:-1-6}" --types "${TYPES:-mixed}"

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap cleanup EXIT
start() { # a server on a free port; sets pid and port
    "$JEV" serve --model "$model" --port 0 "$@" >"$out/server.out" 2>>"$out/server.log" &
    pid=$!
    port=
    for _ in $(seq 1 1200); do
        port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/server.out" | head -1)
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || exit 1
        sleep 0.1
    done
    exit 1
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }
ask() { http "http://127.0.0.1:$port/v1/systemone" "$1" >"$2"; }

start "$@"
for i in $(seq 0 $((n - 1))); do
    f=$(printf '%03d' "$i")
    ask "$out/bodies/request-$f.json" "$out/alone/answer-$f.json"
done
stop
start --max-running "$n" "$@"
for i in $(seq 0 $((n - 1))); do
    f=$(printf '%03d' "$i")
    ask "$out/bodies/request-$f.json" "$out/company/answer-$f.json" &
done
wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null || true
http "http://127.0.0.1:$port/metrics" | grep -E '^jev_batch_requests_(sum|count)' >"$out/company/batch.txt"
stop
rm -rf "$out/bodies" # a few MB of base64 photos: the seed and the generator make them again
"$load" --compare "$out/alone" "$out/company" "$n" | tee "$out/compare.txt"
