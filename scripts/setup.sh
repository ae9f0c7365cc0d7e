#!/usr/bin/env bash
# Installs what ringcc needs (Debian packages, when missing), configures and builds.
# Usage: scripts/setup.sh [build-dir [targets...]]   (default: build, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift $(($# > 0 ? 1 : 0))

# The configured value of the build's `python` option.
python_option() {
  meson introspect "$BUILD" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "python"))'
}

# What the library, the launcher and the perf tool need to configure and build (Catch2 too:
# Meson looks for it when it configures), then what only the tests use (namespaces, MPI and
# Debian's PyTorch as peers, clang for the fuzzers, valgrind for the call-path count, ccache so
# the GPU bundle's build compiles the library's sources once: Meson takes ccache when it is
# installed before the build is configured, and the bundle's TUs match build/'s).
BUILD_PACKAGES=(meson ninja-build pkg-config gcc g++ binutils python3 catch2 libucx-dev libhwloc-dev
                libnuma-dev)
TEST_PACKAGES=(iproute2 openmpi-bin libopenmpi-dev python3-matplotlib python3-torch
               clang libclang-rt-14-dev valgrind ccache)
PACKAGES=("${BUILD_PACKAGES[@]}")
# Named targets are a partial build (scripts/run.sh): the test packages can wait for the tests.
(($#)) || PACKAGES+=("${TEST_PACKAGES[@]}")
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
  # A build configured before (by scripts/run.sh, say) looks again for what just arrived (MPI).
  [ ! -f "$BUILD/build.ninja" ] || meson setup --reconfigure "$BUILD"
fi

# With the test packages, the ABI tests' reference (NVIDIA's 2.32.3 nccl.h, fetched once into a
# per-user cache); a build configured without it looks again.
if ! (($#)) && ! scripts/fetch_nccl_header.sh --present; then
  scripts/fetch_nccl_header.sh
  [ ! -f "$BUILD/build.ninja" ] || meson setup --reconfigure "$BUILD"
fi
# With the test packages, torch 2.x too (a venv, once per user; the 'torch2' test suite).
(($#)) || scripts/torch_venv.sh >/dev/null
# And, optionally, Intel oneCCL (a venv, once per user): bench/compare's second reference. Not
# needed by any test, so a failed install only says so; a build configured before it arrived
# looks again. RINGCC_SKIP_ONECCL=1: not tried.
if ! (($#)) && [ -z "${RINGCC_SKIP_ONECCL:-}" ] && ! scripts/oneccl_venv.sh --check >/dev/null 2>&1; then
  if scripts/oneccl_venv.sh >/dev/null; then
    [ ! -f "$BUILD/build.ninja" ] || meson setup --reconfigure "$BUILD"
  else
    echo "setup: oneCCL not installed (optional: bench/compare runs without its series)" >&2
  fi
fi

WERROR=()
[ "${CI:-}" = "true" ] && WERROR=(--werror)
# The torch tests need Debian's PyTorch and the torch 2.x venv, both test packages: a partial
# build (scripts/run.sh) looks for them quietly (auto), a full one requires them (enabled).
PYTHON=enabled
(($#)) && PYTHON=auto
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dpython=$PYTHON "${WERROR[@]}"
elif [ $PYTHON = enabled ] && [ "$(python_option)" != enabled ]; then
  meson configure "$BUILD" -Dpython=enabled  # configured by scripts/run.sh before
fi
# ccache leaves the working directory out of its hash (it puts it in when compiling with -g, as
# the directory goes into the debug info): the GPU bundle's build (tests/gpu/bundle.sh, the same
# setting) then hits this build's objects. Its relative paths resolve alike there (the bundle
# dir sits at the same depth, and strips its debug sections anyway).
export CCACHE_NOHASHDIR=1
# Targets as `meson compile` names them ([dir/]name); none: the default set, everything.
meson compile -C "$BUILD" "$@"
