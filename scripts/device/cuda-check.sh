#!/usr/bin/env bash
# scripts/device/cuda-check.sh - the CUDA backend's build-check-measure cycle on the GPU machine.
#
# What it is: one device command's worth of checks for `make CUDA=1` builds carried from the
# development machine (which has nvcc but no GPU): the op parity tests against the CPU backend
# (tests/cuda/), the engine end to end (the same decisions on the CPU and on the GPU, full-size
# synthetic model), the op profile on the GPU, `jev bench --backend cuda` beside the transformers
# GPU peer's committed record (distributions compared, ratios in the report), and the fast
# precision mode (bf16 tensor-core products): its answers against exact, jev verify in fast, and
# `jev bench --precision fast`, which measures fast's probability delta against exact in the run.
# Both bench steps read the peak device memory from the record and fail over MEM_LIMIT.
#
# Build here first (the GPU machine has another distribution; see docs/backends.md):
#   make PORTABLE=1 CUDA=1 BUILD=build-portable-cuda build-portable-cuda/jev build-portable-cuda/bench/serve-load cuda-tests
#   bash scripts/device/cuda-check.sh pack      # -> .carry-cuda/ (gitignored), then carry it
# On the GPU machine, from the repository root:
#   bash scripts/device/cuda-check.sh unpack tests agree profile bench fast report
#
# Steps: pack (dev machine) | unpack tests sanitize agree profile bench fast serve report collect (collect,
# last: everything in $OUT as one results.tar.gz, since the device tool returns 8 files; sanitize: the
# parity binaries under compute-sanitizer memcheck and racecheck, slow; JEV_CUDA_SYNC=1 names a
# faulting op)
# Knobs: WORK (/tmp/jev-cuda), OUT (set by the device tool), COUNTS ("1 4 16 64"), REPEATS (3), BENCH_ARGS
# (more options for both bench steps),
# PEER_RECORD (the transformers GPU f32 record to set beside jev; default the committed run 3),
# MODEL (a model directory to use instead of synthesizing one), AGREE_TOL (1e-4: the largest
# CPU-vs-CUDA probability difference agree accepts; measured 4.1e-6), CUDA_HOME (/usr/local/cuda),
# MEM_LIMIT (1.5e9: the largest peak device memory, bytes, a bench record may show), FAST_TOL (0.1:
# the largest exact-vs-fast probability difference of the 8 questions; a guard against a wrong
# product, not fast's accuracy, which the fast step prints and the record keeps), FAST_VERIFY_TOL
# (0.1: jev verify's log-probability tolerance in fast mode, where both of its sides round to bf16
# with their own batch shapes; measured 0.031 on the H200 in run 6 (the first guess, 1e-2, was below
# bf16's own noise); like FAST_TOL a guard against a wrong product, the measured value is printed).
# Exit status: every step runs, even after one fails; the script exits 1 when any step failed
# (a parity test, a sanitizer report, a disagreement, a failed command), naming it in log.txt,
# else 0. tests/test-plumbing.c runs the steps that need no GPU on planted binaries.
# SERVE_MODES (exact fast), SERVE_STEPS (1,4,16,32), SERVE_RUNS (3), SERVE_DURATION (15), SERVE_WARMUP (3):
# the serve step's modes, concurrency steps, fresh servers per mode and seconds per step.
# Files back in $OUT: tests.txt, sanitize.txt, agree.txt, profile.txt, jev-cuda.json, fast.txt,
# jev-cuda-fast.json, report.md, report.svg, compare.txt, serve-MODE.tar.gz (serve-MODE/ packed), log.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/jev-cuda}
OUT=${OUT:-$WORK/out}
COUNTS=${COUNTS:-1 4 16 64}
BENCH_ARGS=${BENCH_ARGS:-} # more `jev bench` options for both bench steps (words), e.g. "--batch all --paths shared"
REPEATS=${REPEATS:-3}
PEER_RECORD=${PEER_RECORD:-bench/results/2026-12-01-h200-vm-16core-run3/peer-cuda-f32.json}
BIN=$WORK/bin
JEV=$BIN/jev
MODEL=${MODEL:-$WORK/model}
mkdir -p "$WORK" "$OUT"
rm -f "$WORK/collected"

