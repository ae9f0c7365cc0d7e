// The CUDA executor's one kernel: runs a batch's planner jobs (kernels/cuda/batch_args.h), one
// block per channel, each block's threads driving ProgramRunner<DeviceSync> through its three
// phases: thread 0 acquires a slice, every thread takes its share (warps side by side:
// ProgramRunner::reduceCopyBlock, Simple in 16-byte packs, several in flight per thread, LL
// by lines each thread polls with one 16-byte load), thread 0 publishes it. The block's loop
// is kernels/cuda/batch_block.h, shared with the host tests' emulated driver and the SIMT test.
//
// Waiting: when no lane can move, thread 0 polls the connection counters again, napping with
// __nanosleep after a short spin, and every 64 polls reads the communicator's abort flag
// (host-mapped), so ncclCommAbort frees a blocked kernel; a wait longer than NCCL_TIMEOUT (the
// GPU's global timer) stops the block too. A block that stops early (abort, a runner
// error) writes why to status[block] (host-mapped) and returns; the engine reads it.
//
// Built into a fatbin (sm_80, sm_90, compute_90 PTX) that libnccl.so.2 embeds and loads with
// cuModuleLoadData: the kernel's name is unmangled so that cuModuleGetFunction finds it.
#include "kernels/cuda/batch_args.h"
#include "kernels/cuda/batch_block.h"
#include "kernels/cuda/device_block.h"
#include "kernels/cuda/device_sync.h"

namespace ringcc {

extern "C" __global__ void __launch_bounds__(kLaunchThreads)
    ringccBatchKernel(const BatchArgs args) {
  __shared__ Slice slice;
  __shared__ int word;
  DeviceBlock block{&slice, &word};
  runBatchBlock(args, block);
}

}  // namespace ringcc

// The module's other kernels (Adasum's local steps, one-sided signals and waits).
#include "kernels/cuda/adasum_kernel.cuh"
#include "kernels/cuda/rma_kernel.cuh"
