#!/usr/bin/env bash
# scripts/device/cuda-check.sh - the CUDA backend's build-check-measure cycle on the GPU machine.
#
# What it is: one device command's worth of checks for `make CUDA=1` builds carried from the
# development machine (which has nvcc but no GPU): the op parity tests against the CPU backend
# (tests/cuda/), the engine end to end (the same decisions on the CPU and on the GPU, full-size
# synthetic model), the op profile on the GPU, and `jev bench --backend cuda` beside the
# transformers GPU peer's committed record (distributions compared, ratios in the report).
#
# Build here first (the GPU machine has another distribution; see docs/backends.md):
#   make PORTABLE=1 CUDA=1 BUILD=build-portable-cuda build-portable-cuda/jev cuda-tests
#   bash scripts/device/cuda-check.sh pack      # -> .carry-cuda/ (gitignored), then carry it
# On the GPU machine, from the repository root:
#   bash scripts/device/cuda-check.sh unpack tests agree profile bench report
#
# Steps: pack (dev machine) | unpack tests sanitize agree profile bench report (sanitize: the parity
# binaries under compute-sanitizer memcheck and racecheck, slow; JEV_CUDA_SYNC=1 names a faulting op)
# Knobs: WORK (/tmp/jev-cuda), OUT (set by the device tool), COUNTS ("1 4 16 64"), REPEATS (3),
# PEER_RECORD (the transformers GPU f32 record to set beside jev; default the committed run 3),
# MODEL (a model directory to use instead of synthesizing one), AGREE_TOL (1e-4: the largest
# CPU-vs-CUDA probability difference agree accepts; measured 4.1e-6), CUDA_HOME (/usr/local/cuda).
# Exit status: every step runs, even after one fails; the script exits 1 when any step failed
# (a parity test, a sanitizer report, a disagreement, a failed command), naming it in log.txt,
# else 0. tests/test-plumbing.c runs the steps that need no GPU on planted binaries.
# Files back in $OUT: tests.txt, sanitize.txt, agree.txt, profile.txt, jev-cuda.json, report.md,
# report.svg, compare.txt, log.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/jev-cuda}
OUT=${OUT:-$WORK/out}
COUNTS=${COUNTS:-1 4 16 64}
REPEATS=${REPEATS:-3}
PEER_RECORD=${PEER_RECORD:-bench/results/2026-12-01-h200-vm-16core-run3/peer-cuda-f32.json}
BIN=$WORK/bin
JEV=$BIN/jev
MODEL=${MODEL:-$WORK/model}
mkdir -p "$WORK" "$OUT"

log() { printf '[cuda-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$OUT/log.txt" >&2; }
die() { log "error: $*"; exit 1; }

step_pack() {
    local b=build-portable-cuda
    [ -x $b/jev ] || die "$b/jev: build it first (make PORTABLE=1 CUDA=1 BUILD=$b $b/jev cuda-tests)"
    rm -rf .carry-cuda && mkdir -p .carry-cuda
    strip -o .carry-cuda/jev $b/jev
    for t in $b/tests-cuda/test-*; do strip -o ".carry-cuda/${t##*/}" "$t"; done
    gzip .carry-cuda/jev .carry-cuda/test-*
    cp -L /usr/lib/x86_64-linux-gnu/libspng.so.0 .carry-cuda/
    cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 .carry-cuda/
    git rev-parse HEAD > .carry-cuda/COMMIT
    log "packed .carry-cuda: $(ls .carry-cuda | tr '\n' ' ')(carry it with .cache/tokenizer-qwen3)"
}

step_unpack() {
    [ -d .carry-cuda ] || die ".carry-cuda: not carried"
    mkdir -p "$BIN"
    for f in .carry-cuda/*.gz; do local n=${f##*/}; gunzip -c "$f" > "$BIN/${n%.gz}"; chmod +x "$BIN/${n%.gz}"; done
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

step_bench() {
    # shellcheck disable=SC2086 # COUNTS is a list of words
    "$JEV" bench --model "$MODEL" --backend cuda --counts $COUNTS --repeats "$REPEATS" \
        --git-commit "$(cat .carry-cuda/COMMIT)" --output "$OUT/jev-cuda.json" 2>&1 | tail -20 | tee -a "$OUT/log.txt"
    if [ -f "$PEER_RECORD" ]; then
        local rc=0
        python3 bench/peers/transformers.py --record "$PEER_RECORD" --compare-with "$OUT/jev-cuda.json" \
            > "$OUT/compare.txt" 2>&1 || rc=$?
        tee -a "$OUT/log.txt" < "$OUT/compare.txt"
        return $rc
    fi
}

step_report() {
    local files=("$OUT/jev-cuda.json")
    [ -f "$PEER_RECORD" ] && files+=("$PEER_RECORD")
    "$JEV" report "${files[@]}" --output "$OUT/report.md" --svg "$OUT/report.svg" | tee -a "$OUT/log.txt"
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
for s in "$@"; do
    case $s in
    pack | unpack | tests | sanitize | agree | profile | bench | report) ;;
    *) die "unknown step '$s' (pack unpack tests sanitize agree profile bench report)" ;;
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
