// A CUDA block as the block bodies see it: the batch kernel's runBatchBlock
// (kernels/cuda/batch_block.h) and the one-sided kernel's rmaRunBlock (kernels/rma_tasks.h):
// its thread, barriers and votes, the nap after a fruitless poll and the GPU's clock.
#pragma once

#include <stdint.h>

#include "kernels/cuda/device_sync.h"
#include "kernels/prims.h"

namespace ringcc {

struct DeviceBlock {
  using Sync = DeviceSync;
  Slice* slice_;
  int* word_;
  __device__ uint32_t index() const { return blockIdx.x; }
  __device__ uint32_t thread() const { return threadIdx.x; }
  __device__ uint32_t threads() const { return blockDim.x; }
  __device__ void barrier() const { __syncthreads(); }
  __device__ bool barrierAnd(bool p) const { return __syncthreads_and(p) != 0; }
  __device__ bool barrierOr(bool p) const { return __syncthreads_or(p) != 0; }
  __device__ void nap(unsigned polls) const {
    if (polls > 64) __nanosleep(polls > 4096 ? 1000 : 100);
  }
  __device__ uint64_t nanos() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ Slice* slice() const { return slice_; }
  __device__ int* word() const { return word_; }
};

}  // namespace ringcc
