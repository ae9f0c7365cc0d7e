#include "src/cuda/kernel_module.h"

#include <map>
#include <mutex>

#include "ringcc_config.h"
#include "src/base/error.h"

namespace ringcc {

#if RINGCC_HAVE_CUDA
extern const unsigned char kBatchKernelFatbin[];  // generated: scripts/embed_binary.py
extern const unsigned long kBatchKernelFatbin_size;
#endif

const unsigned char* batchKernelImage(size_t* size) {
#if RINGCC_HAVE_CUDA
  *size = kBatchKernelFatbin_size;
  return kBatchKernelFatbin;
#else
  *size = 0;
  return nullptr;
#endif
}

ncclResult_t batchKernelFunction(const CudaDriver& cu, CuFunction* out) {
  size_t size = 0;
  const unsigned char* image = batchKernelImage(&size);
  if (!image || size == 0)
    return fail(ncclInvalidUsage, "cuda",
                "this libnccl.so.2 was built without CUDA kernels (meson -Dcuda=disabled, or no "
                "nvcc at build time): CUDA communicators need them");
  CuContext ctx = nullptr;
  char name[96];
  CuResult r = cu.cuCtxGetCurrent(&ctx);
  if (r != kCuSuccess || !ctx)
    return fail(ncclInvalidUsage, "cuda", "no current CUDA context to load the kernels into");
  // One module per context (a module belongs to the context it was loaded in).
  static std::mutex mu;
  static std::map<CuContext, CuFunction> functions;
  std::lock_guard<std::mutex> lock(mu);
  auto it = functions.find(ctx);
  if (it != functions.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  CuModule module = nullptr;
  r = cu.cuModuleLoadData(&module, image);
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "cuda",
                "loading the embedded kernels failed with %s (they are built for sm_80, sm_90 "
                "and compute_90 PTX)",
                cuErrorName(cu, r, name, sizeof name));
  CuFunction fn = nullptr;
  r = cu.cuModuleGetFunction(&fn, module, "ringccBatchKernel");
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "cuda", "ringccBatchKernel not found in the module: %s",
                cuErrorName(cu, r, name, sizeof name));
  functions[ctx] = fn;
  *out = fn;
  return ncclSuccess;
}

}  // namespace ringcc
