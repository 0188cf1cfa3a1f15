#!/usr/bin/env bash
# Installs what `make test-arm64` needs on a Debian 12 x86-64 machine, and nothing when it is
# already there: the aarch64 cross compiler, qemu-user to run its binaries, SIMDe (the header
# library that compiles the CPU backend's AVX2 kernels to NEON on aarch64) and the arm64 builds
# of the libraries jev links (Makefile LIBS, cmocka for the tests) through Debian multiarch
# (dpkg --add-architecture arm64). Multiarch needs the amd64 and arm64 copies of a shared
# library at one version, so a first install may upgrade a few amd64 libraries to the
# archive's current version. Only `make test-arm64` calls this: `make test` stays as fast.
# Not a general cross-build setup: nothing here is needed to build or run jev itself.
set -euo pipefail
cd "$(dirname "$0")/.."

NATIVE="gcc-aarch64-linux-gnu qemu-user libsimde-dev"
ARM64="libc6-dev libjansson-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev
libssl-dev libopenblas-dev libcmocka-dev"

missing=""
for p in $NATIVE; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
for p in $ARM64; do
  dpkg-query -W -f='${Status}' "$p:arm64" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p:arm64"
done
if [ -n "$missing" ]; then
  echo "setup-arm64: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  # --no-remove: an arm64 package that conflicts with an installed amd64 one fails here instead
  # of taking the native library away
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove $missing >/dev/null
fi
