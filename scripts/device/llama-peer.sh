#!/usr/bin/env bash
# scripts/device/llama-peer.sh - llama.cpp beside jev on the GPU machine: build, convert, measure, in one call.
#
# What it is: the device half of the llama.cpp peer (docs/bench-peers.md). From the source that
# scripts/device/llama-carry.sh packed into .carry-llama/, it builds llama.cpp for sm_90 (CMake,
# Ninja when present, web UI / tests / examples / server / curl off), builds bench/peers/llama-peer.c
# against that libllama, synthesizes jev's full-size model in the Hugging Face layout, converts it
# to GGUF f32 and bf16 with llama.cpp's own converter, and measures:
#   lm     llama-bench -p PREFIX -n DECODE -r REPEATS -ngl 99 on both GGUFs, beside `jev run` at
#          the same lengths in exact and fast mode (REPEATS runs each, medians) -> llama-lm.json/.md
#   peer   the decision-level peer (bench/peers/llamacpp.py + llama-peer) on jev's inputs dump, f32
#          and bf16 -> peer-llama-f32.json, peer-llama-bf16.json (jev-bench/2, text-only: the
#          image placeholder ids are evaluated as text tokens, no vision tower), jev report of them
# The model synthesis and conversion run on a few cores while the build takes the rest.
#
# What it is not: part of jev's Makefile or CI (neither has llama.cpp), or a vision peer.
#
# Prepare here (development machine), then carry .carry-llama and .carry-cuda and .cache/tokenizer-qwen3:
#   bash scripts/device/llama-carry.sh LLAMA_CHECKOUT [REV]     # -> .carry-llama/ (about 5 MB)
#   make PORTABLE=1 CUDA=1 BUILD=build-portable-cuda build-portable-cuda/jev build-portable-cuda/bench/serve-load cuda-tests
#   bash scripts/device/cuda-check.sh pack                      # -> .carry-cuda/ (jev for the GPU)
# On the GPU machine, from the repository root:
#   bash scripts/device/llama-peer.sh all          (= unpack build model lm peer jevbench report)
# Steps: unpack build model lm peer jevbench report; `all` runs model in the background beside build.
#   jevbench   jev bench on the same hf weights and counts -> jev-hf.json; report: jev report of it and
#              the peer records, and each peer record's distributions against it -> compare.txt
# Knobs (environment): WORK (/tmp/jev-llama), OUT (set by the device tool; else $WORK/out), JEV (the
# jev binary; default: .carry-cuda's, unpacked into $WORK/jev-bin, else build/jev),
# CUDA (1: build with GGML_CUDA for CUDA_ARCH, 90; 0: CPU only, for trying the script on the
# development machine), JOBS (nproc), MTMD (0; 1 also builds libmtmd), PREFIX (the benchmark's prefix
# length: read from the dump, else 532), DECODE (128), REPEATS (3), COUNTS ("1 4 16 64"), NGL (99),
# CONFIG (configs/qwen3.5-0.8b.json), SEED (1), DTYPES ("f32 bf16"), JEV_BACKEND (cuda), JEV_MODES
# ("exact fast"), JEV_CHUNK (512: jev run's prefill chunk, llama.cpp's default n_ubatch),
# JEV_RECORD (the jev record the report sets beside the peers; default $OUT/jev-hf.json), PEER_ARGS
# (more arguments for bench/peers/llamacpp.py, e.g. "--threads 2 --fold-ids 128" for a smoke test on
# a random GGUF of that vocabulary).
# Files back in $OUT (8 at most): llama-lm.json, llama-lm.md, peer-llama-f32.json,
# peer-llama-bf16.json, jev-hf.json, report.md, compare.txt, log.txt; build.txt (the build's
# output) only when the build failed, when most of the others are missing.
# Exit status: 1 when a step failed (named in log.txt), else 0; every step after a failed build is
# skipped, the others run.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/jev-llama}
OUT=${OUT:-$WORK/out}
CUDA=${CUDA:-1}
CUDA_ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
MTMD=${MTMD:-0}
DECODE=${DECODE:-128}
REPEATS=${REPEATS:-3}
COUNTS=${COUNTS:-1 4 16 64}
NGL=${NGL:-99}
CONFIG=${CONFIG:-configs/qwen3.5-0.8b.json}
SEED=${SEED:-1}
DTYPES=${DTYPES:-f32 bf16}
JEV_BACKEND=${JEV_BACKEND:-cuda}
JEV_MODES=${JEV_MODES:-exact fast}
JEV_CHUNK=${JEV_CHUNK:-512}
PEER_ARGS=${PEER_ARGS:-}
SRC=$WORK/llama.cpp
BLD=$WORK/llama.cpp/build
MODEL=$WORK/model-hf
INPUTS=$WORK/inputs
mkdir -p "$WORK" "$OUT"
export PYTHONUNBUFFERED=1

