#!/usr/bin/env bash
# session 12, device call 1: checks, memory, decode's anatomy, 16-core CPU scaling
set -u
export WORK=$PWD/.work-cuda
S=scripts/device/cuda-check.sh
t0=$(date +%s)
el() { echo "[call1 +$(( $(date +%s) - t0 ))s] $*"; }
bash $S unpack tests agree
el "tests agree done"
COUNTS="1 64" REPEATS=3 BENCH_ARGS="--batch all --paths shared" bash $S bench fast
el "bench fast done"
J=$WORK/bin/jev; M=$WORK/model; export LD_LIBRARY_PATH=$WORK/bin
for p in exact fast; do
  echo "== jev run $p 512 + decode 128"
  $J run --model $M --backend cuda --precision $p --random-tokens 512 --chunk 512 --decode 128 --top 0 2>&1 | tail -4
  $J run --model $M --backend cuda --precision $p --random-tokens 512 --chunk 512 --decode 128 --top 0 2>&1 | tail -4
  echo "== JEV_PROFILE decode 64, $p"
  JEV_PROFILE=1 $J run --model $M --backend cuda --precision $p --random-tokens 16 --chunk 16 --decode 64 --top 0 2>&1 | tail -45
done > $OUT/decode.txt 2>&1
el "decode timing done"
NCU=$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)
for d in 2 10; do
  timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv $J run --model $M --backend cuda --random-tokens 16 --chunk 16 --decode $d --top 0 > $WORK/ncu$d.csv 2> $WORK/ncu$d.log || tail -3 $WORK/ncu$d.log
done
python3 - $WORK/ncu2.csv $WORK/ncu10.csv > $OUT/decode-kernels.txt <<'PY'
import csv, sys, collections
def load(p):
    lines = list(csv.reader(open(p)))
    at = next(i for i, r in enumerate(lines) if "Kernel Name" in r)
    h = lines[at]; ni, ui, vi = h.index("Kernel Name"), h.index("Metric Unit"), h.index("Metric Value")
    sc = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    t = collections.defaultdict(float); c = collections.Counter()
    for r in lines[at+1:]:
        if len(r) != len(h): continue
        n = r[ni].split("(")[0].replace("void ", "")[:70]
        t[n] += float(r[vi].replace(",", "")) * sc[r[ui]]; c[n] += 1
    return t, c
t8, c8 = load(sys.argv[1]); t40, c40 = load(sys.argv[2])
names = sorted(set(t40), key=lambda n: -(t40[n] - t8.get(n, 0)))
tot = sum(t40.values()) - sum(t8.values()); calls = sum(c40.values()) - sum(c8.values())
print(f"per decode token (8 tokens between decode 2 and decode 10): {tot/8:.1f} us of kernels, {calls/8:.1f} launches")
for n in names:
    d = t40[n] - t8.get(n, 0); k = c40[n] - c8.get(n, 0)
    if k: print(f"{d/8:9.1f} us/token {k/8:7.1f} calls/token {d/max(k,1):8.2f} us/call  {n}")
PY
el "ncu decode done"
mkdir -p .b && python3 -c "import tarfile;tarfile.open('.carry-cpu/b.tar.xz').extractall('.b')" && chmod +x .b/jev .b/bench/*
B=$PWD/.b OUT=$OUT/scaling MODEL=$WORK/model timeout 200 bash scripts/device/scaling.sh 16 > /dev/null 2>&1
el "scaling done"
bash $S collect
