#!/usr/bin/env bash
# Installs Intel oneCCL for CPUs (pip's oneccl-cpu-devel: headers, libccl.so) into a virtual
# environment, once per user, outside the clone: bench/oneccl's reference all-reduce is built
# against it (meson's -Doneccl default is this place) and bench/compare runs it. The version
# is pinned; a finished environment is marked by a stamp file, so a run cut off half way is
# redone rather than trusted. Prints the environment's directory.
# Usage: scripts/oneccl_venv.sh [--check]   (RINGCC_ONECCL_VENV overrides the location; meson
#   must then be told: -Doneccl=DIR)
#   --check: only print the directory of a finished environment; exit 1 (installing nothing)
#            if there is none
set -euo pipefail
ONECCL_VERSION=2022.2.0
VENV=${RINGCC_ONECCL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ringcc/oneccl-$ONECCL_VERSION}
STAMP="$VENV/.ringcc-ready"
if [ "${1:-}" = "--check" ] && [ ! -f "$STAMP" ]; then
  echo "oneccl_venv: no finished environment at $VENV (scripts/oneccl_venv.sh makes it)" >&2
  exit 1
fi
if [ ! -f "$STAMP" ]; then
  echo "oneccl_venv: installing oneccl-cpu-devel $ONECCL_VERSION into $VENV (once)" >&2
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  # Any python3 with venv; Debian's needs python3-venv for it.
  PY=python3
  if ! $PY -m venv --help >/dev/null 2>&1 || ! $PY -c 'import ensurepip' 2>/dev/null; then
    PY=/usr/bin/python3
  fi
  $PY -m venv "$VENV" >&2
  # --no-deps: oneccl-cpu asks for the libfabric wheel (>= 2.6), which the package index does
  # not have; oneCCL loads the system's libfabric.so.1 instead (Debian's libfabric1, which
  # OpenMPI's packages bring; 1.17 works), see docs/benchmarks.md.
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
    "oneccl-cpu-devel==$ONECCL_VERSION" "oneccl-cpu==$ONECCL_VERSION" >&2
  # oneccl-cpu's libccl.so.1 needs libccl.so.2 (oneCCL's onecclXxx API), which that wheel does
  # not ship (2022.2.0); the full oneccl wheel of the same version does (92 MB): take those two
  # files from it, nothing else.
  if [ ! -e "$VENV/lib/libccl.so.2" ]; then
    WHEELS=$(mktemp -d)
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$WHEELS" \
      "oneccl==$ONECCL_VERSION" >&2
    "$VENV/bin/python" - "$WHEELS"/oneccl-*.whl "$VENV/lib" <<'PY' >&2
import os, sys, zipfile
wheel, libdir = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if name.endswith("/data/lib/" + base) and base in ("libccl.so.2", "libccl.so.2.0"):
            with open(os.path.join(libdir, base), "wb") as f:
                f.write(z.read(name))
            os.chmod(os.path.join(libdir, base), 0o755)
PY
    rm -rf "$WHEELS"
  fi
  for f in include/oneapi/ccl.hpp lib/libccl.so lib/libccl.so.2; do
    [ -e "$VENV/$f" ] || { echo "oneccl_venv: $VENV/$f missing after the install" >&2; exit 1; }
  done
  touch "$STAMP"
fi
if ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep 'libfabric\.so\.1 ' >/dev/null; then
  echo "oneccl_venv: no libfabric.so.1 on this system (apt-get install libfabric1): oneCCL" \
       "will not start" >&2
fi
echo "$VENV"
