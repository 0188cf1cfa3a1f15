#!/usr/bin/env bash
# scripts/device/peer-run.sh - jev and stock transformers side by side on the GPU machine.
#
# What it is: the command sequence of docs/bench-peers.md, as steps that each fit one device
# command (10 minutes), sharing a work folder that survives between commands while the
# machine stays warm: synthesize the full-size model, dump jev's inputs, run `jev bench` on
# the CPU cores, run the transformers peer on GPU f32, GPU bf16 and CPU f32 (same thread
# count as jev), and on GPU bf16 with flash-linear-attention's delta rule (carried, see
# scripts/device/fla-carry.sh), render the report, and copy everything worth keeping into $OUT.
#
# What it is not: a build. jev comes prebuilt from the development machine (`make
# PORTABLE=1 BUILD=build-portable`, carried with its libspng beside it), because the GPU
# machine has another distribution and no Debian packages.
#
# Usage, from anywhere (it changes to the repository root):
#   bash scripts/device/peer-run.sh STEP...          run steps now, in order
#   bash scripts/device/peer-run.sh start STEP...    run them in the background (setsid) and return
#   bash scripts/device/peer-run.sh wait [SECONDS]   wait for a background run (default 540), collect
#   bash scripts/device/peer-run.sh status           the tail of the background log
# Steps: check prep layouts profile jev gpu-f32 gpu-bf16 cpu-f32 fla-probe gpu-bf16-fla report collect
#        all = check prep jev gpu-f32 gpu-bf16 cpu-f32 report
#        fla-probe: fla's delta rule against transformers' torch one on random tensors (Triton's first
#        compile timed); gpu-bf16-fla: the peer with --kernels fla -> peer-cuda-bf16-fla.json. Both need
#        .carry-fla (bash scripts/device/fla-carry.sh here, then carry it).
#
# Knobs (environment): JEV (build-portable/jev), PY (python3), WORK (/tmp/jev-peer),
# OUT (set by the device tool; else $WORK/out), THREADS (all cores), COUNTS ("1 4 16 64"),
# REPEATS (3), CPU_COUNTS ("1 4 16": the CPU peer is the slow one), CPU_REPEATS ($REPEATS),
# CONFIG (configs/qwen3.5-0.8b.json), SEED (1), LAYOUT (mlx4), MAX_DELTA (1e-3: the f32
# agreement bound printed by the comparison; exceeding it is reported, not fatal), GIT_COMMIT (the
# commit jev was built from, recorded by jev bench: the copy on the GPU machine has no .git),
# JEV_RECORD (the jev record the peers compare their distributions with; default $WORK/jev.json,
# e.g. a committed bench/results/*/jev.json when this run measures peers only; the report step
# reads it too), FLA_CARRY (the packed fla; default .carry-fla).
#
# Assumptions: x86-64 Linux with python3 holding torch + transformers (>= 5, Qwen3.5) +
# tokenizers and a CUDA GPU for the gpu-* steps; the repository copy holds .cache/tokenizer-qwen3
# (carried: it is ignored by git) for `jev synth`; nothing else runs on the machine while a
# step measures (steps run one after another, never two at once). At most 8 files come back
# from $OUT: collect copies, of log.txt, compare.txt, report.md, jev.json, peer-cuda-bf16-fla.json,
# peer-cuda-bf16.json, peer-cuda-f32.json, peer-cpu-f32.json and report.svg, the first 8 that exist
# (the rest stay in $WORK and are named in the log).
set -euo pipefail

cd "$(dirname "$0")/../.."
JEV=${JEV:-build-portable/jev}
PY=${PY:-python3}
WORK=${WORK:-/tmp/jev-peer}
OUT=${OUT:-$WORK/out}
THREADS=${THREADS:-$(nproc)}
COUNTS=${COUNTS:-1 4 16 64}
REPEATS=${REPEATS:-3}
CPU_COUNTS=${CPU_COUNTS:-1 4 16}
CPU_REPEATS=${CPU_REPEATS:-$REPEATS}
CONFIG=${CONFIG:-configs/qwen3.5-0.8b.json}
SEED=${SEED:-1}
LAYOUT=${LAYOUT:-mlx4}
MAX_DELTA=${MAX_DELTA:-1e-3}
PEER=bench/peers/transformers.py
MODEL=$WORK/model
INPUTS=$WORK/inputs
mkdir -p "$WORK" "$OUT"
export PYTHONUNBUFFERED=1