log() { printf '[llama-peer %s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$OUT/log.txt" >&2; }
die() { log "error: $*"; exit 1; }

untar() {
    # Python's tarfile reads xz whether or not the machine has the xz tool
    python3 - "$1" "$2" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:  # a Python without extraction filters
        t.extractall(sys.argv[2])
PY
}

# jev: $JEV, else the CUDA build that cuda-check.sh pack put into .carry-cuda (unpacked once), else build/jev
find_jev() {
    if [ -n "${JEV:-}" ]; then :
    elif [ -f .carry-cuda/bin.tar.xz ]; then
        JEV=$WORK/jev-bin/jev
        if [ ! -x "$JEV" ]; then
            mkdir -p "$WORK/jev-bin"
            untar .carry-cuda/bin.tar.xz "$WORK/jev-bin"
            cp .carry-cuda/*.so.* "$WORK/jev-bin/"
            chmod +x "$WORK"/jev-bin/*
        fi
    else
        JEV=build/jev
    fi
    [ -x "$JEV" ] || die "$JEV: no jev binary (carry .carry-cuda, or set JEV)"
    local dir
    dir=$(dirname "$JEV")
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

step_unpack() {
    [ -f .carry-llama/llama.cpp.tar.xz ] || die ".carry-llama/llama.cpp.tar.xz: not carried (scripts/device/llama-carry.sh)"
    rm -rf "$SRC"
    untar .carry-llama/llama.cpp.tar.xz "$WORK"
    log "unpacked $(tr '\n' ' ' < .carry-llama/SOURCE)into $SRC"
}

# the llama.cpp commit and release, for CMake and the records
src_field() { sed -n "s/^$1 //p" .carry-llama/SOURCE 2>/dev/null || true; }

step_build() {
    [ -f "$SRC/CMakeLists.txt" ] || die "$SRC: not unpacked"
    local gen=(-G "Unix Makefiles") tag commit number
    command -v ninja > /dev/null && gen=(-G Ninja)
    tag=$(src_field tag)
    commit=$(src_field commit)
    number=${tag#b}
    [[ $number =~ ^[0-9]+$ ]] || number=0
    local cuda=(-DGGML_CUDA=OFF)
    [ "$CUDA" = 1 ] && cuda=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH")
    local t0=$SECONDS
    {
        cmake -S "$SRC" -B "$BLD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON "${cuda[@]}" \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
            "-DLLAMA_BUILD_NUMBER=$number" "-DLLAMA_BUILD_COMMIT=${commit:0:9}"
        local targets=(llama-bench llama)
        [ "$MTMD" = 1 ] && targets+=(mtmd)
        cmake --build "$BLD" -j "$JOBS" --target "${targets[@]}"
    } > "$WORK/build.txt" 2>&1 || {
        cp "$WORK/build.txt" "$OUT/build.txt"
        tail -30 "$WORK/build.txt" | tee -a "$OUT/log.txt"
        die "llama.cpp build failed (build.txt)"
    }
    log "llama.cpp built in $((SECONDS - t0)) s ($(ls "$BLD/bin" | tr '\n' ' '))"
    # the decision-level peer, with jev's warning flags, against this libllama
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wcast-qual -Wdouble-promotion -Wno-unused-parameter -Werror \
        -I"$SRC/include" -I"$SRC/ggml/include" bench/peers/llama-peer.c -o "$BLD/bin/llama-peer" \
        -L"$BLD/bin" -lllama -lm -Wl,-rpath,"$BLD/bin" >> "$WORK/build.txt" 2>&1 || {
        cp "$WORK/build.txt" "$OUT/build.txt"
        tail -20 "$WORK/build.txt" | tee -a "$OUT/log.txt"
        die "llama-peer.c did not compile (build.txt)"
    }
    log "built $BLD/bin/llama-peer"
}

step_model() {
    find_jev
    if [ ! -f "$MODEL/config.json" ]; then
        "$JEV" synth --config "$CONFIG" --seed "$SEED" --layout hf --out "$MODEL" --force | tail -1 | tee -a "$OUT/log.txt"
    fi
    # shellcheck disable=SC2086 # COUNTS is a list of words
    "$JEV" bench --model "$MODEL" --dump-inputs "$INPUTS" --counts $COUNTS --synthetic yes >> "$OUT/log.txt" 2>&1 ||
        die "jev bench --dump-inputs failed"
    local d pids=()
    for d in $DTYPES; do
        [ -f "$WORK/model-$d.gguf" ] && continue
        python3 "$SRC/convert_hf_to_gguf.py" "$MODEL" --outtype "$d" --outfile "$WORK/model-$d.gguf" \
            > "$WORK/convert-$d.log" 2>&1 &
        pids+=($!)
    done
    local p rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    for d in $DTYPES; do tail -3 "$WORK/convert-$d.log" 2>/dev/null | sed "s/^/convert $d: /" | tee -a "$OUT/log.txt"; done
    [ $rc -eq 0 ] || die "convert_hf_to_gguf.py failed"
    log "model: $(ls -s --block-size=M "$WORK"/model-*.gguf | tr '\n' ' ')"
}

prefix_len() {
    if [ -n "${PREFIX:-}" ]; then echo "$PREFIX"; return; fi
    python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"][0]["shared"]["prefix_ids"]))' \
        "$INPUTS/manifest.json" 2>/dev/null || echo 532
}

step_lm() {
    find_jev
    local n d mode
    n=$(prefix_len)
    : > "$WORK/lm-runs.txt"
    for d in $DTYPES; do
        log "\$ llama-bench -m model-$d.gguf -p $n -n $DECODE -r $REPEATS -ngl $NGL -o json"
        "$BLD/bin/llama-bench" -m "$WORK/model-$d.gguf" -p "$n" -n "$DECODE" -r "$REPEATS" -ngl "$NGL" -o json \
            > "$WORK/llama-bench-$d.json" 2>> "$OUT/log.txt" || die "llama-bench $d failed"
    done
    for mode in $JEV_MODES; do
        for _ in $(seq "$REPEATS"); do
            log "\$ jev run --random-tokens $n --decode $DECODE --chunk $JEV_CHUNK --backend $JEV_BACKEND --precision $mode"
            "$JEV" run --model "$MODEL" --random-tokens "$n" --decode "$DECODE" --chunk "$JEV_CHUNK" \
                --backend "$JEV_BACKEND" --precision "$mode" 2>> "$OUT/log.txt" |
                grep '^jev run:' | sed "s/^/$mode /" | tee -a "$WORK/lm-runs.txt" "$OUT/log.txt" ||
                die "jev run ($mode) failed"
        done
    done
    python3 scripts/device/llama-lm-record.py --prefix "$n" --decode "$DECODE" --repeats "$REPEATS" \
        --source .carry-llama/SOURCE --jev-runs "$WORK/lm-runs.txt" --jev-backend "$JEV_BACKEND" \
        --json "$OUT/llama-lm.json" --md "$OUT/llama-lm.md" "$WORK"/llama-bench-*.json || die "the LM record failed"
    tee -a "$OUT/log.txt" < "$OUT/llama-lm.md"
}

step_peer() {
    local d rc
    : > "$OUT/compare.txt"
    for d in $DTYPES; do
        rc=0
        # shellcheck disable=SC2086 # COUNTS is a list of words
        python3 bench/peers/llamacpp.py "$WORK/model-$d.gguf" "$INPUTS" "$OUT/peer-llama-$d.json" \
            --bin "$BLD/bin/llama-peer" --dtype "$d" --llama-version "$(src_field tag)" \
            --llama-commit "$(src_field commit)" --counts $COUNTS --repeats "$REPEATS" --ngl "$NGL" $PEER_ARGS \
            >> "$OUT/log.txt" 2>&1 || rc=$?
        [ $rc -eq 0 ] || die "the $d peer failed (exit $rc)"
    done
}

# jev's own decision-level record on the same hf weights and dump settings, for the report's ratios
step_jevbench() {
    find_jev
    # the commit jev was built from (the copy on the GPU machine has no .git)
    local commit=()
    [ -f .carry-cuda/COMMIT ] && commit=(--git-commit "$(cat .carry-cuda/COMMIT)")
    # shellcheck disable=SC2086 # COUNTS is a list of words
    "$JEV" bench --model "$MODEL" --backend "$JEV_BACKEND" --counts $COUNTS --repeats "$REPEATS" --synthetic yes \
        --output "$OUT/jev-hf.json" "${commit[@]}" >> "$OUT/log.txt" 2>&1 || die "jev bench failed"
}

step_report() {
    find_jev
    local files=() ref=${JEV_RECORD:-$OUT/jev-hf.json} d
    [ -f "$ref" ] && files+=("$ref")
    for d in $DTYPES; do [ -f "$OUT/peer-llama-$d.json" ] && files+=("$OUT/peer-llama-$d.json"); done
    [ "${#files[@]}" -gt 0 ] || die "no record to report"
    "$JEV" report "${files[@]}" --output "$OUT/report.md" >> "$OUT/log.txt" 2>&1 || die "jev report failed"
    log "report: $OUT/report.md"
    [ -f "$ref" ] || return 0
    # the distributions' difference from jev's: reported, never failed (the peer is text-only)
    for d in $DTYPES; do
        [ -f "$OUT/peer-llama-$d.json" ] || continue
        python3 - "$OUT/peer-llama-$d.json" "$ref" "$d" <<'PY' | tee -a "$OUT/compare.txt" "$OUT/log.txt"
import json, sys
sys.path.insert(0, "bench/peers")
from jevbench import compare_records
peer, jev = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
lines, worst = compare_records(peer, jev)
print(f"== llama.cpp {sys.argv[3]} against {sys.argv[2]} (text-only peer: a difference is expected)")
print("\n".join(lines))
PY
    done
}

# runs STEP in a subshell: a failure is logged and counted, the next steps still run
FAILED=()
run_step() {
    log "step $1"
    if ! (set -euo pipefail; "step_$1"); then FAILED+=("$1"); fi
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
for s in "${steps[@]}"; do
    case $s in
    all)
        run_step unpack
        # the model (synthesis, dump, conversion: a few cores) beside the build (the rest)
        (run_step model > "$WORK/model-bg.log" 2>&1; [ ${#FAILED[@]} -eq 0 ]) &
        mpid=$!
        run_step build
        wait "$mpid" || FAILED+=(model)
        cat "$WORK/model-bg.log" >&2
        if [[ " ${FAILED[*]} " == *" build "* ]] || [[ " ${FAILED[*]} " == *" model "* ]]; then
            log "skipping lm, peer, report: the build or the model failed"
        else
            run_step lm
            run_step peer
            run_step jevbench
            run_step report
        fi
        ;;
    unpack | build | model | lm | peer | jevbench | report) run_step "$s" ;;
    *) die "unknown step '$s' (unpack build model lm peer jevbench report all)" ;;
    esac
done
if [ ${#FAILED[@]} -gt 0 ]; then
    log "failed steps: ${FAILED[*]}"
    exit 1
fi
log "done: $(find "$OUT" -maxdepth 1 -type f -printf '%f ')"
