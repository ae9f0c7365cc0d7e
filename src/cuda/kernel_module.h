// The kernel module as the driver sees it: the fatbin of kernels/cuda/batch_kernel.cu (the batch
// kernel and Adasum's, kernels/cuda/adasum_kernel.cuh) embedded in libnccl.so.2 at build time,
// loaded with cuModuleLoadData into the calling thread's current context when the first CUDA
// communicator on that context is made (CudaEngine::create), and kept for the process's life.
#pragma once

#include <cstddef>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

// The embedded fatbin, or null (size 0) in a build without CUDA (-Dcuda=disabled, no nvcc).
const unsigned char* batchKernelImage(size_t* size);

// The module's kernels.
enum class Kernel : int { Batch = 0, Adasum = 1, Rma = 2 };
constexpr int kKernels = 3;

// A kernel of the module in the current context, loading the module on first use there and
// its functions too (cuFuncLoad, else an attribute query), so no launch pays for lazy
// loading (CUDA_MODULE_LOADING=LAZY) while a peer's kernel spins. Modules are cached by the
// device and the context's process-unique id (cuCtxGetId), never by the context's address: a
// context destroyed and made again (cudaDeviceReset) at the same address gets a module of its
// own. Fails with an error naming the cause (a build without CUDA kernels, the driver's answer
// with the driver's version and the toolkit the kernels were built with, a GPU that cannot run
// kLaunchThreads threads a block of it).
ncclResult_t kernelFunction(const CudaDriver& cu, Kernel which, CuFunction* out);

}  // namespace ringcc