log() { printf '[peer-run %s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$WORK/log.txt" >&2; }
die() { log "error: $*"; exit 1; }
# a step's output goes to the console and to the shared log
run_logged() { log "\$ $*"; "$@" 2>&1 | tee -a "$WORK/log.txt"; }

need_jev() {
    [ -x "$JEV" ] || die "$JEV: no jev binary (build it here with make PORTABLE=1 BUILD=build-portable and carry the folder)"
    if ldd "$JEV" 2>/dev/null | grep -q 'not found'; then
        die "$JEV: missing shared libraries: $(ldd "$JEV" | grep 'not found' | tr -s ' ' | tr '\n' ';')"
    fi
}

step_check() {
    need_jev
    run_logged "$PY" -c 'import sys, torch, transformers, tokenizers; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
    run_logged nproc
    JEV_JEV_BIN=$JEV run_logged "$PY" "$PEER" --selftest
}

step_prep() {
    need_jev
    [ -f .cache/tokenizer-qwen3/tokenizer.json ] || die ".cache/tokenizer-qwen3: missing (carry it, or run scripts/setup.sh where npm works)"
    if [ ! -f "$MODEL/config.json" ]; then
        run_logged "$JEV" synth --config "$CONFIG" --seed "$SEED" --layout "$LAYOUT" --out "$MODEL" --force
    else
        log "model: $MODEL exists, kept"
    fi
    # shellcheck disable=SC2086 # COUNTS is a list of words
    run_logged "$JEV" bench --model "$MODEL" --dump-inputs "$INPUTS" --counts $COUNTS
    [ -f "$INPUTS/manifest.json" ] || die "$INPUTS/manifest.json: the dump was not written"
}

# the MLX conversion checked against the hf layout of the same seed (torch, no transformers)
step_layouts() {
    need_jev
    [ -d "$WORK/model-hf" ] || run_logged "$JEV" synth --config "$CONFIG" --seed "$SEED" --layout hf --out "$WORK/model-hf" --force
    run_logged "$PY" "$PEER" --check-layouts "$WORK/model-hf" "$MODEL"
}

step_jev() {
    need_jev
    # shellcheck disable=SC2086
    local commit=()
    [ -n "${GIT_COMMIT:-}" ] && commit=(--git-commit "$GIT_COMMIT")
    run_logged "$JEV" bench --model "$MODEL" --backend cpu --threads "$THREADS" --counts $COUNTS \
        --repeats "$REPEATS" --output "$WORK/jev.json" "${commit[@]}"
}

# peer DEVICE DTYPE COUNTS REPEATS [SUFFIX PEER_ARG...] -> $WORK/peer-DEVICE-DTYPE[-SUFFIX].json
# (+ its comparison with jev)
peer() {
    local dev=$1 dt=$2 counts=$3 repeats=$4 suffix=${5:-} tag
    shift 4
    [ $# -gt 0 ] && shift
    local extra=("$@")
    tag=$dev-$([ "$dt" = float32 ] && echo f32 || echo bf16)${suffix:+-$suffix}
    local cmp=()
    local ref=${JEV_RECORD:-$WORK/jev.json}
    if [ -f "$ref" ]; then cmp=(--compare-with "$ref" --max-delta "$MAX_DELTA"); fi
    local rc=0
    log "\$ $PY $PEER $MODEL $INPUTS $WORK/peer-$tag.json --device $dev --dtype $dt --threads $THREADS --counts $counts --repeats $repeats ${extra[*]} ${cmp[*]}"
    # progress (stderr) to the console and the log; the comparison table (stdout) to its own file
    # shellcheck disable=SC2086 # counts is a list of words
    "$PY" "$PEER" "$MODEL" "$INPUTS" "$WORK/peer-$tag.json" --device "$dev" --dtype "$dt" \
        --threads "$THREADS" --counts $counts --repeats "$repeats" "${extra[@]}" "${cmp[@]}" \
        > "$WORK/compare-$tag.txt" 2> >(tee -a "$WORK/log.txt" >&2) || rc=$?
    tee -a "$WORK/log.txt" < "$WORK/compare-$tag.txt"
    # exit 3 is the comparison's "over MAX_DELTA": expected for bf16, worth reading for f32
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then die "peer $tag failed (exit $rc), see log.txt"; fi
    [ "$rc" -eq 3 ] && log "peer $tag: some probability delta vs jev exceeds $MAX_DELTA (see compare.txt)"
    return 0
}

# where jev's time goes on this machine: the main job's 8 questions with the op profile (src/backend/profile.h)
step_profile() {
    need_jev
    log "\$ JEV_PROFILE=1 $JEV decide --model $MODEL --workload bench/dog-workload.json --decisions 8 --threads $THREADS"
    JEV_PROFILE=1 "$JEV" decide --model "$MODEL" --workload bench/dog-workload.json --decisions 8 \
        --threads "$THREADS" 2>&1 | grep -v '^q0' | tee -a "$WORK/log.txt"
}

step_gpu_f32() { peer cuda float32 "$COUNTS" "$REPEATS"; }
step_gpu_bf16() { peer cuda bfloat16 "$COUNTS" "$REPEATS"; }
step_cpu_f32() { peer cpu float32 "$CPU_COUNTS" "$CPU_REPEATS"; }

fla_args() {
    FLA_ARGS=(--kernels fla)
    [ -n "${FLA_CARRY:-}" ] && FLA_ARGS+=(--fla-carry "$FLA_CARRY")
    [ -f "${FLA_CARRY:-.carry-fla}/SOURCE" ] ||
        die "${FLA_CARRY:-.carry-fla}: no packed fla (bash scripts/device/fla-carry.sh GITDIR here, then carry it)"
    log "fla: $(tr '\n' ' ' < "${FLA_CARRY:-.carry-fla}/SOURCE")"
}

# Triton JIT-compiles a small C module at its first use: gcc and Python.h must be there
step_fla_probe() {
    fla_args
    run_logged "$PY" -c 'import os, shutil, sysconfig; i = sysconfig.get_paths()["include"]; print("Python.h:", os.path.join(i, "Python.h"), os.path.exists(os.path.join(i, "Python.h")), "| cc:", shutil.which("gcc") or shutil.which("cc"))'
    run_logged "$PY" "$PEER" "${FLA_ARGS[@]}" --probe-kernels
}

step_gpu_bf16_fla() {
    fla_args
    peer cuda bfloat16 "$COUNTS" "$REPEATS" fla "${FLA_ARGS[@]}"
}

step_report() {
    need_jev
    local files=()
    for f in "${JEV_RECORD:-$WORK/jev.json}" "$WORK"/peer-*.json; do [ -f "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || die "no record to report"
    run_logged "$JEV" report "${files[@]}" --output "$WORK/report.md" --svg "$WORK/report.svg"
}

# at most 8 files come back; comparisons are concatenated into one
step_collect() {
    : > "$WORK/compare.txt"
    for f in "$WORK"/compare-*.txt; do
        [ -f "$f" ] && { echo "== ${f##*/}"; cat "$f"; } >> "$WORK/compare.txt"
    done
    local n=0 left=()
    for f in log.txt compare.txt report.md jev.json peer-cuda-bf16-fla.json peer-cuda-bf16.json peer-cuda-f32.json \
        peer-cpu-f32.json report.svg; do
        [ -f "$WORK/$f" ] || continue
        if [ "$n" -lt 8 ]; then
            cp "$WORK/$f" "$OUT/$f"
            n=$((n + 1))
        else
            left+=("$f")
        fi
    done
    [ "${#left[@]}" -eq 0 ] || log "not collected (8 files come back at most): ${left[*]}, still in $WORK"
    log "collected into $OUT: $(find "$OUT" -maxdepth 1 -type f -printf '%f ')"
}

run_steps() {
    local s
    for s in "$@"; do
        case $s in
        all) run_steps check prep jev gpu-f32 gpu-bf16 cpu-f32 report ;;
        check | prep | layouts | profile | jev | gpu-f32 | gpu-bf16 | cpu-f32 | fla-probe | gpu-bf16-fla | report | collect)
            log "step $s"
            "step_${s//-/_}"
            ;;
        *) die "unknown step '$s' (check prep layouts profile jev gpu-f32 gpu-bf16 cpu-f32 fla-probe gpu-bf16-fla report collect all)" ;;
        esac
    done
}