# after collect (the marker), messages go to stderr only: $OUT must keep the archive alone
log() {
    if [ -e "$WORK/collected" ]; then
        printf '[cuda-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
    else
        printf '[cuda-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$OUT/log.txt" >&2
    fi
}
die() { log "error: $*"; exit 1; }

step_pack() {
    local b=build-portable-cuda
    [ -x $b/jev ] && [ -x $b/bench/serve-load ] ||
        die "$b/jev: build it first (make PORTABLE=1 CUDA=1 BUILD=$b $b/jev $b/bench/serve-load cuda-tests)"
    rm -rf .carry-cuda && mkdir -p .carry-cuda/bin
    strip -o .carry-cuda/bin/jev $b/jev
    for t in $b/tests-cuda/test-* $b/bench/serve-load; do strip -o ".carry-cuda/bin/${t##*/}" "$t"; done
    # one xz stream over all of them: every binary holds the same 27 MB of library and kernels, which a
    # 64 MiB window stores once (5 MB in all, where gzip per file made 58 MB of the 64 MiB that travel)
    tar -C .carry-cuda/bin -cf - . | xz -9 -T1 > .carry-cuda/bin.tar.xz
    rm -rf .carry-cuda/bin
    cp -L /usr/lib/x86_64-linux-gnu/libspng.so.0 .carry-cuda/
    cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 .carry-cuda/
    git rev-parse HEAD > .carry-cuda/COMMIT
    log "packed .carry-cuda: $(ls .carry-cuda | tr '\n' ' ')(carry it with .cache/tokenizer-qwen3)"
}

step_unpack() {
    [ -d .carry-cuda ] || die ".carry-cuda: not carried"
    mkdir -p "$BIN"
    # Python's tarfile reads xz whether or not the machine has the xz tool
    python3 - .carry-cuda/bin.tar.xz "$BIN" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:  # a Python without extraction filters
        t.extractall(sys.argv[2])
PY
    chmod +x "$BIN"/*
    cp .carry-cuda/*.so.* "$BIN/"
    if ldd "$JEV" | grep -q 'not found'; then die "missing libraries: $(ldd "$JEV" | grep 'not found' | tr '\n' ';')"; fi
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/log.txt"
    if [ ! -f "$MODEL/config.json" ]; then
        "$JEV" synth --config configs/qwen3.5-0.8b.json --seed 1 --layout mlx4 --out "$MODEL" --force | tail -1
    fi
}

# every parity binary (each runs even after one fails); fails when any failed or none is there
step_tests() {
    : > "$OUT/tests.txt"
    local t rc all=0 n=0
    for t in "$BIN"/test-cuda-*; do
        [ -x "$t" ] || continue
        n=$((n + 1))
        rc=0
        (cd "$PWD" && CMOCKA_TEST_ABORT=1 LD_LIBRARY_PATH=$BIN "$t") >> "$OUT/tests.txt" 2>&1 || rc=$?
        log "${t##*/}: exit $rc"
        [ $rc -eq 0 ] || all=1
    done
    grep -E '^\[  (PASSED|FAILED)  \]|ERROR|FAILED' "$OUT/tests.txt" | tee -a "$OUT/log.txt" || true
    [ $n -gt 0 ] || die "no parity binaries in $BIN (unpack first)"
    return $all
}

