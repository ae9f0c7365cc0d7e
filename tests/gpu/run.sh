#!/usr/bin/env bash
# What runs on a machine with a GPU (the device tool runs it there; everything here builds
# without one). One prepared script, under 8 minutes: build with CUDA, then each check in
# turn, then a summary; exit status non-zero if any check failed or is not built yet. Without
# a GPU it stops at once, saying so (it never waits on a device that is not there).
#   gpu               a GPU and the driver are visible (nvidia-smi, else libcuda.so.1)
#   cuda-unit         the host-side CUDA suites (lazy driver, memory kind, launch packing,
#                     header compatibility), now with the real driver loaded
#   kernel-launch     the batch kernel embedded in libnccl loads (cuModuleLoadData) and
#                     launches on this GPU (tests/gpu/kernel_launch.cc)
#   cuda-engine       the CUDA engine's host suites on the emulated driver
#   collectives       every collective at 1, 2, 4, 8 ranks on one GPU through ncclCommInitAll,
#                     1,000 and 2^20 floats on device buffers, checked (tests/gpu/coll_gpu.cc)
#   abort             ncclCommAbort frees a kernel waiting for a peer that never calls
#   graph             an all-reduce of 2 ranks captured into CUDA graphs and replayed
#   reduce-copy-bw    the kernels' reduce-copy against cudaMemcpy device to device (GB/s)
#   all-reduce-perf   ringcc's all_reduce_perf on device buffers (2 ranks on GPU 0, then one per
#                     GPU), checked; the real NCCL's all_reduce_perf, if installed, for reference
#   processes-ipc     all_reduce_perf in 2 processes (ringcc-run) on device buffers: CUDA ranks
#                     of different processes over shm, slots in the receiver's GPU (CUDA IPC)
#   processes-host    the same with NCCL_P2P_DISABLE=1: slots in host memory mapped for the GPU
#   torch-preload     PyTorch's NCCL process group with ringcc preloaded
#                     (tests/gpu/torch_nccl_preload.py; "not run" without torch+CUDA)
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
failed=0
summary=()
report() {
  printf '%-16s %s\n' "$1" "$2"
  summary+=("$(printf '%-16s %s' "$1" "$2")")
  case "$2" in ok*|"not run"*) ;; *) failed=1 ;; esac
}
finish() {
  echo "---- summary ----"
  printf '%s\n' "${summary[@]}"
  exit $failed
}

# A GPU first: without one nothing below can pass, and nothing may wait on it.
if command -v nvidia-smi >/dev/null 2>&1 && timeout 30 nvidia-smi -L >/dev/null 2>&1; then
  report gpu "ok: $(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
elif ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  report gpu "ok: libcuda.so.1 present (no nvidia-smi)"
else
  report gpu "FAILED: no GPU visible (no nvidia-smi answering, no libcuda.so.1)"
  finish
fi

if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dcuda=enabled -Dpython=disabled >/dev/null ||
    { report build FAILED; finish; }
fi
start=$(date +%s)
ninja -C "$BUILD" >/dev/null || { report build FAILED; finish; }
report build "ok ($(($(date +%s) - start)) s)"

if timeout 300 meson test -C "$BUILD" --num-processes 4 "cuda_lazy [cuda_driver]" \
     "cuda_lazy [mem_kind]" "launch_plan [launch_plan]" header_cuda >/dev/null; then
  report cuda-unit ok
else
  report cuda-unit "FAILED ($BUILD/meson-logs/testlog.txt)"
fi
if timeout 300 meson test -C "$BUILD" "cuda_engine [cuda_engine]" "cuda_engine [cuda_faults]" \
     "cuda_engine [cuda_procs]" >/dev/null; then
  report cuda-engine ok
else
  report cuda-engine "FAILED ($BUILD/meson-logs/testlog.txt)"
fi

if out=$(timeout 60 "$BUILD/tests/gpu/gpu_kernel_launch" 2>&1); then
  report kernel-launch ok
else
  report kernel-launch "FAILED: $out"
fi

for check in collectives abort graph; do
  if out=$(timeout 240 "$BUILD/tests/gpu/gpu_coll" "$check" 2>&1); then
    report "$check" "ok: $(echo "$out" | tail -1)"
  else
    report "$check" "FAILED: $(echo "$out" | tail -3)"
  fi
done

if out=$(timeout 120 "$BUILD/tests/gpu/gpu_reduce_copy_bw" 2>&1); then
  report reduce-copy-bw "ok: ${out#reduce_copy_bw: }"
else
  report reduce-copy-bw "FAILED: $out"
fi

# ringcc's all_reduce_perf on device buffers (bench/perf/perf_cuda.h): 2 ranks on GPU 0 (one
# thread, -g 2: device index mod the GPU count), then every GPU if there are several.
ngpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$ngpus" -ge 1 ] || ngpus=1
perf_ok=1
for g in 2 "$ngpus"; do
  [ "$g" -ge 2 ] || continue
  echo "ringcc all_reduce_perf -g $g (device buffers):"
  if out=$(timeout 150 "$BUILD/bench/all_reduce_perf" -b 1M -e 256M -f 4 -g "$g" -c 1 2>&1); then
    echo "$out" | tail -12
    echo "$out" | grep -q 'CUDA device memory' || perf_ok=0
    echo "$out" | grep -q 'Out of bounds values : 0 OK' || perf_ok=0
  else
    echo "$out" | tail -5
    perf_ok=0
  fi
  [ "$ngpus" -ge 2 ] || break
done
if [ $perf_ok = 1 ]; then
  report all-reduce-perf "ok: $(echo "$out" | grep 'Avg bus bandwidth')"
else
  report all-reduce-perf "FAILED (see above)"
fi
# Two processes, one rank each (GPU (rank) mod the GPU count: both on GPU 0 with one GPU):
# slots in the receiver's GPU through CUDA IPC, then with NCCL_P2P_DISABLE=1 in host memory.
for mode in ipc host; do
  echo "ringcc all_reduce_perf, 2 processes (device buffers, shm slots: $mode):"
  p2p=0
  [ $mode = host ] && p2p=1
  if out=$(NCCL_P2P_DISABLE=$p2p timeout 120 "$BUILD/bench/ringcc-run" -n 2 \
             "$BUILD/bench/all_reduce_perf" -b 8 -e 64M -f 8 -c 1 2>&1) &&
     echo "$out" | grep -q 'CUDA device memory' &&
     echo "$out" | grep -q 'Out of bounds values : 0 OK'; then
    echo "$out" | tail -12
    report "processes-$mode" "ok: $(echo "$out" | grep 'Avg bus bandwidth')"
  else
    echo "$out" | tail -8
    report "processes-$mode" "FAILED (see above)"
  fi
done
for real in /usr/local/bin/all_reduce_perf /opt/nccl-tests/build/all_reduce_perf; do
  if [ -x "$real" ]; then
    echo "real NCCL, for reference ($real):"
    timeout 120 "$real" -b 1M -e 256M -f 4 -g 1 | tail -12
    break
  fi
done

for py in /usr/bin/python3 python3; do
  if "$py" -c 'import torch' 2>/dev/null; then
    LD_PRELOAD="$PWD/$BUILD/libnccl.so.2" timeout 120 "$py" tests/gpu/torch_nccl_preload.py
    case $? in
      0) report torch-preload ok ;;
      2) report torch-preload "not run (torch without CUDA)" ;;
      *) report torch-preload FAILED ;;
    esac
    break
  fi
done
finish
