#!/usr/bin/env bash
# Fetches the reference of ringcc's ABI tests, NVIDIA NCCL 2.32.3's nccl.h, into a per-user
# cache, once: pip downloads the wheel nvidia-nccl-cu13==2.32.3 from PyPI (~300 MB, kept in
# $CACHE/wheels so it is never fetched twice) and the header is unpacked beside it. Nothing
# of it enters the source tree or the build's include paths: only tests/unit/abi_real.cc and
# tests/abi read it, by absolute path (tests/meson.build).
# Usage: scripts/fetch_nccl_header.sh [--present]
#   --present   exit 0 if the header is already there, 1 if not; fetch nothing
# Cache: $RINGCC_CACHE, default ~/.cache/ringcc (the build looks there; elsewhere, configure
# with -Dnccl_reference_header=PATH).
set -euo pipefail
VERSION=2.32.3
CACHE=${RINGCC_CACHE:-$HOME/.cache/ringcc}
HEADER=$CACHE/nccl-$VERSION/include/nccl.h

if [ -f "$HEADER" ]; then
  [ "${1:-}" = "--present" ] || echo "fetch_nccl_header: $HEADER (already there)"
  exit 0
fi
[ "${1:-}" != "--present" ] || exit 1

mkdir -p "$CACHE/wheels" "$(dirname "$HEADER")"
wheel=$(ls "$CACHE/wheels"/nvidia_nccl_cu13-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  echo "fetch_nccl_header: downloading nvidia-nccl-cu13==$VERSION into $CACHE/wheels"
  python3 -m pip download --quiet --no-deps "nvidia-nccl-cu13==$VERSION" -d "$CACHE/wheels"
  wheel=$(ls "$CACHE/wheels"/nvidia_nccl_cu13-"$VERSION"-*.whl | head -1)
fi
# A wheel is a zip; Python unpacks it where unzip is not installed.
python3 - "$wheel" "$HEADER" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, open(out + ".tmp", "wb") as f:
    f.write(z.read("nvidia/nccl/include/nccl.h"))
PY
grep -q "^#define NCCL_VERSION_CODE 23203" "$HEADER.tmp" || {
  echo "fetch_nccl_header: $wheel holds no NCCL $VERSION nccl.h" >&2
  rm -f "$HEADER.tmp"
  exit 1
}
mv "$HEADER.tmp" "$HEADER"
echo "fetch_nccl_header: $HEADER"
