#!/usr/bin/env bash
# scripts/device/kernel-profile.sh - every kernel's GPU time in one decision run, by kernel name.
#
# What it is: Nsight Compute (ncu, one metric: gpu__time_duration, clocks left alone) over
# `jev decide --backend cuda` on the benchmark workload, in each precision mode, summed by kernel
# name (calls, total, mean) and, for each kernel, split at the run's phases by launch order is not
# attempted: run it with --decisions 1 for the one-decision picture (vision + prefill + a short
# scoring) or more to weigh the scoring. Unlike JEV_PROFILE (which synchronizes after every op and
# times host + device per op), this is device time per kernel, launch gaps excluded; ncu serializes
# the kernels, so the sum is not the run's wall time.
# Use on the GPU machine after cuda-check.sh unpack (same WORK, same binaries and model):
#   WORK=$PWD/.work-cuda bash scripts/device/kernel-profile.sh [DECISIONS (1)] [MODES (exact fast)]
# Writes $OUT/kernels-MODE.txt (the summary) and $OUT/kernels-MODE.csv.gz (ncu's raw rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/jev-cuda}
OUT=${OUT:-$WORK/out}
DECISIONS=${1:-1}
MODES=${2:-exact fast}
JEV=$WORK/bin/jev
MODEL=${MODEL:-$WORK/model}
NCU=${NCU:-$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)}
mkdir -p "$OUT"
for mode in $MODES; do
    csv=$WORK/kernels-$mode.csv
    # ncu's CSV rows and the program's own output share stdout; the parser keeps the rows after ncu's header
    LD_LIBRARY_PATH=$WORK/bin "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv \
        "$JEV" decide --model "$MODEL" --workload bench/dog-workload.json --decisions "$DECISIONS" --backend cuda \
        --precision "$mode" > "$csv" 2> "$WORK/ncu-$mode.log" || { tail -5 "$WORK/ncu-$mode.log"; exit 1; }
    gzip -c "$csv" > "$OUT/kernels-$mode.csv.gz"
    python3 - "$csv" "$mode" "$DECISIONS" > "$OUT/kernels-$mode.txt" <<'PY'
import csv, sys, collections
lines = list(csv.reader(open(sys.argv[1])))
at = next(i for i, r in enumerate(lines) if "Kernel Name" in r)
head = lines[at]
rows = [head] + [r for r in lines[at + 1:] if len(r) == len(head)]
name_i, unit_i, val_i = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
tot = collections.defaultdict(float); calls = collections.Counter(); order = []
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}
for r in rows[1:]:
    name = r[name_i].split("(")[0].replace("void ", "")
    ms = float(r[val_i].replace(",", "")) * scale[r[unit_i]]
    tot[name] += ms; calls[name] += 1; order.append((name, ms))
total = sum(tot.values())
print(f"kernels of jev decide --decisions {sys.argv[3]} --precision {sys.argv[2]}: {len(order)} launches, {total:.2f} ms of device time")
print(f"{'kernel':60s} {'calls':>6s} {'ms':>9s} {'share':>6s} {'mean us':>9s}")
for name, ms in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{name[:60]:60s} {calls[name]:6d} {ms:9.3f} {100 * ms / total:5.1f}% {1000 * ms / calls[name]:9.1f}")
PY
    cat "$OUT/kernels-$mode.txt" | head -40
done
