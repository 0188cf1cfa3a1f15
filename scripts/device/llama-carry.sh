#!/usr/bin/env bash
# scripts/device/llama-carry.sh - pack the llama.cpp source that the GPU machine builds into .carry-llama/.
#
# What it is: the development-machine half of the llama.cpp peer (docs/bench-peers.md): from a
# llama.cpp checkout (a work tree, or a git directory plus a revision), one xz tarball of only what
# scripts/device/llama-peer.sh builds and runs there: the CMake files, ggml/, src/, include/,
# common/, vendor/, tools/ (without the web UI, the server and the CLI, which the build leaves off),
# the Hugging Face converter (convert_hf_to_gguf.py, conversion/, gguf-py/) and the licences. The
# GPU machine reaches no network, so the source travels with the repository copy; the tarball is
# about 7 MB, well inside the 64 MiB a device call carries beside jev's own .carry-cuda/.
#
# What it is not: a build (the GPU machine builds with its own nvcc), and no part of jev's Makefile
# or CI (which have no llama.cpp).
#
# Usage, from anywhere (it changes to the repository root):
#   bash scripts/device/llama-carry.sh SRC [REV]
#     SRC a llama.cpp work tree, or a git directory (bare or not) when REV (a tag or commit) is given
# Writes .carry-llama/llama.cpp.tar.xz (top folder llama.cpp/) and .carry-llama/SOURCE (the commit,
# the tag when REV is one, the date packed). Carry .carry-llama with the device call.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { printf 'llama-carry: error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: llama-carry.sh SRC [REV]"
SRC=$1
REV=${2:-}
DEST=.carry-llama
# the build's inputs; tools/ui (the server's web UI, 7 MB), tools/server and tools/cli are left out:
# llama-peer.sh configures with LLAMA_BUILD_SERVER=OFF, and tools/CMakeLists.txt adds them only then
PATHS=(CMakeLists.txt cmake ggml src include common vendor tools convert_hf_to_gguf.py conversion
    gguf-py LICENSE licenses)
EXCLUDE=(tools/ui tools/server tools/cli)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/llama.cpp"

if [ -n "$REV" ]; then
    commit=$(git -C "$SRC" rev-parse --verify "$REV^{commit}") || die "$SRC: no revision '$REV'"
    tag=$(git -C "$SRC" describe --tags --exact-match "$commit" 2>/dev/null || true)
    git -C "$SRC" archive --format=tar "$commit" -- "${PATHS[@]}" | tar -C "$tmp/llama.cpp" -xf -
else
    [ -f "$SRC/CMakeLists.txt" ] && [ -f "$SRC/include/llama.h" ] || die "$SRC: not a llama.cpp work tree (no CMakeLists.txt, include/llama.h)"
    commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
    tag=$(git -C "$SRC" describe --tags --exact-match HEAD 2>/dev/null || true)
    for p in "${PATHS[@]}"; do
        [ -e "$SRC/$p" ] || die "$SRC/$p: missing (is this llama.cpp?)"
        cp -a "$SRC/$p" "$tmp/llama.cpp/"
    done
fi
for p in "${EXCLUDE[@]}"; do rm -rf "${tmp:?}/llama.cpp/$p"; done
[ -f "$tmp/llama.cpp/include/llama.h" ] || die "the packed tree has no include/llama.h"
grep -q 'qwen35' "$tmp/llama.cpp/src/llama-arch.cpp" ||
    die "this llama.cpp has no qwen35 architecture (Qwen3.5 needs a release from 2026 on)"

# the build reads the commit from .git, which does not travel; it is passed to CMake from SOURCE
rm -rf "$DEST"
mkdir -p "$DEST"
tar -C "$tmp" --owner=0 --group=0 --numeric-owner --sort=name -cf - llama.cpp | xz -9 -T1 > "$DEST/llama.cpp.tar.xz"
{
    echo "commit $commit"
    echo "tag ${tag:-none}"
    echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$DEST/SOURCE"
printf 'llama-carry: %s (%s) -> %s/llama.cpp.tar.xz, %s bytes\n' "$commit" "${tag:-untagged}" "$DEST" \
    "$(stat -c %s "$DEST/llama.cpp.tar.xz")"
