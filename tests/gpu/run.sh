#!/usr/bin/env bash
# The device check: what runs on a machine with a GPU, as ONE command of at most 8 minutes
# (the lent machine gives 15 minutes of device time in all, 10 a command). Everything it runs
# is built beforehand, here, without a GPU (tests/gpu/bundle.sh DIR), and carried over.
#
# Usage: tests/gpu/run.sh [--bundle DIR] [--out DIR] [--deadline SECONDS]
#   --bundle DIR   the bundle to run (without it: one is built first with bundle.sh into
#                  build-gpu-bundle, which needs nvcc and meson on this machine)
#   --out DIR      where every log and summary.txt go (default: $OUT, else ./gpu-check)
#   --deadline S   the whole run's budget (default 480 s); a check that would start too late to
#                  finish is "not run (deadline)"
#
# Checks, in order of value, each under `timeout -k` (30-90 s) and the global deadline, with
# NCCL_TIMEOUT=5000 (a kernel waiting 5 s for a peer stops, and says so):
#   gpu                 /dev/nvidia0, nvidia-smi, cuInit and a device (none: exit 2 at once)
#   bundle              every bundled ELF's libraries resolve, libnccl.so.2 to the bundle's
#   kernel-launch       the embedded kernels load (cuModuleLoadData) and launch
#   coll-1 .. coll-8    gpu_coll: every collective at 1, 2, 4, 8 ranks on GPU 0, 1,000 and 2^20
#                       floats, exact
#   abort, graph        gpu_coll: ncclCommAbort frees a blocked kernel; a captured all-reduce
#                       replayed from CUDA graphs
#   suspend             gpu_coll: ncclCommSuspend frees the memory ncclCommMemStats counts, and
#                       an all-reduce after the resume is exact
#   adasum              gpu_coll: ringccAllReduceAdasum at 2 and 4 ranks on GPU 0 against its
#                       definition, and its time beside an all-reduce's (64 MiB, 4 ranks)
#   rma                 gpu_coll: one-sided puts and waits at 2 ranks on GPU 0, exact, and a
#                       signal ping-pong's round trip
#   side-stream-capture gpu_coll's mode for it, when gpu_coll lists one (--modes)
#   sanitize-memcheck, sanitize-racecheck, sanitize-synccheck
#                       compute-sanitizer over gpu_coll at 1 rank, 1,000 floats (one rank: the
#                       sanitizer may run kernels one at a time, and ranks' kernels wait for
#                       each other)
#   reduce-copy-bw      the kernels' reduce-copy against cudaMemcpy device to device (GB/s)
#   perf-g2/g4/g8       all_reduce_perf -g N on one GPU (N ranks in one thread), data checked
#   procs-ipc           all_reduce_perf in 2 processes (ringcc-run): shm, slots in the
#                       receiver's GPU through CUDA IPC
#   procs-host          the same with NCCL_P2P_DISABLE=1: slots in pinned host memory
#   torch-ringcc        PyTorch's ProcessGroupNCCL with the bundle's libnccl.so.2 under
#                       LD_PRELOAD: all-reduce exact, a DDP step exact, timings (1 process)
#   torch-ringcc-2      the same in 2 processes on GPU 0 (NVIDIA's NCCL refuses that)
#   torch-nvidia        the same with NVIDIA's NCCL from the image, 1 process: side by side
# Every check's log is DIR/NN-name.log; summary.txt is rewritten after each, so it is there
# even if the run is killed. Exit 0: every check ok or not run; 1: one failed or timed out;
# 2: no GPU (or no usable bundle).
set -uo pipefail
SELF_DIR=$(cd "$(dirname "$0")" && pwd)
BUNDLE=""
OUTDIR=${OUT:+$OUT}
OUTDIR=${OUTDIR:-$PWD/gpu-check}
BUDGET=480
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) BUNDLE=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --deadline) BUDGET=$2; shift 2 ;;
    *) echo "usage: tests/gpu/run.sh [--bundle DIR] [--out DIR] [--deadline SECONDS]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
DEADLINE=$((SECONDS + BUDGET))
RESERVE=10  # seconds kept for the summary

CHECKS=(gpu bundle kernel-launch coll-1 coll-2 coll-4 coll-8 abort graph suspend adasum rma side-stream-capture
        sanitize-memcheck sanitize-racecheck sanitize-synccheck reduce-copy-bw perf-g2 perf-g4
        perf-g8 procs-ipc procs-host torch-ringcc torch-ringcc-2 torch-nvidia)
