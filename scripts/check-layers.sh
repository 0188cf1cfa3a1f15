#!/usr/bin/env bash
# check-layers.sh [ROOT] - fails when a source file includes a header of a layer above its own,
# or another folder's internal header (docs/design.md has the picture):
#
#   base < io, text < backend < model < decide < wire < server < common < tools
#
# io and text are siblings: neither includes the other. include/jev.h (the public header) may be
# included from anywhere. An include without a folder ("cpu-simd.h", "commands.h") is the
# including file's own folder. Internal headers (*-int.h, *-internal.h, *-impl.h) are for the
# files of their own folder only. tests/, fuzz/ and bench/ are outside the layers: they test
# and measure internals on purpose.
#
# Prints one line per violation ("FILE: includes "HEADER" (LAYER above LAYER)") and exits 1 when
# there is any, 0 otherwise. Run by `make test` (tests/test-layers.c runs it on the tree and on a
# planted violation).
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || { echo "check-layers: no such folder: $root" >&2; exit 2; }

# The rank of a layer; siblings share a rank and may not include each other.
rank() {
  case "$1" in
    base) echo 0 ;; io | text) echo 1 ;; backend) echo 2 ;; model) echo 3 ;; decide) echo 4 ;;
    wire) echo 5 ;; server) echo 6 ;; common) echo 7 ;; tools) echo 8 ;; *) echo -1 ;;
  esac
}

# The layer of a path inside the repository (src/X/..., common/..., tools/...).
layer_of_file() {
  case "$1" in
    src/*) local rest=${1#src/}; echo "${rest%%/*}" ;;
    common/*) echo common ;;
    tools/*) echo tools ;;
    *) echo "" ;;
  esac
}

bad=0
while IFS= read -r f; do
  from=$(layer_of_file "$f")
  rf=$(rank "$from")
  if [ "$rf" -lt 0 ]; then
    echo "$f: not in a known layer (src/{base,io,text,backend,model,decide,wire,server}, common, tools)"
    bad=1
    continue
  fi
  dir=$(dirname "$f")
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    [ "$inc" = "jev.h" ] && continue
    case "$inc" in
      */*) target="src/$inc"; [ "${inc%%/*}" = common ] && target="$inc" ;;
      *) target="$dir/$inc" ;;
    esac
    to=$(layer_of_file "$target")
    rt=$(rank "$to")
    if [ "$rt" -lt 0 ]; then
      echo "$f: includes \"$inc\", which is in no layer"
      bad=1
    elif [ "$rt" -gt "$rf" ]; then
      echo "$f: includes \"$inc\" ($to above $from)"
      bad=1
    elif [ "$rt" -eq "$rf" ] && [ "$to" != "$from" ]; then
      echo "$f: includes \"$inc\" ($to and $from are siblings)"
      bad=1
    fi
    case "$(basename "$inc")" in
      *-int.h | *-internal.h | *-impl.h)
        if [ "$(dirname "$target")" != "$dir" ]; then
          echo "$f: includes \"$inc\", an internal header of $(dirname "$target")/"
          bad=1
        fi
        ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find src common tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null | sort)
exit $bad
