// The module's third kernel: a CUDA communicator's one-sided signals and waits
// (kernels/rma_tasks.h) on the user's stream, one block of 32 threads, thread 0 working.
// Included by batch_kernel.cu, so that every kernel is in one fatbin and one module.
#pragma once

#include "kernels/rma_tasks.h"

namespace ringcc {
namespace {

struct RmaDeviceBlock {
  __device__ uint32_t thread() const { return threadIdx.x; }
  __device__ void nap(unsigned polls) const {
    if (polls > 64) __nanosleep(polls > 4096 ? 1000 : 100);
  }
  __device__ uint64_t nanos() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
};

}  // namespace

// No launch bounds: the module's load checks that each kernel takes kLaunchThreads a block.
extern "C" __global__ void ringccRmaKernel(const RmaArgs args) {
  RmaDeviceBlock block;
  rmaRunBlock(args, block);
}

}  // namespace ringcc