case ${1:-} in
"" | -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
start)
    shift
    [ $# -gt 0 ] || die "start: which steps?"
    [ -f "$WORK/bg.running" ] && [ ! -f "$WORK/bg.done" ] && die "a background run is already going (status / wait)"
    rm -f "$WORK/bg.done"
    touch "$WORK/bg.running"
    # a new session outlives this command; the machine keeps it running while it is held
    # shellcheck disable=SC2016 # $1.. expand in the inner shell, on purpose
    setsid bash -c 'bash "$1" "${@:3}" > "$2/bg.log" 2>&1; echo "exit $?" > "$2/bg.done"' _ "$0" "$WORK" "$@" \
        < /dev/null > /dev/null 2>&1 &
    log "started in the background: $* (log $WORK/bg.log)"
    ;;
wait)
    limit=${2:-540}
    t=0
    while [ ! -f "$WORK/bg.done" ] && [ "$t" -lt "$limit" ]; do sleep 5; t=$((t + 5)); done
    tail -n 25 "$WORK/bg.log" 2>/dev/null || true
    step_collect
    if [ -f "$WORK/bg.done" ]; then
        log "background run finished ($(cat "$WORK/bg.done"))"
        rm -f "$WORK/bg.running"
    else
        log "still running after ${limit}s"
        exit 75
    fi
    ;;
status)
    tail -n 25 "$WORK/bg.log" 2>/dev/null || echo "no background run"
    [ -f "$WORK/bg.done" ] && echo "finished" || echo "running (or never started)"
    ;;
*)
    run_steps "$@"
    step_collect
    ;;
esac
