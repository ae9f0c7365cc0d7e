#include "src/base/mem_kind.h"

#include <cstring>
#include <string>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"

namespace ringcc {

PointerKind classifyPointer(const CudaDriver* cu, const void* ptr) {
  if (!cu || !ptr) return PointerKind::Unknown;
  unsigned type = 0;
  // Pageable memory is not CUDA's: the driver answers CUDA_ERROR_INVALID_VALUE.
  if (cu->cuPointerGetAttribute(&type, kCuPointerAttributeMemoryType,
                                reinterpret_cast<CuDevicePtr>(ptr)) != kCuSuccess)
    return PointerKind::Unknown;
  switch (type) {
    case kCuMemoryTypeHost:
      return PointerKind::HostPinned;
    case kCuMemoryTypeDevice:
    case kCuMemoryTypeArray:
    case kCuMemoryTypeUnified:
      return PointerKind::Device;
    default:
      return PointerKind::Unknown;
  }
}

KindChoice decideMemKind(const char* env, bool driverLoaded, bool hasContext) {
  if (env == nullptr || env[0] == '\0')
    return driverLoaded && hasContext ? KindChoice::Cuda : KindChoice::Host;
  if (strcmp(env, "host") == 0) return KindChoice::Host;
  if (strcmp(env, "cuda") == 0) return KindChoice::CudaNeedsDriver;
  return KindChoice::Invalid;
}

namespace {

// The calling thread's current context, or null.
CuContext currentContext(const CudaDriver& cu) {
  CuContext ctx = nullptr;
  if (cu.cuCtxGetCurrent(&ctx) != kCuSuccess) return nullptr;
  return ctx;
}

ncclResult_t currentDevice(const CudaDriver& cu, int* dev) {
  char name[96];
  CuResult r = cu.cuCtxGetDevice(dev);
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "init", "cuCtxGetDevice failed with %s",
                cuErrorName(cu, r, name, sizeof name));
  return ncclSuccess;
}

// RINGCC_DEVICE=cuda: the driver, a GPU, and a current context (device 0's primary one if the
// thread has none, as cudaGetDevice would give).
ncclResult_t forceCuda(int* cudaDev) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "RINGCC_DEVICE=cuda"));
  char name[96];
  if (!currentContext(*cu)) {
    int count = 0;
    CuResult r = cu->cuDeviceGetCount(&count);
    if (r != kCuSuccess || count == 0)
      return fail(ncclUnhandledCudaError, "init",
                  "RINGCC_DEVICE=cuda: no CUDA device is visible (cuDeviceGetCount: %d, %s)", count,
                  cuErrorName(*cu, r, name, sizeof name));
    CuContext ctx = nullptr;
    r = cu->cuDevicePrimaryCtxRetain(&ctx, 0);
    if (r == kCuSuccess) r = cu->cuCtxSetCurrent(ctx);
    if (r != kCuSuccess)
      return fail(ncclUnhandledCudaError, "init",
                  "RINGCC_DEVICE=cuda: device 0's primary context cannot be made current: %s",
                  cuErrorName(*cu, r, name, sizeof name));
  }
  return currentDevice(*cu, cudaDev);
}

}  // namespace

ncclResult_t chooseMemKind(MemoryKind* out, int* cudaDev) {
  std::string env = paramString("DEVICE");
  const CudaDriver* loaded = env.empty() ? cudaDriverIfLoaded() : nullptr;
  bool hasContext = loaded && currentContext(*loaded);
  switch (decideMemKind(env.c_str(), loaded != nullptr, hasContext)) {
    case KindChoice::Host:
      *out = MemoryKind::Host;
      return ncclSuccess;
    case KindChoice::Cuda:
      if (!kCudaEngineBuilt) {
        // A build without the CUDA kernels: a process with a current context keeps host
        // communicators (its host buffers work; device buffers are refused per call, naming
        // the reason) rather than failing at init: RINGCC_DEVICE=cuda asks for the error.
        LOG_INFO(kLogInit,
                 "a CUDA context is current, but this build has no CUDA kernels: this "
                 "communicator works on host memory");
        *out = MemoryKind::Host;
        return ncclSuccess;
      }
      *out = MemoryKind::Cuda;
      return currentDevice(*loaded, cudaDev);
    case KindChoice::CudaNeedsDriver:
      *out = MemoryKind::Cuda;
      return forceCuda(cudaDev);
    case KindChoice::Invalid:
      break;
  }
  return fail(ncclInvalidArgument, "init", "RINGCC_DEVICE=%s: expected host or cuda", env.c_str());
}

