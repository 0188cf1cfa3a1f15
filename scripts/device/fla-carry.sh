#!/usr/bin/env bash
# scripts/device/fla-carry.sh - pack flash-linear-attention (the `fla` package) into .carry-fla/.
#
# What it is: the development-machine half of the transformers + flash-linear-attention peer
# (docs/bench-peers.md): from a fla-org/flash-linear-attention git directory and a revision, the
# `fla` Python package as a pip install would lay it out (the package, its licence, and a minimal
# flash_linear_attention-VERSION.dist-info so that importlib.metadata finds the distribution as
# transformers' package checks look it up), plus einops, which fla imports at top level and which
# neither torch nor transformers pulls in. fla is pure Python + Triton (MIT); einops is pure Python
# (MIT) and comes from Debian's python3-einops package. The GPU machine reaches no network and has
# no pip index, so both travel with the repository copy: about 5 MB of files, no build.
#
# What it is not: causal-conv1d (a CUDA extension that would have to be compiled; transformers'
# torch convolution stays), a wheel, or a part of jev's build and CI.
#
# Usage, from anywhere (it changes to the repository root):
#   bash scripts/device/fla-carry.sh GITDIR [REV]
#     GITDIR a git directory (bare or not) of fla-org/flash-linear-attention; REV a tag or commit
#     (default v0.5.2: the newest release when this was written; 0.5 runs grouped-value heads)
# Environment: EINOPS_DEB (a python3-einops .deb; default: `apt-get download python3-einops`, from
# the configured sources or else from Debian 13 through a private package list under /tmp, which
# touches no system state), DEST (default .carry-fla).
# Writes DEST/site/ (fla/, the dist-info: first on the peer's sys.path), DEST/deps/ (einops and its
# dist-info: last on sys.path, so an einops already installed there wins), DEST/SOURCE (commit, tag,
# version, einops package, date). Carry DEST with the device call.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { printf 'fla-carry: error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: fla-carry.sh GITDIR [REV]"
SRC=$1
REV=${2:-v0.5.2}
DEST=${DEST:-.carry-fla}
command -v dpkg-deb > /dev/null || die "dpkg-deb: not found (it unpacks the einops package)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
commit=$(git -C "$SRC" rev-parse --verify "$REV^{commit}" 2> /dev/null) || die "$SRC: no revision '$REV'"
tag=$(git -C "$SRC" describe --tags --exact-match "$commit" 2> /dev/null || true)
date=$(git -C "$SRC" show -s --format=%cI "$commit")
mkdir -p "$tmp/site" "$tmp/deps" "$tmp/einops"
git -C "$SRC" archive --format=tar "$commit" -- fla LICENSE | tar -C "$tmp/site" -xf - ||
    die "$SRC $REV: no fla/ or LICENSE (is this flash-linear-attention?)"
mv "$tmp/site/LICENSE" "$tmp/LICENSE"

# what transformers binds (its hub-kernel fallback imports fla.ops.gated_delta_rule by these names)
gdr=$tmp/site/fla/ops/gated_delta_rule/__init__.py
[ -f "$gdr" ] || die "$REV: no fla/ops/gated_delta_rule (the gated delta rule came with fla 0.2)"
for fn in chunk_gated_delta_rule fused_recurrent_gated_delta_rule; do
    grep -q "\b$fn\b" "$gdr" || die "$REV: fla.ops.gated_delta_rule does not export $fn"
done
version=$(sed -n 's/^__version__ = ["'\'']\([^"'\'']*\)["'\'']$/\1/p' "$tmp/site/fla/__init__.py")
[ -n "$version" ] || die "$REV: fla/__init__.py has no __version__ line"

# the distribution's metadata, as pip writes it (transformers reads versions through importlib.metadata,
# and reads the import name -> distribution map from top_level.txt)
info=$tmp/site/flash_linear_attention-$version.dist-info
mkdir -p "$info/licenses"
{
    echo "Metadata-Version: 2.1"
    echo "Name: flash-linear-attention"
    echo "Version: $version"
    echo "Summary: Fast Triton-based implementations of causal linear attention (packed by jev's scripts/device/fla-carry.sh from commit $commit)"
    echo "License-File: LICENSE"
} > "$info/METADATA"
echo fla > "$info/top_level.txt"
echo jev-fla-carry > "$info/INSTALLER"
cp "$tmp/LICENSE" "$info/licenses/LICENSE"

# einops from Debian: the configured sources, else Debian 13's list in a private apt state
deb=${EINOPS_DEB:-}
if [ -z "$deb" ]; then
    if (cd "$tmp" && apt-get download python3-einops > /dev/null 2>&1); then
        deb=$(ls "$tmp"/python3-einops_*.deb)
    else
        apt_dir=$tmp/apt
        mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
        echo "deb http://deb.debian.org/debian trixie main" > "$apt_dir/sources.list"
        opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$apt_dir/lists"
            -o "Dir::Cache=$apt_dir/cache" -o Dir::State::status=/dev/null)
        apt-get "${opts[@]}" update > "$tmp/apt.log" 2>&1 || die "apt-get update (Debian 13 list) failed: $(tail -n 3 "$tmp/apt.log")"
        (cd "$tmp" && apt-get "${opts[@]}" download python3-einops > "$tmp/apt.log" 2>&1) ||
            die "apt-get download python3-einops failed: $(tail -n 3 "$tmp/apt.log")"
        deb=$(ls "$tmp"/python3-einops_*.deb)
    fi
fi
[ -f "$deb" ] || die "$deb: no such .deb"
dpkg-deb -x "$deb" "$tmp/einops"
pkgs=$tmp/einops/usr/lib/python3/dist-packages
[ -f "$pkgs/einops/__init__.py" ] || die "$deb: no usr/lib/python3/dist-packages/einops (not python3-einops?)"
cp -a "$pkgs"/einops "$pkgs"/einops-*.dist-info "$tmp/deps/"
rm -rf "$tmp/deps/einops/tests"
[ -f "$tmp/einops/usr/share/doc/python3-einops/copyright" ] && cp "$tmp/einops/usr/share/doc/python3-einops/copyright" "$tmp/deps/einops.copyright"
einops_pkg=$(dpkg-deb -f "$deb" Package)_$(dpkg-deb -f "$deb" Version)

rm -rf "$DEST"
mkdir -p "$DEST"
cp -a "$tmp/site" "$tmp/deps" "$tmp/LICENSE" "$DEST/"
{
    echo "commit $commit"
    echo "tag ${tag:-none}"
    echo "date $date"
    echo "version $version"
    echo "einops $einops_pkg"
    echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$DEST/SOURCE"
printf 'fla-carry: flash-linear-attention %s (%s, %s) + %s -> %s, %s\n' "$version" "${tag:-untagged}" \
    "${commit:0:12}" "$einops_pkg" "$DEST" "$(du -sh "$DEST" | cut -f1)"
