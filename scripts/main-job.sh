#!/usr/bin/env bash
# The README's main job. For now: synthesize a tiny model on first use, then
# run a short prompt through the language model (top tokens and speed).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
exec "$build/jev" run --help
