#!/usr/bin/env bash
# Makes the virtual environment with PyTorch 2.x from the Python package index, once per user,
# outside the clone (a download of several GB: CI's fresh clones reuse it), and prints its
# python. The version is pinned; a finished environment is marked by a stamp file, so a run
# cut off half way is redone rather than trusted.
# Usage: scripts/torch_venv.sh [--check]   (RINGCC_TORCH_VENV overrides the location)
#   --check: only print the python of a finished environment; exit 1 (installing nothing) if
#            there is none (meson's configure, when the torch tests are optional)
set -euo pipefail
TORCH_VERSION=2.15.0
VENV=${RINGCC_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ringcc/torch-$TORCH_VERSION}
STAMP="$VENV/.ringcc-ready"
if [ "${1:-}" = "--check" ] && [ ! -f "$STAMP" ]; then
  echo "torch_venv: no finished environment at $VENV (scripts/torch_venv.sh makes it)" >&2
  exit 1
fi
if [ ! -f "$STAMP" ]; then
  echo "torch_venv: installing torch $TORCH_VERSION into $VENV (once)" >&2
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  # Any python3 of 3.10 or later with venv; Debian's needs python3-venv for it.
  PY=python3
  if ! $PY -m venv --help >/dev/null 2>&1 || ! $PY -c 'import ensurepip' 2>/dev/null; then
    PY=/usr/bin/python3
  fi
  $PY -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy >&2
  "$VENV/bin/python" -c "import torch; assert torch.__version__.startswith('$TORCH_VERSION')" >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python"