declare -A RESULT
HEADER=()
failed=0
CURRENT=""
CHILD=""
n=0

write_summary() {
  {
    echo "ringcc device check (tests/gpu/run.sh), $(date -u +%FT%TZ), $((SECONDS)) s elapsed"
    [ ${#HEADER[@]} -eq 0 ] || printf '%s\n' "${HEADER[@]}"
    for c in "${CHECKS[@]}"; do printf '%-20s %s\n' "$c" "${RESULT[$c]:-not run}"; done
  } >"$OUTDIR/summary.txt.new" && mv -f "$OUTDIR/summary.txt.new" "$OUTDIR/summary.txt"
}
record() {  # record CHECK TEXT
  RESULT[$1]=$2
  case $2 in ok* | "not run"*) ;; *) failed=1 ;; esac
  printf '%-20s %s\n' "$1" "$2"
  write_summary
}
finish() {  # finish STATUS: every check not reached says why, then the summary
  local why=$2
  for c in "${CHECKS[@]}"; do [ -n "${RESULT[$c]:-}" ] || RESULT[$c]="not run ($why)"; done
  write_summary
  echo "---- $OUTDIR/summary.txt ----"
  cat "$OUTDIR/summary.txt"
  exit "$1"
}
on_signal() {
  trap - TERM INT
  # timeout passes the TERM on to the check and kills it 5 s later if it is still there.
  [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
  [ -n "$CURRENT" ] && RESULT[$CURRENT]="INTERRUPTED (run.sh was signalled)" && failed=1
  finish 1 "run.sh was signalled"
}
trap on_signal TERM INT
trap write_summary EXIT

# run_check NAME LIMIT CMD...: runs CMD under `timeout -k 5` within the deadline, output in its
# log; sets RC, TOOK and LOG. Returns 1 without running when the deadline is too close.
run_check() {
  local name=$1 limit=$2
  shift 2
  n=$((n + 1))
  LOG="$OUTDIR/$(printf %02d $n)-$name.log"
  local left=$((DEADLINE - SECONDS - RESERVE))
  if [ $left -lt 15 ]; then
    record "$name" "not run (deadline: ${BUDGET} s)"
    return 1
  fi
  [ "$limit" -le $left ] || limit=$left
  echo "== $name, limit $limit s: $*" >"$LOG"
  CURRENT=$name
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1 &
  CHILD=$!
  wait "$CHILD"
  RC=$?
  CHILD=""
  CURRENT=""
  TOOK=$((SECONDS - t0))
  echo "== exit $RC after $TOOK s" >>"$LOG"
  return 0
}
# conclude NAME [TEXT]: the verdict from RC (0: ok, with TEXT).
conclude() {
  local log=${LOG##*/}
  case $RC in
    0) record "$1" "ok ($TOOK s)${2:+: $2}" ;;
    124 | 137) record "$1" "TIMEOUT after $TOOK s ($log)" ;;
    *) record "$1" "FAILED (exit $RC, $TOOK s, $log): $(grep -v '^== ' "$LOG" | tail -1 | cut -c1-160)" ;;
  esac
}

# ---- gpu: a GPU and a working driver, else stop at once (nothing may wait on a device that
# is not there).
no_gpu() {
  record gpu "FAILED: no GPU: $1"
  echo "run.sh: no GPU: $1; nothing else can run" >&2
  finish 2 "no GPU"
}
compgen -G '/dev/nvidia[0-9]*' >/dev/null || no_gpu "no /dev/nvidia0 device node"
smi=""
if command -v nvidia-smi >/dev/null; then
  smi=$(timeout -k 2 20 nvidia-smi --query-gpu=name,driver_version,memory.total \
          --format=csv,noheader 2>&1) || no_gpu "nvidia-smi fails: $(echo "$smi" | tail -1)"
  HEADER+=("nvidia-smi: $(echo "$smi" | head -1)")
