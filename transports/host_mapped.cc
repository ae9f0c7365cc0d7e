#include "transports/host_mapped.h"

#include <utility>

#include "src/base/error.h"
#include "transports/cuda_memory.h"

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
  CuContext ctx = nullptr;
  RINGCC_CHECK(cudaDriverAndContext("a CUDA connection through host memory", peerRank, channel,
                                    where, &cu, &ctx));
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
    return cudaCallFailed(*cu, r, "cuMemHostGetDevicePointer", peerRank, channel, where);
  }
  *out = HostMapping();
  out->host_ = host;
  out->device_ = device;
  out->ctx_ = ctx;
  return ncclSuccess;
}

void HostMapping::release() {
  if (host_ == nullptr) return;
  releaseInContext("releasing a CUDA connection through host memory", ctx_,
                   [&](const CudaDriver& cu) { cu.cuMemHostUnregister(host_); });
  host_ = nullptr;
  device_ = 0;
  ctx_ = nullptr;
}

}  // namespace ringcc