# the parity binaries under compute-sanitizer (memcheck, then racecheck): slow, run when time allows
step_sanitize() {
    local cs=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer t tool rc all=0
    [ -x "$cs" ] || die "$cs: not found"
    : > "$OUT/sanitize.txt"
    for tool in memcheck racecheck; do
        for t in "$BIN"/test-cuda-*; do
            # test-cuda-fault plants an illegal address on purpose: memcheck would report it
            [ "${t##*/}" = test-cuda-fault ] && continue
            log "compute-sanitizer --tool $tool ${t##*/}"
            rc=0
            LD_LIBRARY_PATH=$BIN "$cs" --tool "$tool" --error-exitcode 9 "$t" > "$WORK/san.log" 2>&1 || rc=$?
            { grep -E '=========|PASSED|FAILED' "$WORK/san.log" || true; } | tail -8 | sed "s|^|${t##*/} $tool: |" \
                >> "$OUT/sanitize.txt"
            [ $rc -eq 0 ] || { log "${t##*/} under $tool: exit $rc"; all=1; }
        done
    done
    tee -a "$OUT/log.txt" < "$OUT/sanitize.txt"
    return $all
}

# the same 8 questions through the CPU and the CUDA engine: the largest probability difference
# (fails over AGREE_TOL or on a different answer), then jev verify on the GPU (fails as it does)
step_agree() {
    local q=(--model "$MODEL" --workload bench/dog-workload.json --decisions 8 --json) rc=0
    "$JEV" decide "${q[@]}" --backend cpu > "$WORK/cpu.json"
    "$JEV" decide "${q[@]}" --backend cuda > "$WORK/cuda.json"
    python3 - "$WORK/cpu.json" "$WORK/cuda.json" "${AGREE_TOL:-1e-4}" > "$OUT/agree.txt" <<'PY' || rc=1
import json, sys
a, b = (json.load(open(p))["answers"] for p in sys.argv[1:3])
tol = float(sys.argv[3])
worst, same = 0.0, True
for k, x in a.items():
    y = b[k]
    for o, p in x.get("probabilities", {}).items():
        worst = max(worst, abs(p - y["probabilities"][o]))
    for key in ("noul", "score"):
        if key in x:
            worst = max(worst, abs(x[key] - y[key]))
    same = same and x.get("choice", x.get("noul")) == y.get("choice", y.get("noul"))
print(f"cpu vs cuda, 8 questions: max probability delta {worst:.3g}, same answers: {same}")
if not same or not worst <= tol:
    print(f"agree: FAILED (tolerance {tol:g})")
    sys.exit(1)
PY
    tee -a "$OUT/log.txt" < "$OUT/agree.txt"
    # multi-token scoring against plain full-vocabulary forwards, both on the GPU
    "$JEV" verify --model "$MODEL" --backend cuda --output "$WORK/verify.json" > "$WORK/verify.txt" 2>&1 || rc=1
    tail -2 "$WORK/verify.txt" | tee -a "$OUT/agree.txt" | tee -a "$OUT/log.txt"
    return $rc
}

step_profile() {
    JEV_PROFILE=1 "$JEV" decide --model "$MODEL" --workload bench/dog-workload.json --decisions 8 --backend cuda \
        2>&1 | grep -v '^q0' | tee "$OUT/profile.txt" | tee -a "$OUT/log.txt"
}

# The largest peak_bytes of a bench record, and fast's agreement with exact when it has one; fails
# over MEM_LIMIT bytes or when the record has no memory figure.
check_record() {
    python3 - "$1" "${MEM_LIMIT:-1.5e9}" <<'PY'
import json, sys
rec, limit = json.load(open(sys.argv[1])), float(sys.argv[2])
peaks = [(s["peak_bytes"], r["decisions"], r["path"]) for r in rec["runs"] for s in r["samples"]
         if s.get("peak_bytes") is not None]
for a in rec["agreement"]:
    for path, e in sorted((a.get("fast_vs_exact") or {}).items()):
        d, m = e["max_prob_delta"], e["argmax_agreement"]
        print(f"  fast vs exact, {a['decisions']} decisions, {path}: max probability delta "
              f"{'n/a' if d is None else f'{d:.3g}'}, argmax agreement {'n/a' if m is None else f'{100 * m:.1f}%'}")
if not peaks:
    print(f"{sys.argv[1]}: no peak device memory recorded")
    sys.exit(1)
top = max(peaks)
print(f"{sys.argv[1]}: peak device memory {top[0] / 1e9:.3f} GB ({top[0] / 2**20:.0f} MiB, {top[1]} decisions, "
      f"{top[2]}); limit {limit / 1e9:.2f} GB")
if top[0] > limit:
    print(f"memory: FAILED (over {limit / 1e9:.2f} GB)")
    sys.exit(1)
PY
}