fi
# cuInit and a device, through the driver itself (CUDA_VISIBLE_DEVICES applies); without
# python3 the kernel-launch check is the first to ask.
cuinit="cuInit not asked (no python3)"
no_python=false
command -v python3 >/dev/null || no_python=true
$no_python || cuinit=$(timeout -k 2 30 python3 - <<'EOF' 2>&1
import ctypes, sys
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    sys.exit(f"libcuda.so.1 cannot be loaded: {e}")
r = cu.cuInit(0)
if r != 0:
    sys.exit(f"cuInit failed with CUresult {r}")
n, v = ctypes.c_int(0), ctypes.c_int(0)
cu.cuDeviceGetCount(ctypes.byref(n))
cu.cuDriverGetVersion(ctypes.byref(v))
if n.value < 1:
    sys.exit("cuInit succeeded but no device is visible")
print(f"{n.value} device(s), driver API {v.value // 1000}.{v.value % 1000 // 10}")
EOF
) || no_gpu "$(echo "$cuinit" | tail -1)"
record gpu "ok: $cuinit${smi:+; $(echo "$smi" | head -1)}"

# ---- bundle
if [ -z "$BUNDLE" ]; then
  BUNDLE=$PWD/build-gpu-bundle
  CHECKS=(gpu build-bundle "${CHECKS[@]:1}")
  if run_check build-bundle 300 "$SELF_DIR/bundle.sh" "$BUNDLE"; then :; fi
  [ "${RC:-1}" = 0 ] || { record bundle "FAILED: bundle.sh (${LOG##*/})"; finish 2 "no bundle"; }
fi
BUNDLE=$(cd "$BUNDLE" 2>/dev/null && pwd) || { record bundle "FAILED: no such directory"; finish 2 "no bundle"; }
B=$BUNDLE
# The bundle's library first, for every check (and its libhwloc); the torch-nvidia check
# removes it again.
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_TIMEOUT=${NCCL_TIMEOUT:-5000} NCCL_DEBUG=${NCCL_DEBUG:-WARN}
HEADER+=("bundle: $B, $(grep -m1 '^commit:' "$B/MANIFEST" 2>/dev/null || echo 'no MANIFEST')")
HEADER+=("NCCL_TIMEOUT=$NCCL_TIMEOUT ms, deadline $BUDGET s")
bundle_check() {
  local bad=0 f
  [ -f "$B/MANIFEST" ] || { echo "no MANIFEST: not made by tests/gpu/bundle.sh"; bad=1; }
  for f in libnccl.so.2 tests/gpu/gpu_coll tests/gpu/gpu_kernel_launch \
           tests/gpu/gpu_reduce_copy_bw bench/all_reduce_perf bench/ringcc-run; do
    [ -e "$B/$f" ] || { echo "missing: $f"; bad=1; }
  done
  for f in "$B"/libnccl.so.2 "$B"/tests/gpu/gpu_* "$B"/bench/*; do
    [ -f "$f" ] || continue
    local deps
    deps=$(ldd "$f" 2>&1)
    echo "$f:"
    echo "$deps"
    if echo "$deps" | grep -q 'not found'; then echo "UNRESOLVED in $f"; bad=1; fi
    local nccl
    nccl=$(echo "$deps" | awk '$1 == "libnccl.so.2" { print $3 }')
    if [ -n "$nccl" ] && [ "$(readlink -f "$nccl")" != "$(readlink -f "$B/libnccl.so.2")" ]; then
      echo "WRONG libnccl.so.2 for $f: $nccl"
      bad=1
    fi
  done
  return $bad
}
run_check bundle 30 bash -c "$(declare -f bundle_check); B='$B'; bundle_check"
if [ "$RC" != 0 ]; then
  record bundle "FAILED (${LOG##*/}): $(grep -E 'missing|UNRESOLVED|WRONG|MANIFEST' "$LOG" | head -2 | tr '\n' ' ')"
  finish 2 "no usable bundle"
fi
conclude bundle "libnccl.so.2 from the bundle; $(grep -m1 '^needs:' "$B/MANIFEST")"

# ---- the kernels and the collectives on one GPU
run_check kernel-launch 30 "$B/tests/gpu/gpu_kernel_launch" && conclude kernel-launch
COLL=$B/tests/gpu/gpu_coll
for r in 1 2 4 8; do
  run_check "coll-$r" 60 "$COLL" collectives "$r" &&
    conclude "coll-$r" "$(grep -c 'every collective exact' "$LOG") sizes exact"
done
modes=$("$COLL" --modes 2>/dev/null)
for m in abort graph suspend adasum rma; do
  if ! echo "$modes" | grep -qx "$m"; then
    record "$m" "not run (gpu_coll has no $m mode)"
    continue
  fi
  run_check "$m" 30 "$COLL" "$m" && conclude "$m" "$(grep 'gpu_coll:' "$LOG" | tail -1)"