const char* initThreadsNeedDevice() {
  std::string env = paramString("DEVICE");
  if (env == "cuda") return "RINGCC_DEVICE=cuda";
  if (!env.empty()) return nullptr;
  const CudaDriver* loaded = cudaDriverIfLoaded();
  return kCudaEngineBuilt && loaded && currentContext(*loaded) ? "a current CUDA context" : nullptr;
}

ncclResult_t bindThreadToDevice(int dev, const char* why, bool makeCurrent) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, why));
  char name[96];
  CuContext ctx = nullptr;
  CuResult r = cu->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r == kCuSuccess && makeCurrent) r = cu->cuCtxSetCurrent(ctx);
  if (r != kCuSuccess)
    return fail(ncclInvalidArgument, "ncclCommInitAll",
                "device %d cannot be used (its primary context: %s); devlist names CUDA devices",
                dev, cuErrorName(*cu, r, name, sizeof name));
  return ncclSuccess;
}

namespace {

ncclResult_t checkWith(const CudaDriver* cu, MemoryKind kind, const void* ptr, const char* what,
                       const char* where) {
  if (ptr == nullptr) return ncclSuccess;  // null buffers are the callers' checks
  if (kind == MemoryKind::Host) {
    if (classifyPointer(cu, ptr) == PointerKind::Device)
      return fail(ncclInvalidArgument, where,
                  "%s %p is CUDA device memory, but the communicator works on host memory "
                  "(it was made without a current CUDA device, or with RINGCC_DEVICE=host%s)",
                  what, ptr, kCudaEngineBuilt ? "" : ", or by a build without CUDA kernels");
    return ncclSuccess;
  }
  if (classifyPointer(cu, ptr) == PointerKind::Unknown)
    return fail(ncclInvalidArgument, where,
                "%s %p is pageable host memory, but the communicator is a CUDA one: pass "
                "device memory (or page-locked host memory)",
                what, ptr);
  return ncclSuccess;
}

}  // namespace

ncclResult_t checkBufferKind(MemoryKind kind, const void* ptr, const char* what,
                             const char* where) {
  return checkWith(ptr ? cudaDriverIfLoaded() : nullptr, kind, ptr, what, where);
}

ncclResult_t checkCallBuffers(MemoryKind kind, const void* sendbuff, const void* recvbuff,
                              const char* where) {
  if (sendbuff == nullptr && recvbuff == nullptr) return ncclSuccess;
  const CudaDriver* cu = cudaDriverIfLoaded();
  if (sendbuff) RINGCC_CHECK(checkWith(cu, kind, sendbuff, "sendbuff", where));
  if (recvbuff) RINGCC_CHECK(checkWith(cu, kind, recvbuff, "recvbuff", where));
  return ncclSuccess;
}

bool CheckedBuffers::known(const void* ptr) const {
  if (ptr == nullptr) return true;
  for (const auto& k : kept_)
    if (k.load(std::memory_order_relaxed) == ptr) return true;
  return false;
}

void CheckedBuffers::remember(const void* ptr) {
  if (known(ptr)) return;
  kept_[next_.fetch_add(1, std::memory_order_relaxed) % kKept].store(ptr,
                                                                     std::memory_order_relaxed);
}

ncclResult_t CheckedBuffers::check(MemoryKind kind, const void* sendbuff, const void* recvbuff,
                                   const char* where) {
  const bool sendKnown = known(sendbuff), recvKnown = known(recvbuff);
  if (sendKnown && recvKnown) return ncclSuccess;
  RINGCC_CHECK(checkCallBuffers(kind, sendKnown ? nullptr : sendbuff,
                                recvKnown ? nullptr : recvbuff, where));
  remember(sendbuff);
  remember(recvbuff);
  return ncclSuccess;
}

}  // namespace ringcc
