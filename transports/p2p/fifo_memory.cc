#include "transports/p2p/fifo_memory.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/base/error.h"
#include "transports/cuda_memory.h"

namespace ringcc {
namespace {

constexpr uint64_t kAlign = 64;
constexpr const char* kWhere = "p2p setup recv";
constexpr const char* kPurpose = "a CUDA p2p connection";

ncclResult_t allocHost(const FifoLayout& l, uint64_t llBytes, uint32_t refKind, int peerRank,
                       int channel, FifoMemory* out) {
  const uint64_t total = alignUp(l.total, kAlign);  // aligned_alloc wants whole alignments
  char* base = static_cast<char*>(std::aligned_alloc(kAlign, total));
  if (base == nullptr)
    return failPeer(ncclSystemError, peerRank, kWhere,
                    "could not allocate %llu bytes for channel %d",
                    static_cast<unsigned long long>(total), channel);
  std::memset(base + l.controlOffset, 0, l.slotsOffset - l.controlOffset);
  std::memset(base + l.llSlotsOffset, 0, llBytes);
  reinterpret_cast<FifoControl*>(base + l.controlOffset)->refKind = refKind;
  out->kind = MemoryKind::Host;
  out->base = base;
  return ncclSuccess;
}

ncclResult_t allocDevice(const FifoLayout& l, uint64_t llBytes, uint32_t refKind, int peerRank,
                         int channel, FifoMemory* out) {
  const CudaDriver* cu = nullptr;
  CuContext ctx = nullptr;
  RINGCC_CHECK(cudaDriverAndContext(kPurpose, peerRank, channel, kWhere, &cu, &ctx));
  CuDevicePtr dev = 0;
  CuResult r = cu->cuMemAlloc(&dev, l.total);
  if (r != kCuSuccess) return cudaCallFailed(*cu, r, "cuMemAlloc", peerRank, channel, kWhere);
  // The control block as it must start (zeros and the reference kind), copied in one go.
  std::vector<char> control(l.slotsOffset - l.controlOffset, 0);
  reinterpret_cast<FifoControl*>(control.data())->refKind = refKind;
  r = initOnOwnStream(*cu, dev + l.controlOffset, control.data(), control.size(),
                      dev + l.llSlotsOffset, llBytes);
  if (r != kCuSuccess) {
    cu->cuMemFree(dev);
    return cudaCallFailed(*cu, r, "initializing the FIFO", peerRank, channel, kWhere);
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
  RINGCC_CHECK(cudaDriverAndContext(kPurpose, peerRank, channel, kWhere, &cu, &ctx));
  void* host = nullptr;
  CuResult r =
      cu->cuMemHostAlloc(&host, l.total, kCuMemHostAllocDeviceMap | kCuMemHostAllocPortable);
  if (r != kCuSuccess) return cudaCallFailed(*cu, r, "cuMemHostAlloc", peerRank, channel, kWhere);
  auto* base = static_cast<char*>(host);
  std::memset(base + l.controlOffset, 0, l.slotsOffset - l.controlOffset);
  std::memset(base + l.llSlotsOffset, 0, llBytes);
  reinterpret_cast<FifoControl*>(base + l.controlOffset)->refKind = refKind;
  CuDevicePtr dev = 0;
  r = cu->cuMemHostGetDevicePointer(&dev, host, 0);
  if (r != kCuSuccess) {
    cu->cuMemFreeHost(host);
    return cudaCallFailed(*cu, r, "cuMemHostGetDevicePointer", peerRank, channel, kWhere);
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
  releaseInContext("freeing a CUDA p2p connection", m.ctx, [&](const CudaDriver& cu) {
    if (m.pinned != nullptr)
      cu.cuMemFreeHost(m.pinned);
    else
      cu.cuMemFree(reinterpret_cast<CuDevicePtr>(m.base));
  });
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
  RINGCC_CHECK(cudaDriver(&cu, kPurpose));
  int can = 0;
  const CuResult r = cu->cuDeviceCanAccessPeer(&can, dev, peerDev);
  if (r != kCuSuccess) {
    char name[96];
    return fail(ncclUnhandledCudaError, kWhere, "cuDeviceCanAccessPeer(%d, %d) failed: %s", dev,
                peerDev, cuErrorName(*cu, r, name, sizeof name));
  }
  *out = can != 0;
  return ncclSuccess;
}

ncclResult_t enablePeerAccess(CuContext peer, int selfDev, int peerDev, int peerRank) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, kPurpose));
  const CuResult r = cu->cuCtxEnablePeerAccess(peer, 0);
  if (r == kCuSuccess || r == kCuErrorPeerAccessAlreadyEnabled) return ncclSuccess;
  char name[96];
  return failPeer(ncclSystemError, peerRank, "p2p connect send",
                  "GPU %d cannot write into GPU %d's memory (cuCtxEnablePeerAccess: %s), "
                  "although cuDeviceCanAccessPeer said it could",
                  selfDev, peerDev, cuErrorName(*cu, r, name, sizeof name));
}

}  // namespace ringcc
