#!/usr/bin/env bash
# tests/arm64-decide.sh X86_JEV ARM64_JEV - the end-to-end step of `make test-arm64`: the aarch64
# jev (run by qemu-aarch64) against the x86-64 one on the same synthesized tiny models. Checks
#   - that ARM64_JEV is an aarch64 program (an x86-64 one would run here without qemu and prove
#     nothing; qemu-aarch64 itself refuses any other machine's program);
#   - `jev synth` on aarch64 writes the same weight bytes as on x86-64 (seeded generator, bf16);
#   - `jev decide --json` on a photo request (vision tower, choice, noul and score questions) on the
#     bf16 model and on its 4-bit mlx4 form (the NEON dequantization), and a text request with all
#     questions in one batch: the same answers (every string and key alike), every probability,
#     score and confidence within 1e-5 of the x86-64 build's (the two differ only in the order of
#     f32 sums: NEON lanes, OpenBLAS's ARMV8 kernels).
# Prints one line per case and a closing "arm64-decide: N passed, N failed"; exits 1 on any failure.
# Environment: JEV_TEST_DIR (where the models go; default build-arm64/test-data), QEMU (qemu-aarch64),
# ARM64_OPENBLAS_CORETYPE (default ARMV8: OpenBLAS's generic NEON kernels, whatever CPU qemu shows it).
set -euo pipefail
cd "$(dirname "$0")/.."
x86=$1
arm=$2
qemu=${QEMU:-qemu-aarch64}
dir=${JEV_TEST_DIR:-build-arm64/test-data}/arm64-decide
tol=1e-5
mkdir -p "$dir"
# the aarch64 jev under qemu; the x86-64 one picks its OpenBLAS kernels as always (tools/jev.c)
arm_jev() { OPENBLAS_CORETYPE=${ARM64_OPENBLAS_CORETYPE:-ARMV8} "$qemu" "$arm" "$@"; }
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

if readelf -h "$arm" 2>/dev/null | grep -q 'Machine:.*AArch64'; then ok "$arm is an AArch64 program"; else bad "$arm is not an AArch64 program"; fi

"$x86" synth --config configs/tiny.json --seed 1 --out "$dir/tiny-hf" --force >/dev/null
"$x86" synth --config configs/tiny.json --seed 1 --layout mlx4 --out "$dir/tiny-mlx4" --force >/dev/null
arm_jev synth --config configs/tiny.json --seed 1 --out "$dir/tiny-hf-arm64" --force >/dev/null
if cmp -s "$dir/tiny-hf/model.safetensors" "$dir/tiny-hf-arm64/model.safetensors"; then
  ok "synth: the same weights on both"
else
  bad "synth: $dir/tiny-hf-arm64/model.safetensors differs from the x86-64 build's"
fi

# The answers with every JSON number (a value after ':', ',' or '[') replaced by '#': must be equal.
skeleton() { sed -E 's/([:,[])-?[0-9][0-9.eE+-]*/\1#/g' "$1"; }
# The numbers themselves, one a line, in order.
numbers() { grep -oE '[:,[]-?[0-9][0-9.eE+-]*' "$1" | cut -c2-; }

# case NAME ARGS...: `jev decide ARGS --json` on both builds, compared
case_() {
  local name=$1
  shift
  "$x86" decide "$@" --json >"$dir/$name.x86.json"
  if ! arm_jev decide "$@" --json >"$dir/$name.arm64.json"; then
    bad "$name: the aarch64 jev decide failed"
    return
  fi
  if ! cmp -s <(skeleton "$dir/$name.x86.json") <(skeleton "$dir/$name.arm64.json"); then
    bad "$name: the answers differ: $dir/$name.x86.json, $dir/$name.arm64.json"
    return
  fi
  local worst
  worst=$(paste <(numbers "$dir/$name.x86.json") <(numbers "$dir/$name.arm64.json") |
    awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++} END {printf "%d %.3g", n, m}')
  if awk -v w="${worst#* }" -v t="$tol" -v n="${worst% *}" 'BEGIN {exit !(n > 0 && w <= t)}'; then
    ok "$name: the same answers, ${worst% *} numbers within ${worst#* } (<= $tol)"
  else
    bad "$name: ${worst% *} numbers, the largest difference ${worst#* } (> $tol, or none compared)"
  fi
}

case_ photo-bf16 --model "$dir/tiny-hf" --request tests/data/decide/golden-image.json --image tests/data/rgb8.png
case_ photo-mlx4 --model "$dir/tiny-mlx4" --request tests/data/decide/golden-image.json --image tests/data/rgb8.png
case_ text-batch --model "$dir/tiny-hf" --request tests/data/decide/golden-text.json --batch all

echo "arm64-decide: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
