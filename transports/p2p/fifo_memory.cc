#include "transports/p2p/fifo_memory.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/core/error.h"

namespace ringcc {
namespace {

constexpr uint64_t kAlign = 64;

ncclResult_t allocHost(const FifoLayout& l, uint64_t llBytes, uint32_t refKind, int peerRank,
                       int channel, FifoMemory* out) {
  const uint64_t total = alignUp(l.total, kAlign);  // aligned_alloc wants whole alignments
  char* base = static_cast<char*>(std::aligned_alloc(kAlign, total));
  if (base == nullptr)
    return failPeer(ncclSystemError, peerRank, "p2p setup recv",
                    "could not allocate %llu bytes for channel %d",
                    static_cast<unsigned long long>(total), channel);
  std::memset(base + l.controlOffset, 0, l.slotsOffset - l.controlOffset);
  std::memset(base + l.llSlotsOffset, 0, llBytes);
  reinterpret_cast<FifoControl*>(base + l.controlOffset)->refKind = refKind;
  out->kind = MemoryKind::Host;
  out->base = base;
  return ncclSuccess;
}

// A driver call's failure as ncclUnhandledCudaError naming the call, the peer and the channel.
ncclResult_t cudaFailed(const CudaDriver& cu, CuResult r, const char* call, int peerRank,
                        int channel) {
  char name[96];
  return failPeer(ncclUnhandledCudaError, peerRank, "p2p setup recv",
                  "%s failed for channel %d: %s", call, channel,
                  cuErrorName(cu, r, name, sizeof name));
}

// The driver and the calling thread's current context, which the FIFO's memory belongs to.
ncclResult_t driverAndContext(int peerRank, int channel, const CudaDriver** cu, CuContext* ctx) {
  RINGCC_CHECK(cudaDriver(cu, "a CUDA p2p connection"));
  if ((*cu)->cuCtxGetCurrent(ctx) != kCuSuccess || *ctx == nullptr)
    return failPeer(ncclInvalidUsage, peerRank, "p2p setup recv",
                    "no current CUDA context on the thread making channel %d's connection",
                    channel);
  return ncclSuccess;
}

ncclResult_t allocDevice(const FifoLayout& l, uint64_t llBytes, uint32_t refKind, int peerRank,
                         int channel, FifoMemory* out) {
  const CudaDriver* cu = nullptr;
  CuContext ctx = nullptr;
  RINGCC_CHECK(driverAndContext(peerRank, channel, &cu, &ctx));
  CuDevicePtr dev = 0;
  CuResult r = cu->cuMemAlloc(&dev, l.total);
  if (r != kCuSuccess) return cudaFailed(*cu, r, "cuMemAlloc", peerRank, channel);
  // The control block as it must start (zeros and the reference kind), copied in one go.
  std::vector<char> control(l.slotsOffset - l.controlOffset, 0);
  reinterpret_cast<FifoControl*>(control.data())->refKind = refKind;
  CuStream stream = nullptr;
  const char* call = "cuStreamCreate";
  r = cu->cuStreamCreate(&stream, kCuStreamNonBlocking);
  if (r == kCuSuccess) {
    call = "initializing the FIFO";
    r = cu->cuMemcpyHtoDAsync(dev + l.controlOffset, control.data(), control.size(), stream);
    if (r == kCuSuccess && llBytes > 0)
      r = cu->cuMemsetD8Async(dev + l.llSlotsOffset, 0, llBytes, stream);
    if (r == kCuSuccess) r = cu->cuStreamSynchronize(stream);
    cu->cuStreamDestroy(stream);
  }
  if (r != kCuSuccess) {
    cu->cuMemFree(dev);
    return cudaFailed(*cu, r, call, peerRank, channel);
  }
  out->kind = MemoryKind::Cuda;
  out->base = reinterpret_cast<char*>(dev);
  out->ctx = ctx;
  return ncclSuccess;
}

// Pinned host memory that every context maps; initialized from the host (no stream to wait on).
ncclResult_t allocPinned(const FifoLayout& l, uint64_t llBytes, uint32_t refKind, int peerRank,
                         int channel, FifoMemory* out) {
  const CudaDriver* cu = nullptr;
  CuContext ctx = nullptr;
  RINGCC_CHECK(driverAndContext(peerRank, channel, &cu, &ctx));
  void* host = nullptr;
  CuResult r =
      cu->cuMemHostAlloc(&host, l.total, kCuMemHostAllocDeviceMap | kCuMemHostAllocPortable);
  if (r != kCuSuccess) return cudaFailed(*cu, r, "cuMemHostAlloc", peerRank, channel);
  auto* base = static_cast<char*>(host);
  std::memset(base + l.controlOffset, 0, l.slotsOffset - l.controlOffset);
  std::memset(base + l.llSlotsOffset, 0, llBytes);
  reinterpret_cast<FifoControl*>(base + l.controlOffset)->refKind = refKind;
  CuDevicePtr dev = 0;
  r = cu->cuMemHostGetDevicePointer(&dev, host, 0);
  if (r != kCuSuccess) {
    cu->cuMemFreeHost(host);
    return cudaFailed(*cu, r, "cuMemHostGetDevicePointer", peerRank, channel);
  }
  out->kind = MemoryKind::Cuda;
  out->base = reinterpret_cast<char*>(dev);  // the same address in every context (UVA)
  out->ctx = ctx;
  out->pinned = host;
  return ncclSuccess;
}

}  // namespace

ncclResult_t allocFifoMemory(MemoryKind kind, const FifoLayout& l, uint64_t llBytes,
                             uint32_t refKind, int peerRank, int channel, FifoMemory* out,
                             bool pinnedHost) {
  *out = FifoMemory{};
  if (kind == MemoryKind::Host) return allocHost(l, llBytes, refKind, peerRank, channel, out);
  return pinnedHost ? allocPinned(l, llBytes, refKind, peerRank, channel, out)
                    : allocDevice(l, llBytes, refKind, peerRank, channel, out);
}

void freeFifoMemory(const FifoMemory& m) {
  if (m.base == nullptr) return;
  if (m.kind == MemoryKind::Host) {
    std::free(m.base);
    return;
  }
  const CudaDriver* cu = nullptr;
  if (cudaDriver(&cu, "freeing a CUDA p2p connection") != ncclSuccess) return;
  CuContext previous = nullptr;
  cu->cuCtxGetCurrent(&previous);
  if (previous != m.ctx) cu->cuCtxSetCurrent(m.ctx);
  if (m.pinned != nullptr)
    cu->cuMemFreeHost(m.pinned);
  else
    cu->cuMemFree(reinterpret_cast<CuDevicePtr>(m.base));
  if (previous != m.ctx) cu->cuCtxSetCurrent(previous);
}

CuContext currentCudaContext() {
  const CudaDriver* cu = cudaDriverIfLoaded();
  CuContext ctx = nullptr;
  if (cu == nullptr || cu->cuCtxGetCurrent(&ctx) != kCuSuccess) return nullptr;
  return ctx;
}

ncclResult_t cudaPeerAccessible(int dev, int peerDev, bool* out) {
  *out = true;
  if (dev == peerDev) return ncclSuccess;
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "a CUDA p2p connection"));
  int can = 0;
  const CuResult r = cu->cuDeviceCanAccessPeer(&can, dev, peerDev);
  if (r != kCuSuccess) {
    char name[96];
    return fail(ncclUnhandledCudaError, "p2p setup recv",
                "cuDeviceCanAccessPeer(%d, %d) failed: %s", dev, peerDev,
                cuErrorName(*cu, r, name, sizeof name));
  }
  *out = can != 0;
  return ncclSuccess;
}

ncclResult_t enablePeerAccess(CuContext peer, int selfDev, int peerDev, int peerRank) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "a CUDA p2p connection"));
  const CuResult r = cu->cuCtxEnablePeerAccess(peer, 0);
  if (r == kCuSuccess || r == kCuErrorPeerAccessAlreadyEnabled) return ncclSuccess;
  char name[96];
  return failPeer(ncclSystemError, peerRank, "p2p connect send",
                  "GPU %d cannot write into GPU %d's memory (cuCtxEnablePeerAccess: %s), "
                  "although cuDeviceCanAccessPeer said it could",
                  selfDev, peerDev, cuErrorName(*cu, r, name, sizeof name));
}

}  // namespace ringcc
