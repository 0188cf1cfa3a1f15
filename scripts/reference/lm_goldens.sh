#!/usr/bin/env bash
# Writes the LM reference goldens of both layouts into OUTDIR:
#   OUTDIR/lm-tiny-hf.json, OUTDIR/lm-tiny-mlx4.json  (copy them to tests/golden/)
# The tiny models are synthesized with this checkout's jev (MODELS, default
# .ref/, gitignored) and read by scripts/reference/lm_goldens.py, which needs
# python3 with torch, transformers 5.x, numpy (no network).
#   usage: bash scripts/reference/lm_goldens.sh OUTDIR [MODELS]
# Split use (synthesize here, run Python elsewhere):
#   SYNTH_ONLY=1 bash scripts/reference/lm_goldens.sh unused .ref
#   SKIP_SYNTH=1 bash scripts/reference/lm_goldens.sh OUTDIR .ref
set -euo pipefail
out=${1:?usage: lm_goldens.sh OUTDIR [MODELS]}
root=$(cd "$(dirname "$0")/../.." && pwd)
models=${2:-$root/.ref}
py=${PYTHON:-python3}
mkdir -p "$models"
for layout in hf mlx4; do
  dir=$models/lm-tiny-$layout
  if [ -z "${SKIP_SYNTH:-}" ]; then
    "$root/build/jev" synth --config "$root/configs/tiny.json" --seed 1 --layout "$layout" --out "$dir" --force
  fi
  if [ -z "${SYNTH_ONLY:-}" ]; then
    mkdir -p "$out"
    "$py" "$root/scripts/reference/lm_goldens.py" "$dir" "$layout" "$out/lm-tiny-$layout.json"
  fi
done
