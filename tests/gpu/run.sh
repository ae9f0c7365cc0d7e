#!/usr/bin/env bash
# What runs on a machine with a GPU (the device tool runs it there; nothing here needs one to
# build). One prepared script: build, then each GPU check in turn, then a summary; exit
# status non-zero if any check failed. Steps so far:
#   torch-preload   PyTorch's own NCCL process group with ringcc's libnccl.so.2 preloaded
#                   (tests/gpu/torch_nccl_preload.py): the right library is mapped, and a CUDA
#                   all_reduce is exact or fails naming what ringcc lacks. Needs torch with
#                   CUDA on that machine; reported as "not run" without it.
# The CUDA executor's checks (issue 12) join here.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
failed=0
report() { printf '%-16s %s\n' "$1" "$2"; }

if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dtests=false >/dev/null || { report build FAILED; exit 1; }
fi
ninja -C "$BUILD" >/dev/null || { report build FAILED; exit 1; }
report build ok

for py in /usr/bin/python3 python3; do
  if "$py" -c 'import torch' 2>/dev/null; then
    LD_PRELOAD="$PWD/$BUILD/libnccl.so.2" "$py" tests/gpu/torch_nccl_preload.py
    case $? in
      0) report torch-preload ok ;;
      2) report torch-preload "not run (torch without CUDA)" ;;
      *) report torch-preload FAILED; failed=1 ;;
    esac
    break
  fi
done
exit $failed
