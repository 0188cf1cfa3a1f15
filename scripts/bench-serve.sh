#!/usr/bin/env bash
# bench-serve.sh - a load benchmark of `jev serve` with wrk: one replica alone, one
# replica behind nginx, and two replicas behind nginx (deploy/nginx/jev.conf, with
# only its machine lines rewritten, as tests/test-scale.c does). Each run POSTs one
# System One decision (/v1/systemone) over and over and prints requests/s and the
# latency percentiles. Results depend on the machine: replicas, nginx and wrk share
# its cores.
#
# It is not a test (tests/test-scale.c checks the answers and the failover) and it
# checks nothing but the HTTP status of the answers (wrk counts non-2xx).
#
#   scripts/bench-serve.sh [MODEL_DIR]      default: the tiny synthetic model
#
# Environment: BUILD (build), DURATION (10s), CONNS (8), THREADS (wrk threads, 2),
# JEV_THREADS (compute threads per replica, 1), PORT (nginx's port, 18480),
# BODY (a request JSON file; default: a 3-question decision without an image).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-build}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-8}
THREADS=${THREADS:-2}
JEV_THREADS=${JEV_THREADS:-1}
PORT=${PORT:-18480}
jev="$root/$BUILD/jev"
work="$root/$BUILD/bench-serve"

need() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || {
    echo "bench-serve: $1 is not installed; run scripts/setup.sh (it installs nginx and wrk)" >&2; exit 1; }; }
need wrk
need nginx
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$jev" ] || { echo "bench-serve: $jev is missing; run make first" >&2; exit 1; }

mkdir -p "$work"
model=${1:-}
if [ -z "$model" ]; then
    model="$work/tiny-hf"
    [ -f "$model/config.json" ] || "$jev" synth --config configs/tiny.json --seed 1 --layout hf --out "$model" >/dev/null
fi

body=${BODY:-$work/body.json}
if [ -z "${BODY:-}" ]; then
    cat >"$body" <<'EOF'
{"model":"jev-latest","state":{"note":"a red door"},"questions":{"door":{"type":"noul","instructions":"Is the door red?"},"color":{"type":"choice","instructions":"Which color?","criteria":{"red":null,"blue":"like the sky","green":null}},"size":{"type":"score","instructions":"How big?","criteria":["small","large"]}}}
EOF
fi
cat >"$work/post.lua" <<EOF
-- wrk: POST the request body; at the end one line of numbers
local f = assert(io.open("$body", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format("RESULT req/s %.1f  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (%d requests, %d non-2xx, %d socket errors)\n",
    summary.requests / s, latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, summary.requests, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
EOF

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap cleanup EXIT

# starts a replica on a free port; sets $port
replica() {
    local log="$work/replica-$1.log"
    "$jev" serve --model "$model" --port 0 --threads "$JEV_THREADS" >"$log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$port" ] && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    echo "bench-serve: replica $1 did not start" >&2; exit 1
}

# nginx in front of the given ports, from deploy/nginx/jev.conf
front() {
    local servers="" p
    for p in "$@"; do servers="$servers$p "; done
    awk -v prefix="$work" -v port="$PORT" -v servers="$servers" -v root="$(id -u)" '
        /^[ \t]*#/ { print; next }
        /^user / { if (root == 0) print "user root root;"; next }
        /^[ \t]*listen / { print "        listen 127.0.0.1:" port ";"; next }
        /^[ \t]*upstream / { up = 1; print; next }
        up && /^[ \t]*\}/ { up = 0; print; next }
        up && /^[ \t]*server / { if (!done) { n = split(servers, s, " "); rest = $0; sub(/^[ \t]*server [^ ;]*/, "", rest);
                                   for (i = 1; i <= n; i++) print "        server 127.0.0.1:" s[i] rest; done = 1 } next }
        { print }' deploy/nginx/jev.conf >"$work/nginx.conf"
    # pid, logs and temp folders: jev.conf's relative paths, under the prefix $work
    "$NGINX" -p "$work" -e "$work/jev-error.log" -c "$work/nginx.conf" -g 'daemon off;' &
    pids+=($!)
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench-serve: nginx did not answer /health" >&2; cat "$work/jev-error.log" >&2; exit 1
}

run() {
    local name=$1 url=$2
    curl -sf -H 'Content-Type: application/json' --data-binary @"$body" "$url/v1/systemone" >/dev/null \
        || { echo "bench-serve: $name: the request is refused; check $body" >&2; exit 1; }
    wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$work/post.lua" "$url/v1/systemone" >"$work/wrk-$name.txt"
    printf '%-26s %s\n' "$name" "$(grep '^RESULT' "$work/wrk-$name.txt" | sed 's/^RESULT //')"
}

echo "bench-serve: model $model, $(nproc) cores, wrk -t$THREADS -c$CONNS -d$DURATION, --threads $JEV_THREADS per replica"
replica 1; p1=$port
run "1 replica, direct" "http://127.0.0.1:$p1"
front "$p1"
run "1 replica, nginx" "http://127.0.0.1:$PORT"
cleanup
replica 1; p1=$port
replica 2; p2=$port
front "$p1" "$p2"
run "2 replicas, nginx" "http://127.0.0.1:$PORT"
