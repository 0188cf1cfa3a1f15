#!/usr/bin/env bash
# Runs every test binary of a build folder (cmocka), then prints one summary
# line that CI reads: "N passed, N failed". A binary that crashes, or exits
# non-zero without a cmocka report, counts as one failed test.
# Environment: JEV_TEST_QUICK=1 (sanitizer runs) lets tests pick smaller cases;
# JEV_TEST_DIR is where tests may write (models synthesized for the run).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
export JEV_ROOT="$root"
export JEV_TEST_DIR="${JEV_TEST_DIR:-$root/$build/test-data}"
export JEV_JEV_BIN="$root/$build/jev"
mkdir -p "$JEV_TEST_DIR"
# OpenBLAS (Debian's 0.3.21) falls back to its SSE3 kernels on CPUs newer than it knows, and the
# jev CLI then re-executes itself with OPENBLAS_CORETYPE set (tools/jev.c): a `jev serve` child
# and the test binary comparing with it would then sum in different orders and differ in the
# last bits. One kernel set for the whole run, chosen by the CLI's rule, keeps them comparable.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
  for f in avx512f avx512bw avx512dq avx512vl; do grep -qw "$f" /proc/cpuinfo || OPENBLAS_CORETYPE=Haswell; done
fi
passed=0; failed=0; failed_names=""
for t in "$root/$build"/tests/test-*; do
  [ -x "$t" ] || continue
  case "$t" in *.o|*.d) continue;; esac
  name=$(basename "$t")
  log="$JEV_TEST_DIR/$name.log"
  start=$(date +%s.%N)
  (cd "$root" && "$t") >"$log" 2>&1
  rc=$?
  secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END{print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END{print s+0}')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$f" -ne 0 ]; then
    failed_names="$failed_names $name"
    echo "FAIL $name ($p passed, $f failed, rc=$rc, ${secs}s)"; sed 's/^/    /' "$log" | tail -40
  else
    echo "ok   $name ($p passed, ${secs}s)"
  fi
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
