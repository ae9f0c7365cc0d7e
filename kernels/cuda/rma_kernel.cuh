// The module's third kernel: a CUDA communicator's one-sided signals and waits
// (kernels/rma_tasks.h) on the user's stream, one block of 32 threads, thread 0 working.
// Included by batch_kernel.cu, so that every kernel is in one fatbin and one module.
#pragma once

#include "kernels/cuda/device_block.h"
#include "kernels/rma_tasks.h"

namespace ringcc {

// No launch bounds: the module's load checks that each kernel takes kLaunchThreads a block.
extern "C" __global__ void ringccRmaKernel(const RmaArgs args) {
  DeviceBlock block{nullptr, nullptr};  // (no slice or word: the body uses neither)
  rmaRunBlock(args, block);
}

}  // namespace ringcc