step_bench() {
    local rc=0
    # shellcheck disable=SC2086 # COUNTS and BENCH_ARGS are lists of words
    "$JEV" bench --model "$MODEL" --backend cuda --counts $COUNTS --repeats "$REPEATS" $BENCH_ARGS \
        --git-commit "$(cat .carry-cuda/COMMIT)" --output "$OUT/jev-cuda.json" 2>&1 | tail -20 | tee -a "$OUT/log.txt"
    check_record "$OUT/jev-cuda.json" 2>&1 | tee -a "$OUT/log.txt" || rc=1
    if [ -f "$PEER_RECORD" ]; then
        python3 bench/peers/transformers.py --record "$PEER_RECORD" --compare-with "$OUT/jev-cuda.json" \
            > "$OUT/compare.txt" 2>&1 || rc=1
        tee -a "$OUT/log.txt" < "$OUT/compare.txt"
    fi
    return $rc
}

# Fast mode: the 8 questions exact and fast on the GPU (the largest probability difference; fails over
# FAST_TOL, or when either run fails), jev verify in fast, then `jev bench --precision fast` (which also
# runs exact references and records fast's delta per row) and its peak device memory.
step_fast() {
    local q=(--model "$MODEL" --workload bench/dog-workload.json --decisions 8 --json --backend cuda) rc=0
    "$JEV" decide "${q[@]}" > "$WORK/exact.json"
    "$JEV" decide "${q[@]}" --precision fast > "$WORK/fast.json"
    python3 - "$WORK/exact.json" "$WORK/fast.json" "${FAST_TOL:-0.1}" > "$OUT/fast.txt" <<'PY' || rc=1
import json, math, sys
a, b = (json.load(open(p))["answers"] for p in sys.argv[1:3])
tol = float(sys.argv[3])
worst, same, n = 0.0, 0, 0
for k, x in a.items():
    y = b[k]
    for o, p in x.get("probabilities", {}).items():
        worst = max(worst, abs(p - y["probabilities"][o]) if math.isfinite(y["probabilities"][o]) else math.inf)
    for key in ("noul", "score"):
        if key in x:
            worst = max(worst, abs(x[key] - y[key]))
    same += x.get("choice", x.get("noul")) == y.get("choice", y.get("noul"))
    n += 1
print(f"exact vs fast on cuda, {n} questions: max probability delta {worst:.3g}, same answers {same}/{n}")
if not worst <= tol:
    print(f"fast: FAILED (tolerance {tol:g})")
    sys.exit(1)
PY
    tee -a "$OUT/log.txt" < "$OUT/fast.txt"
    "$JEV" verify --model "$MODEL" --backend cuda --precision fast --tolerance "${FAST_VERIFY_TOL:-0.1}" \
        --output "$WORK/verify-fast.json" > "$WORK/verify-fast.txt" 2>&1 || rc=1
    tail -2 "$WORK/verify-fast.txt" | tee -a "$OUT/fast.txt" | tee -a "$OUT/log.txt"
    # shellcheck disable=SC2086 # COUNTS and BENCH_ARGS are lists of words
    "$JEV" bench --model "$MODEL" --backend cuda --precision fast --counts $COUNTS --repeats "$REPEATS" $BENCH_ARGS \
        --git-commit "$(cat .carry-cuda/COMMIT)" --output "$OUT/jev-cuda-fast.json" 2>&1 | tail -30 |
        tee -a "$OUT/log.txt" || rc=1
    check_record "$OUT/jev-cuda-fast.json" 2>&1 | tee -a "$OUT/fast.txt" | tee -a "$OUT/log.txt" || rc=1
    return $rc
}

