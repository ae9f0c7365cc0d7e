// The batch kernel (kernels/cuda/batch_kernel.cu) as the driver sees it: the fatbin embedded in
// libnccl.so.2 at build time, loaded with cuModuleLoadData into the calling thread's current
// context at the first CUDA communicator on that context, and kept for the process's life.
#pragma once

#include <cstddef>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

// The embedded fatbin, or null (size 0) in a build without CUDA (-Dcuda=disabled, no nvcc).
const unsigned char* batchKernelImage(size_t* size);

// "ringccBatchKernel" in the current context, loading the module on first use there. Fails
// with an error naming the cause (a build without CUDA kernels, a GPU none of sm_80, sm_90 or
// the compute_90 PTX can run, the driver's answer).
ncclResult_t batchKernelFunction(const CudaDriver& cu, CuFunction* out);

}  // namespace ringcc
