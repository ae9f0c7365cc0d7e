#include "src/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>

#include "src/core/error.h"
#include "src/core/log.h"

namespace ringcc {
namespace {

constexpr const char* kLibCuda = "libcuda.so.1";

std::atomic<const CudaDriver*> gFake{nullptr};

// Loaded at most once per process; the result (table or error) is kept.
struct Loaded {
  std::once_flag once;
  CudaDriver table;
  bool ok = false;
  ncclResult_t code = ncclSuccess;
  std::string error;
};
Loaded& loaded() {
  static Loaded l;
  return l;
}

// Resolves every entry point by name; the versioned names are the ones cuda.h maps to.
bool resolve(void* lib, CudaDriver* t, std::string* missing) {
  bool ok = true;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) {
      ok = false;
      *missing += std::string(missing->empty() ? "" : ", ") + name;
    }
  };
  get(t->cuInit, "cuInit");
  get(t->cuGetErrorName, "cuGetErrorName");
  get(t->cuDeviceGetCount, "cuDeviceGetCount");
  get(t->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(t->cuCtxGetCurrent, "cuCtxGetCurrent");
  get(t->cuCtxSetCurrent, "cuCtxSetCurrent");
  get(t->cuCtxGetDevice, "cuCtxGetDevice");
  get(t->cuPointerGetAttribute, "cuPointerGetAttribute");
  get(t->cuModuleLoadData, "cuModuleLoadData");
  get(t->cuModuleGetFunction, "cuModuleGetFunction");
  get(t->cuLaunchKernel, "cuLaunchKernel");
  get(t->cuMemAlloc, "cuMemAlloc_v2");
  get(t->cuMemFree, "cuMemFree_v2");
  get(t->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  get(t->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  get(t->cuMemsetD8, "cuMemsetD8_v2");
  get(t->cuMemHostAlloc, "cuMemHostAlloc");
  get(t->cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
  get(t->cuMemFreeHost, "cuMemFreeHost");
  get(t->cuStreamQuery, "cuStreamQuery");
  get(t->cuStreamSynchronize, "cuStreamSynchronize");
  get(t->cuStreamIsCapturing, "cuStreamIsCapturing");
  return ok;
}

void load(Loaded& l, int dlflags) {
  void* lib = dlopen(kLibCuda, dlflags);
  if (!lib) {
    const char* err = dlerror();
    l.code = ncclSystemError;
    l.error = std::string("the CUDA driver (") + kLibCuda +
              ") cannot be loaded: " + (err ? err : "not found");
    return;
  }
  std::string missing;
  if (!resolve(lib, &l.table, &missing)) {
    l.code = ncclSystemError;
    l.error = std::string("the CUDA driver (") + kLibCuda + ") lacks " + missing +
              " (a driver older than CUDA 11?)";
    return;
  }
  CuResult r = l.table.cuInit(0);
  if (r != kCuSuccess) {
    char name[96];
    l.code = ncclUnhandledCudaError;
    l.error = std::string("cuInit failed with ") + cuErrorName(l.table, r, name, sizeof name) +
              " (no GPU visible to this process, or the driver is not usable)";
    return;
  }
  l.ok = true;
  // The library stays loaded for the life of the process: unloading the driver under live
  // contexts is not safe.
}

}  // namespace

const char* cuErrorName(const CudaDriver& cu, CuResult r, char* buf, size_t size) {
  const char* name = nullptr;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(r, &name) != kCuSuccess || !name) name = "CUresult";
  snprintf(buf, size, "%s (%d)", name, r);
  return buf;
}

ncclResult_t cudaDriver(const CudaDriver** out, const char* why) {
  *out = nullptr;
  if (const CudaDriver* fake = gFake.load()) {
    *out = fake;
    return ncclSuccess;
  }
  Loaded& l = loaded();
  std::call_once(l.once, [&] { load(l, RTLD_NOW | RTLD_LOCAL); });
  if (!l.ok) return fail(l.code, "cuda", "%s: %s", why, l.error.c_str());
  *out = &l.table;
  return ncclSuccess;
}

const CudaDriver* cudaDriverIfLoaded() {
  if (const CudaDriver* fake = gFake.load()) return fake;
  // Once loaded it stays loaded; until then each call asks the loader (RTLD_NOLOAD neither
  // loads nor initializes anything).
  static std::atomic<bool> seen{false};
  if (!seen.load(std::memory_order_acquire)) {
    void* lib = dlopen(kLibCuda, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib) return nullptr;
    dlclose(lib);  // drops only the reference RTLD_NOLOAD took
    seen.store(true, std::memory_order_release);
  }
  Loaded& l = loaded();
  std::call_once(l.once, [&] { load(l, RTLD_NOW | RTLD_LOCAL); });
  return l.ok ? &l.table : nullptr;
}

void setCudaDriverForTesting(const CudaDriver* fake) { gFake.store(fake); }

}  // namespace ringcc