done
if echo "$modes" | grep -qx sidestream; then
  run_check side-stream-capture 30 "$COLL" sidestream && conclude side-stream-capture
else
  record side-stream-capture "not run (gpu_coll has no side-stream capture mode yet)"
fi

# ---- compute-sanitizer
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  if [ -z "$sanitizer" ]; then
    record "sanitize-$tool" "not run (no compute-sanitizer on this machine)"
    continue
  fi
  run_check "sanitize-$tool" 90 env NCCL_TIMEOUT=30000 "$sanitizer" --tool "$tool" \
    --error-exitcode 9 --print-limit 20 "$COLL" collectives 1 1000 || continue
  errors=$(grep -m1 'ERROR SUMMARY' "$LOG")
  conclude "sanitize-$tool" "${errors:-no summary line}"
done

# ---- bandwidth
run_check reduce-copy-bw 60 "$B/tests/gpu/gpu_reduce_copy_bw" &&
  conclude reduce-copy-bw "$(grep -v '^== ' "$LOG" | tail -1 | sed 's/^reduce_copy_bw: //')"
perf_verdict() {  # perf_verdict NAME: ok only with the tool's data check passed on device memory
  if [ "$RC" = 0 ] && ! grep -q 'CUDA device memory' "$LOG"; then
    record "$1" "FAILED (${LOG##*/}): the buffers were not CUDA device memory"
  elif [ "$RC" = 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$LOG"; then
    record "$1" "FAILED (${LOG##*/}): the data check failed"
  else
    conclude "$1" "$(grep 'Avg bus bandwidth' "$LOG" | tr -s ' ')"
  fi
}
for g in 2 4 8; do
  run_check "perf-g$g" 60 "$B/bench/all_reduce_perf" -b 8 -e 256M -f 8 -g "$g" -c 1 -w 2 -n 10 &&
    perf_verdict "perf-g$g"
done
for mode in ipc host; do
  p2p=0
  [ $mode = host ] && p2p=1
  run_check "procs-$mode" 60 env NCCL_P2P_DISABLE=$p2p "$B/bench/ringcc-run" -n 2 \
    "$B/bench/all_reduce_perf" -b 8 -e 64M -f 8 -c 1 -w 2 -n 10 && perf_verdict "procs-$mode"
done

# ---- PyTorch's ProcessGroupNCCL: ringcc preloaded, then NVIDIA's NCCL from the image.
PRELOAD_PY=$B/tests/gpu/torch_nccl_preload.py
[ -f "$PRELOAD_PY" ] || PRELOAD_PY=$SELF_DIR/torch_nccl_preload.py
torch_python=""
for py in python3 /usr/bin/python3; do
  if timeout 30 "$py" -c 'import torch' 2>/dev/null; then torch_python=$py; break; fi
done
torch_verdict() {
  case $RC in
    2) record "$1" "not run (torch has no CUDA here)" ;;
    *) conclude "$1" "$(grep '^torch_nccl_preload: result' "$LOG" | tail -1 | cut -d' ' -f3-)" ;;
  esac
}
if [ -z "$torch_python" ]; then
  for c in torch-ringcc torch-ringcc-2 torch-nvidia; do record $c "not run (no python with torch)"; done
else
  run_check torch-ringcc 90 env LD_PRELOAD="$B/libnccl.so.2" "$torch_python" "$PRELOAD_PY" \
    --expect ringcc --bundle "$B" --world 1 --port 29533 && torch_verdict torch-ringcc
  run_check torch-ringcc-2 90 env LD_PRELOAD="$B/libnccl.so.2" "$torch_python" "$PRELOAD_PY" \
    --expect ringcc --bundle "$B" --world 2 --port 29534 && torch_verdict torch-ringcc-2
  plain_path=$(echo "$LD_LIBRARY_PATH" | tr ':' '\n' | grep -vx "$B" | paste -sd: -)
  run_check torch-nvidia 90 env LD_LIBRARY_PATH="$plain_path" "$torch_python" "$PRELOAD_PY" \
    --expect nvidia --bundle "$B" --world 1 --port 29535 && torch_verdict torch-nvidia
fi

trap - TERM INT
finish $failed "not reached"