# The server under load (scripts/serve-load.sh: distinct photo crops, 4 choice questions each, closed-loop
# clients at SERVE_STEPS, SERVE_RUNS fresh servers) in each of SERVE_MODES, and one request's answers alone
# against 16 at once (scripts/serve-company.sh). Results in $OUT/serve-MODE.tar.gz.
step_serve() {
    local mode rc=0 opts=(--backend cuda --threads 16 --max-running 48 --max-tokens 16384 --step-tokens 2048)
    for mode in ${SERVE_MODES:-exact fast}; do
        JEV=$JEV LOAD=$BIN/serve-load LD_LIBRARY_PATH=$BIN RUNS=${SERVE_RUNS:-3} STEPS=${SERVE_STEPS:-1,4,16,32} \
            DURATION=${SERVE_DURATION:-15} WARMUP=${SERVE_WARMUP:-3} \
            bash scripts/serve-load.sh "$OUT/serve-$mode" "$MODEL" -- "${opts[@]}" --precision "$mode" 2>&1 |
            tee -a "$OUT/log.txt" || rc=1
        JEV=$JEV LOAD=$BIN/serve-load LD_LIBRARY_PATH=$BIN \
            bash scripts/serve-company.sh "$OUT/serve-$mode/company" "$MODEL" 16 -- --backend cuda --step-tokens 2048 \
            --precision "$mode" 2>&1 | tail -2 | tee -a "$OUT/log.txt" || rc=1
        # the device tool brings back at most 8 files a call: each mode's files as one archive (the
        # printed tables are in log.txt as well)
        tar czf "$OUT/serve-$mode.tar.gz" -C "$OUT" "serve-$mode" && rm -rf "${OUT:?}/serve-$mode" || rc=1
    done
    return $rc
}

step_report() {
    local files=("$OUT/jev-cuda.json")
    [ -f "$OUT/jev-cuda-fast.json" ] && files+=("$OUT/jev-cuda-fast.json")
    [ -f "$PEER_RECORD" ] && files+=("$PEER_RECORD")
    "$JEV" report "${files[@]}" --output "$OUT/report.md" --svg "$OUT/report.svg" | tee -a "$OUT/log.txt"
}

# Everything in $OUT as one archive, results.tar.gz (the originals removed): the device tool brings back
# at most 8 files a call, and the steps above write more (run 9 lost its kernel tables that way). Last.
step_collect() {
    local f=results.tar.gz
    (cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name "$f" -printf '%P\n' | sort > "$WORK/collect.list")
    tar czf "$WORK/$f" -C "$OUT" -T "$WORK/collect.list"
    (cd "$OUT" && xargs rm -rf -- < "$WORK/collect.list")
    mv "$WORK/$f" "$OUT/$f"
    touch "$WORK/collected"
    printf 'collect: %s holds %s\n' "$f" "$(tr '\n' ' ' < "$WORK/collect.list")" >&2
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
for s in "$@"; do
    case $s in
    pack | unpack | tests | sanitize | agree | profile | bench | fast | serve | report | collect) ;;
    *) die "unknown step '$s' (pack unpack tests sanitize agree profile bench fast serve report collect)" ;;
    esac
done
# Each step in a subshell with errexit on: its first failing command ends that step only (a
# function called as `f || ...` would run with errexit off, hence the subshell's status is read
# with errexit off around it instead). The exit status is the OR of the steps'.
failed=""
for s in "$@"; do
    log "step $s"
    set +e
    (set -e; "step_$s")
    rc=$?
    set -e
    [ $rc -eq 0 ] || { failed="$failed $s"; log "step $s FAILED (exit $rc)"; }
done
[ -z "$failed" ] || { log "failed steps:$failed"; exit 1; }
log "every step passed: $*"
