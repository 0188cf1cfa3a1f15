#!/usr/bin/env bash
# The jev half of tests/golden/decisions-tiny.json: synthesizes the tiny model (configs/tiny.json, seed 1,
# HF layout) and writes jev's inputs of the two golden requests (`jev decide --dump-ids`) into OUT. Then,
# where transformers is, scripts/reference/decision_goldens.py computes the distributions (its docstring
# has the command). Run from the repository root after `make`.
set -euo pipefail
out=${1:?usage: decision_goldens.sh OUT_DIR}
build=${BUILD:-build}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
"$build/jev" synth --config configs/tiny.json --seed 1 --layout hf --out "$out/tiny-hf" --force
"$build/jev" decide --model "$out/tiny-hf" --request tests/data/decide/golden-text.json \
  --dump-ids "$out/dump-text.json" >/dev/null
"$build/jev" decide --model "$out/tiny-hf" --request tests/data/decide/golden-image.json \
  --image tests/data/rgb8.png --dump-ids "$out/dump-image.json" >/dev/null
echo "next, where transformers is:"
echo "  python3 scripts/reference/decision_goldens.py --model $out/tiny-hf --out tests/golden/decisions-tiny.json \\"
echo "      text=$out/dump-text.json image=$out/dump-image.json"
