#!/usr/bin/env bash
# Runs every test binary of a build folder (cmocka), each under a time limit, then prints one
# summary line that CI reads: "N passed, N failed". Not a test framework: it reads cmocka's
# report and the exit status, nothing else.
#
# A binary fails, and is named on a FAIL line and in the "failed:" list, when
#   - it runs past its time limit (killed: a deadlock must not hang CI);
#   - it ran fewer tests than it registered: cmocka prints "[==========] Running N test(s)."
#     per group, and a binary whose PASSED + FAILED counts fall short of that (it crashed
#     mid-way, or skipped one) has its missing tests counted as failed;
#   - it exits non-zero, or prints no cmocka report at all.
# Usage: tests/run.sh [BUILD]   (a folder under the repository root, or an absolute path)
# Environment:
#   JEV_TEST_TIMEOUT=SECONDS per binary (default 900: 5 times the slowest binary, test-prefix-
#     reuse, which took 177 s under AddressSanitizer with JEV_TEST_QUICK and 64 s without
#     sanitizers on the shared 2-core development machine);
#   JEV_TEST_KILL_AFTER=SECONDS from SIGTERM to SIGKILL for one that ignores it (default 10);
#   JEV_TEST_QUICK=1 (sanitizer runs) lets tests pick smaller cases;
#   JEV_TEST_DIR is where tests may write (models synthesized for the run);
#   JEV_TEST_RUNNER=PROGRAM runs each binary through it (make test-arm64: qemu-aarch64).
# tests/test-runner.c runs this script on planted binaries.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$build" in /*) dir=$build ;; *) dir=$root/$build ;; esac
limit=${JEV_TEST_TIMEOUT:-900}
kill_after=${JEV_TEST_KILL_AFTER:-10}
export JEV_ROOT="$root"
export JEV_TEST_DIR="${JEV_TEST_DIR:-$dir/test-data}"
# under a runner the CLI goes through it too (tests run it with system() and popen())
export JEV_JEV_BIN="${JEV_TEST_RUNNER:+$JEV_TEST_RUNNER }$dir/jev"
mkdir -p "$JEV_TEST_DIR"
# OpenBLAS (Debian's 0.3.21) falls back to its SSE3 kernels on CPUs newer than it knows, and the
# jev CLI then re-executes itself with OPENBLAS_CORETYPE set (tools/jev.c): a `jev serve` child
# and the test binary comparing with it would then sum in different orders and differ in the
# last bits. One kernel set for the whole run, chosen by the CLI's rule, keeps them comparable.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
  for f in avx512f avx512bw avx512dq avx512vl; do grep -qw "$f" /proc/cpuinfo || OPENBLAS_CORETYPE=Haswell; done
fi
# the sum of the counts cmocka prints on lines matching $1 (field 4 of "[  PASSED  ] 3 test(s).")
count() { grep -E "$1" "$2" | awk '{s+=$4} END{print s+0}'; }
# "[==========] Running 5 test(s)." has its count in field 3
registered() { grep -E '^\[==========\] Running [0-9]+ test' "$1" | awk '{s+=$3} END{print s+0}'; }
passed=0; failed=0; failed_names=""
for t in "$dir"/tests/test-*; do
  [ -x "$t" ] || continue
  case "$t" in *.o|*.d) continue;; esac
  name=$(basename "$t")
  log="$JEV_TEST_DIR/$name.log"
  start=$(date +%s.%N)
  # timeout puts the binary in a process group of its own and signals the whole group
  (cd "$root" && exec timeout -k "$kill_after" "$limit" ${JEV_TEST_RUNNER:-} "$t") >"$log" 2>&1
  rc=$?
  elapsed=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  secs=$(awk "BEGIN{printf \"%.1f\", $elapsed}")
  reg=$(registered "$log")
  p=$(count '^\[  PASSED  \] [0-9]+ test' "$log")
  f=$(count '^\[  FAILED  \] [0-9]+ test' "$log")
  why=""
  # 124: timeout's TERM ended it; 137 (KILL) after the limit: it ignored the TERM
  if [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && awk "BEGIN{exit !($elapsed >= $limit)}"; }; then
    why="timed out after ${limit}s (JEV_TEST_TIMEOUT)"
  elif [ "$reg" -eq 0 ]; then
    why="no cmocka report (exit $rc)"
  elif [ $((p + f)) -lt "$reg" ]; then
    why="ran $((p + f)) of $reg registered tests (exit $rc)"
  elif [ "$rc" -ne 0 ]; then
    why="exit $rc"
  fi
  # tests that never reported count as failed; a failure without a count counts as one
  [ "$reg" -gt $((p + f)) ] && f=$((reg - p))
  [ -n "$why" ] && [ "$f" -eq 0 ] && f=1
  passed=$((passed + p)); failed=$((failed + f))
  if [ -n "$why" ] || [ "$f" -ne 0 ]; then
    failed_names="$failed_names $name"
    echo "FAIL $name ($p passed, $f failed, ${why:-exit $rc}, ${secs}s)"; sed 's/^/    /' "$log" | tail -40
  else
    echo "ok   $name ($p passed, ${secs}s)"
  fi
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
