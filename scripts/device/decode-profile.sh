#!/usr/bin/env bash
# scripts/device/decode-profile.sh - where a decode token's time goes on the GPU.
#
# What it is: (1) `jev run` greedy decode of 128 tokens after a 512-token prompt, in each precision
# mode, twice (ms a token, the wall clock: kernels, launch gaps and the host together); (2) Nsight
# Compute (one metric, gpu__time_duration, clocks left alone) over two runs that differ only in their
# decode steps (2 and 10 after a 16-token prompt): the difference over the 8 extra tokens is one decode
# token's kernels, by kernel name (calls, us a token, us a call) without the prefill's. Kernel time
# against the wall time above tells launch-bound from kernel-bound.
# Use on the GPU machine after cuda-check.sh unpack (same WORK, binaries and model):
#   WORK=$PWD/.work-cuda bash scripts/device/decode-profile.sh [MODES (exact fast)]
# BASE=path/to/another/jev also times that binary, alternated with this one (an A/B in one call).
# Writes $OUT/decode.txt and $OUT/decode-kernels.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/jev-cuda}
OUT=${OUT:-$WORK/out}
JEV=$WORK/bin/jev
MODEL=${MODEL:-$WORK/model}
NCU=${NCU:-$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)}
export LD_LIBRARY_PATH=$WORK/bin
mkdir -p "$OUT"
bins=("$JEV")
[ -n "${BASE:-}" ] && bins=("$BASE" "$JEV")
for mode in ${1:-exact fast}; do
    echo "== $mode: 512-token prompt, 128 decode steps"
    for _ in 1 2; do
        for b in "${bins[@]}"; do
            printf '%s: ' "$b"
            "$b" run --model "$MODEL" --backend cuda --precision "$mode" --random-tokens 512 --chunk 512 --decode 128 \
                --top 0 2>&1 | grep '^jev run:'
        done
    done
done | tee "$OUT/decode.txt"
for d in 2 10; do
    "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv "$JEV" run --model "$MODEL" --backend cuda \
        --random-tokens 16 --chunk 16 --decode $d --top 0 > "$WORK/decode-ncu$d.csv" 2> "$WORK/decode-ncu$d.log" ||
        { tail -3 "$WORK/decode-ncu$d.log"; exit 1; }
done
python3 - "$WORK/decode-ncu2.csv" "$WORK/decode-ncu10.csv" 8 <<'PY' | tee "$OUT/decode-kernels.txt"
import csv, sys, collections
def load(path):
    lines = list(csv.reader(open(path)))
    at = next(i for i, r in enumerate(lines) if "Kernel Name" in r)
    head = lines[at]
    ni, ui, vi = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    us, calls = collections.defaultdict(float), collections.Counter()
    for r in lines[at + 1:]:
        if len(r) != len(head):
            continue
        name = r[ni].split("(")[0].replace("void ", "")[:70]
        us[name] += float(r[vi].replace(",", "")) * scale[r[ui]]
        calls[name] += 1
    return us, calls
(us_a, calls_a), (us_b, calls_b), k = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
total = sum(us_b.values()) - sum(us_a.values())
launches = sum(calls_b.values()) - sum(calls_a.values())
print(f"one decode token (the {k} tokens between two runs): {total / k:.1f} us of kernels, {launches / k:.1f} launches")
for name in sorted(us_b, key=lambda n: -(us_b[n] - us_a.get(n, 0))):
    d, c = us_b[name] - us_a.get(name, 0), calls_b[name] - calls_a.get(name, 0)
    if c:
        print(f"{d / k:9.1f} us/token {c / k:7.1f} calls/token {d / c:8.2f} us/call  {name}")
PY
