#!/usr/bin/env bash
# Installs what ringcc needs (Debian packages, when missing), configures and builds.
# Usage: scripts/setup.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}

PACKAGES=(meson ninja-build pkg-config gcc g++ binutils python3 catch2 libucx-dev libhwloc-dev libnuma-dev
          iproute2 openmpi-bin libopenmpi-dev python3-matplotlib python3-torch
          clang libclang-rt-14-dev valgrind)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

WERROR=()
[ "${CI:-}" = "true" ] && WERROR=(--werror)
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dpython=enabled "${WERROR[@]}"
fi
ninja -C "$BUILD"
