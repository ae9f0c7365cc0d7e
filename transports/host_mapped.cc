#include "transports/host_mapped.h"

#include <utility>

#include "src/core/error.h"

namespace ringcc {

HostMapping::HostMapping(HostMapping&& other) noexcept { *this = std::move(other); }

HostMapping& HostMapping::operator=(HostMapping&& other) noexcept {
  if (this != &other) {
    release();
    host_ = std::exchange(other.host_, nullptr);
    device_ = std::exchange(other.device_, 0);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

ncclResult_t HostMapping::map(void* host, size_t bytes, int peerRank, int channel,
                              const char* where, HostMapping* out) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "a CUDA connection through host memory"));
  CuContext ctx = nullptr;
  if (cu->cuCtxGetCurrent(&ctx) != kCuSuccess || ctx == nullptr)
    return failPeer(ncclInvalidUsage, peerRank, where,
                    "no current CUDA context on the thread making channel %d's connection",
                    channel);
  char name[96];
  CuResult r =
      cu->cuMemHostRegister(host, bytes, kCuMemHostRegisterPortable | kCuMemHostRegisterDeviceMap);
  if (r != kCuSuccess)
    return failPeer(ncclUnhandledCudaError, peerRank, where,
                    "cuMemHostRegister of %zu bytes for channel %d failed: %s", bytes, channel,
                    cuErrorName(*cu, r, name, sizeof name));
  CuDevicePtr device = 0;
  r = cu->cuMemHostGetDevicePointer(&device, host, 0);
  if (r != kCuSuccess) {
    cu->cuMemHostUnregister(host);
    return failPeer(ncclUnhandledCudaError, peerRank, where,
                    "cuMemHostGetDevicePointer for channel %d failed: %s", channel,
                    cuErrorName(*cu, r, name, sizeof name));
  }
  *out = HostMapping();
  out->host_ = host;
  out->device_ = device;
  out->ctx_ = ctx;
  return ncclSuccess;
}

void HostMapping::release() {
  if (host_ == nullptr) return;
  const CudaDriver* cu = nullptr;
  if (cudaDriver(&cu, "releasing a CUDA connection through host memory") == ncclSuccess) {
    CuContext previous = nullptr;
    cu->cuCtxGetCurrent(&previous);
    if (previous != ctx_) cu->cuCtxSetCurrent(ctx_);
    cu->cuMemHostUnregister(host_);
    if (previous != ctx_) cu->cuCtxSetCurrent(previous);
  }
  host_ = nullptr;
  device_ = 0;
  ctx_ = nullptr;
}

}  // namespace ringcc
