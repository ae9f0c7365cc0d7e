// The module's second kernel: Adasum's local steps (kernels/adasum_tasks.h) on the GPU, one
// launch per step of the schedule (src/adasum), kLaunchThreads threads a block. Included by
// batch_kernel.cu, so that both kernels are one fatbin and one module.
#pragma once

#include "kernels/adasum_tasks.h"
#include "kernels/cuda/batch_args.h"

namespace ringcc {
namespace {

// A CUDA block as adasumRunBlock sees it.
struct AdasumDeviceBlock {
  __device__ uint32_t index() const { return blockIdx.x; }
  __device__ uint32_t blocks() const { return gridDim.x; }
  __device__ uint32_t thread() const { return threadIdx.x; }
  __device__ uint32_t threads() const { return blockDim.x; }
  // Every thread of the block calls it with its share (the loop bounds are the block's, so no
  // thread skips a call): the warp sums its shares, its first lane adds them once.
  __device__ void addDots(AdasumDots* to, const AdasumDots& mine) const {
    double ab = mine.ab, aa = mine.aa, bb = mine.bb;
    for (int offset = 16; offset > 0; offset >>= 1) {
      ab += __shfl_down_sync(0xffffffffu, ab, offset);
      aa += __shfl_down_sync(0xffffffffu, aa, offset);
      bb += __shfl_down_sync(0xffffffffu, bb, offset);
    }
    if ((threadIdx.x & 31) == 0) {
      atomicAddF64(&to->ab, ab);
      atomicAddF64(&to->aa, aa);
      atomicAddF64(&to->bb, bb);
    }
  }
};

}  // namespace

extern "C" __global__ void __launch_bounds__(kLaunchThreads)
    ringccAdasumKernel(const AdasumArgs args) {
  AdasumDeviceBlock block;
  adasumRunBlock(args, block);
}

}  // namespace ringcc
