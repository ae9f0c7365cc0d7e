#include "src/base/cuda_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include "src/base/error.h"
#include "src/base/log.h"

namespace ringcc {
namespace {

constexpr const char* kLibCuda = "libcuda.so.1";

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
  get(t->cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v2");
  get(t->cuStreamCreate, "cuStreamCreate");
  get(t->cuStreamDestroy, "cuStreamDestroy_v2");
  get(t->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  get(t->cuMemsetD8Async, "cuMemsetD8Async");
  get(t->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  get(t->cuLaunchHostFunc, "cuLaunchHostFunc");
  get(t->cuMemAllocAsync, "cuMemAllocAsync");
  get(t->cuMemFreeAsync, "cuMemFreeAsync");
  get(t->cuEventCreate, "cuEventCreate");
  get(t->cuEventRecord, "cuEventRecord");
  get(t->cuEventSynchronize, "cuEventSynchronize");
  get(t->cuEventQuery, "cuEventQuery");
  get(t->cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
  get(t->cuEventDestroy, "cuEventDestroy_v2");
  get(t->cuStreamWaitEvent, "cuStreamWaitEvent");
  get(t->cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess");
  get(t->cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer");
  get(t->cuMemHostRegister, "cuMemHostRegister_v2");
  get(t->cuMemHostUnregister, "cuMemHostUnregister");
  get(t->cuIpcGetMemHandle, "cuIpcGetMemHandle");
  get(t->cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
  get(t->cuIpcCloseMemHandle, "cuIpcCloseMemHandle");
  get(t->cuMemGetAddressRange, "cuMemGetAddressRange_v2");
  get(t->cuDeviceGetAttribute, "cuDeviceGetAttribute");
  get(t->cuDriverGetVersion, "cuDriverGetVersion");
  get(t->cuFuncGetAttribute, "cuFuncGetAttribute");
  // Optional: newer than the oldest driver ringcc runs on; callers check for null.
  t->cuCtxGetId = reinterpret_cast<decltype(t->cuCtxGetId)>(dlsym(lib, "cuCtxGetId"));
  t->cuFuncLoad = reinterpret_cast<decltype(t->cuFuncLoad)>(dlsym(lib, "cuFuncLoad"));
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
  Loaded& l = loaded();
  std::call_once(l.once, [&] { load(l, RTLD_NOW | RTLD_LOCAL); });
  if (!l.ok) return fail(l.code, "cuda", "%s: %s", why, l.error.c_str());
  *out = &l.table;
  return ncclSuccess;
}

// Called on every collective of a host communicator, so it must be cheap: dlopen(RTLD_NOLOAD)
// searches the library path (about 30 us here), while the loader's count of objects ever added
// (dlpi_adds) tells in one callback whether anything was loaded since the last look; only then
// are the names scanned.
bool libraryInProcess(const char* name) {
  struct Scan {
    const char* name;
    unsigned long long adds;
  } scan{name, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        static_cast<Scan*>(data)->adds = info->dlpi_adds;
        return 1;  // the count is the same in every entry: one is enough
      },
      &scan);
  // The loader's count when libcuda.so.1 was last looked for and not found.
  static std::atomic<unsigned long long> scannedAt{~0ull};
  if (strcmp(name, kLibCuda) == 0 && scan.adds == scannedAt.load(std::memory_order_acquire))
    return false;  // nothing loaded since libcuda.so.1 was last looked for and absent
  bool present =
      dl_iterate_phdr(
          [](dl_phdr_info* info, size_t, void* data) {
            const char* path = info->dlpi_name ? info->dlpi_name : "";
            const char* slash = strrchr(path, '/');
            return strcmp(slash ? slash + 1 : path, static_cast<Scan*>(data)->name) == 0 ? 1 : 0;
          },
          &scan) != 0;
  // Only an absence is remembered: the caller keeps a presence (cudaDriverIfLoaded's `found`),
  // and a count remembered from a look that found the library would tell a second thread,
  // coming before the first one has stored `found`, that it is absent: its buffers would then
  // be taken for pageable host memory.
  if (strcmp(name, kLibCuda) == 0 && !present)
    scannedAt.store(scan.adds, std::memory_order_release);
  return present;
}

const CudaDriver* cudaDriverIfLoaded() {
  static std::atomic<bool> found{false};  // loaded once, loaded for good
  if (!found.load(std::memory_order_acquire)) {
    if (!libraryInProcess(kLibCuda)) return nullptr;
    found.store(true, std::memory_order_release);
  }
  Loaded& l = loaded();
  std::call_once(l.once, [&] { load(l, RTLD_NOW | RTLD_LOCAL); });
  return l.ok ? &l.table : nullptr;
}

}  // namespace ringcc
