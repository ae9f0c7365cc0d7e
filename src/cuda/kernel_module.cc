#include "src/cuda/kernel_module.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cuda/batch_args.h"
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

namespace {

constexpr const char* kKernelNames[kKernels] = {"ringccBatchKernel", "ringccAdasumKernel",
                                                 "ringccRmaKernel"};

// Which context a module belongs to. With cuCtxGetId the id never repeats in a process; without
// it (drivers before CUDA 12.0) it is the context's address, which a re-created context may
// reuse, so such an entry is re-validated before use.
struct ModuleKey {
  int device = -1;
  unsigned long long context = 0;
  bool byAddress = false;
  bool operator<(const ModuleKey& o) const {
    return std::tie(device, context, byAddress) < std::tie(o.device, o.context, o.byAddress);
  }
};
struct LoadedModule {
  CuModule module = nullptr;
  CuFunction functions[kKernels] = {};
};

// "driver 12.4, kernels built with CUDA 13.0 for sm_80, sm_90 and compute_90 PTX", and why
// that cannot work when the driver is older than the toolkit.
std::string versions(const CudaDriver& cu) {
  int driver = 0;
  std::string text = "driver ";
  if (cu.cuDriverGetVersion(&driver) == kCuSuccess && driver > 0)
    text += std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  else
    text += "version unknown";
  text += std::string(", kernels built with CUDA ") + RINGCC_CUDA_TOOLKIT_VERSION +
          " for sm_80, sm_90 and compute_90 PTX";
  const char* toolkit = RINGCC_CUDA_TOOLKIT_VERSION;
  char* dot = nullptr;
  const long major = std::strtol(toolkit, &dot, 10);
  const long minor = dot && *dot == '.' ? std::strtol(dot + 1, nullptr, 10) : 0;
  if (driver > 0 && major > 0 && driver < major * 1000 + minor * 10)
    text += ": this driver is older than that toolkit and cannot load its kernels";
  return text;
}

ncclResult_t loadFailed(const CudaDriver& cu, const char* step, CuResult r) {
  char name[96];
  return fail(ncclUnhandledCudaError, "cuda", "loading the embedded kernels failed: %s: %s (%s)",
              step, cuErrorName(cu, r, name, sizeof name), versions(cu).c_str());
}

// Loads one function of the module, eagerly, and checks that a block of kLaunchThreads fits.
ncclResult_t loadFunction(const CudaDriver& cu, CuModule module, const char* name,
                          CuFunction* out) {
  CuResult r = cu.cuModuleGetFunction(out, module, name);
  if (r != kCuSuccess)
    return loadFailed(cu, (std::string("cuModuleGetFunction(") + name + ")").c_str(), r);
  if (cu.cuFuncLoad) {
    r = cu.cuFuncLoad(*out);
    if (r != kCuSuccess) return loadFailed(cu, "cuFuncLoad", r);
  }
  // Also loads the function where cuFuncLoad is missing, and says whether a block of
  // kLaunchThreads fits (registers, the GPU's limit).
  int maxThreads = 0;
  r = cu.cuFuncGetAttribute(&maxThreads, kCuFuncAttributeMaxThreadsPerBlock, *out);
  if (r != kCuSuccess) return loadFailed(cu, "cuFuncGetAttribute", r);
  if (maxThreads < kLaunchThreads)
    return fail(ncclUnhandledCudaError, "cuda",
                "%s runs at most %d threads a block on this GPU and is launched with %d (%s)",
                name, maxThreads, kLaunchThreads, versions(cu).c_str());
  return ncclSuccess;
}

// Loads the module and its functions into the current context.
ncclResult_t load(const CudaDriver& cu, const unsigned char* image, LoadedModule* out) {
  CuResult r = cu.cuModuleLoadData(&out->module, image);
  if (r != kCuSuccess) return loadFailed(cu, "cuModuleLoadData", r);
  for (int k = 0; k < kKernels; ++k)
    RINGCC_CHECK(loadFunction(cu, out->module, kKernelNames[k], &out->functions[k]));
  return ncclSuccess;
}

}  // namespace

ncclResult_t kernelFunction(const CudaDriver& cu, Kernel which, CuFunction* out) {
  const int k = static_cast<int>(which);
  size_t size = 0;
  const unsigned char* image = batchKernelImage(&size);
  if (!image || size == 0)
    return fail(ncclInvalidUsage, "cuda",
                "this libnccl.so.2 was built without CUDA kernels (meson -Dcuda=disabled, or no "
                "nvcc at build time): CUDA communicators need them");
  CuContext ctx = nullptr;
  CuResult r = cu.cuCtxGetCurrent(&ctx);
  if (r != kCuSuccess || !ctx)
    return fail(ncclInvalidUsage, "cuda", "no current CUDA context to load the kernels into");
  ModuleKey key;
  if (cu.cuCtxGetDevice(&key.device) != kCuSuccess) key.device = -1;
  if (!cu.cuCtxGetId || cu.cuCtxGetId(ctx, &key.context) != kCuSuccess) {
    key.context = reinterpret_cast<uintptr_t>(ctx);
    key.byAddress = true;
  }
  // One module per context (a module belongs to the context it was loaded in).
  static std::mutex mu;
  static std::map<ModuleKey, LoadedModule> modules;
  std::lock_guard<std::mutex> lock(mu);
  auto it = modules.find(key);
  if (it != modules.end()) {
    CuFunction again = nullptr;
    if (!key.byAddress || (cu.cuModuleGetFunction(&again, it->second.module, kKernelNames[0]) ==
                               kCuSuccess &&
                           again == it->second.functions[0])) {
      *out = it->second.functions[k];
      return ncclSuccess;
    }
    modules.erase(it);  // the context at this address is not the one the module was loaded in
  }
  LoadedModule loaded;
  RINGCC_CHECK(load(cu, image, &loaded));
  modules[key] = loaded;
  *out = loaded.functions[k];
  return ncclSuccess;
}

}  // namespace ringcc
