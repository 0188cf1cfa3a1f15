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
# ARGS: more options for jev decide (e.g. "--batch all --step-tokens 1024").
# DETAIL=1 also asks ncu for each kernel's DRAM and SM throughput (% of the sustained peak; ncu
# replays each kernel for them, so the run takes longer) and the summary adds their time-weighted
# means: how far a memory-bound kernel is from the bandwidth floor.
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
    metrics=gpu__time_duration.sum
    [ "${DETAIL:-0}" = 1 ] && metrics=$metrics,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
    LD_LIBRARY_PATH=$WORK/bin "$NCU" --clock-control none --metrics "$metrics" --csv \
        "$JEV" decide --model "$MODEL" --workload bench/dog-workload.json --decisions "$DECISIONS" --backend cuda \
        --precision "$mode" ${ARGS:-} > "$csv" 2> "$WORK/ncu-$mode.log" || { tail -5 "$WORK/ncu-$mode.log"; exit 1; }
    gzip -c "$csv" > "$OUT/kernels-$mode.csv.gz"
    python3 - "$csv" "$mode" "$DECISIONS" > "$OUT/kernels-$mode.txt" <<'PY'
import csv, sys, collections
lines = list(csv.reader(open(sys.argv[1])))
at = next(i for i, r in enumerate(lines) if "Kernel Name" in r)
head = lines[at]
rows = [head] + [r for r in lines[at + 1:] if len(r) == len(head)]
name_i, unit_i, val_i = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
id_i, metric_i = head.index("ID"), head.index("Metric Name")
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}
launch = collections.OrderedDict()  # ID -> [name, ms, dram %, sm %]
for r in rows[1:]:
    one = launch.setdefault(r[id_i], [r[name_i].split("(")[0].replace("void ", ""), 0.0, None, None])
    value = float(r[val_i].replace(",", ""))
    if r[metric_i] == "gpu__time_duration.sum":
        one[1] = value * scale[r[unit_i]]
    elif r[metric_i].startswith("dram__throughput"):
        one[2] = value
    elif r[metric_i].startswith("sm__throughput"):
        one[3] = value
tot = collections.defaultdict(float); calls = collections.Counter()
weighted = collections.defaultdict(lambda: [0.0, 0.0, 0.0])  # name -> [ms with metrics, dram % * ms, sm % * ms]
for name, ms, dram, sm in launch.values():
    tot[name] += ms; calls[name] += 1
    if dram is not None and sm is not None:
        w = weighted[name]; w[0] += ms; w[1] += dram * ms; w[2] += sm * ms
total = sum(tot.values())
detail = bool(weighted)
print(f"kernels of jev decide --decisions {sys.argv[3]} --precision {sys.argv[2]}: {len(launch)} launches, {total:.2f} ms of device time")
print(f"{'kernel':60s} {'calls':>6s} {'ms':>9s} {'share':>6s} {'mean us':>9s}" + ("  dram%   sm%" if detail else ""))
for name, ms in sorted(tot.items(), key=lambda kv: -kv[1]):
    line = f"{name[:60]:60s} {calls[name]:6d} {ms:9.3f} {100 * ms / total:5.1f}% {1000 * ms / calls[name]:9.1f}"
    if detail:
        w = weighted.get(name)
        line += f" {w[1] / w[0]:6.1f} {w[2] / w[0]:5.1f}" if w and w[0] > 0 else "      -     -"
    print(line)
PY
    cat "$OUT/kernels-$mode.txt" | head -40
done
