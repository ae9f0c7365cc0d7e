#include "transports/shm/device_slots.h"

#include <utility>

#include "src/base/error.h"
#include "src/base/param.h"
#include "src/base/pci_bus.h"
#include "transports/cuda_memory.h"
#include "transports/fifo_layout.h"
#include "transports/p2p/fifo_memory.h"

namespace ringcc {
namespace {

constexpr uint64_t kAlign = 256;  // cuMemAlloc's own alignment; LL lines want 16
constexpr const char* kPurpose = "a CUDA connection between processes";

}  // namespace

bool deviceSlotsFor(const ConnSpec& spec) {
  const PeerInfo& self = spec.self;
  const PeerInfo& peer = spec.peer;
  if (self.memory != MemoryKind::Cuda || peer.memory != MemoryKind::Cuda) return false;
  // A process cannot open its own handles; ranks of one process meet in p2p anyway. Legacy
  // IPC between containers needs more than a shared /dev/shm: only one pid namespace counts.
  if (sameProcess(self, peer) || !sameHost(self, peer)) return false;
  if (self.pidNamespace == 0 || self.pidNamespace != peer.pidNamespace) return false;
  if (paramInt("P2P_DISABLE") == 1) return false;
  const int senderDev = cudaDeviceWithBusId(peer.busId);
  if (senderDev < 0 || self.cudaDev < 0) return false;  // its GPU is hidden from us
  bool reachable = false;
  if (cudaPeerAccessible(senderDev, self.cudaDev, &reachable) != ncclSuccess) return false;
  return reachable;
}

uint64_t deviceLlOffset(const ConnGeometry& g) {
  return alignUp(uint64_t{g.nSlots} * g.slotBytes, kAlign);
}

uint64_t deviceSlotsBytes(const ConnGeometry& g) {
  return deviceLlOffset(g) + uint64_t{g.nSlots} * g.llSlotBytes;
}

DeviceSlots::DeviceSlots(DeviceSlots&& other) noexcept { *this = std::move(other); }

DeviceSlots& DeviceSlots::operator=(DeviceSlots&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, 0);
    ctx_ = std::exchange(other.ctx_, nullptr);
    imported_ = std::exchange(other.imported_, false);
  }
  return *this;
}

ncclResult_t DeviceSlots::allocate(const ConnGeometry& g, int peerRank, int channel,
                                   const char* where, DeviceSlots* out, CuIpcMemHandle* handle) {
  const CudaDriver* cu = nullptr;
  CuContext ctx = nullptr;
  RINGCC_CHECK(cudaDriverAndContext(kPurpose, peerRank, channel, where, &cu, &ctx));
  DeviceSlots slots;
  CuResult r = cu->cuMemAlloc(&slots.ptr_, deviceSlotsBytes(g));
  if (r != kCuSuccess) return cudaCallFailed(*cu, r, "cuMemAlloc", peerRank, channel, where);
  slots.ctx_ = ctx;
  const uint64_t llBytes = uint64_t{g.nSlots} * g.llSlotBytes;
  if (llBytes > 0 && (r = initOnOwnStream(*cu, 0, nullptr, 0, slots.ptr_ + deviceLlOffset(g),
                                          llBytes)) != kCuSuccess)
    return cudaCallFailed(*cu, r, "zeroing the LL lines", peerRank, channel, where);
  if ((r = cu->cuIpcGetMemHandle(handle, slots.ptr_)) != kCuSuccess)
    return cudaCallFailed(*cu, r, "cuIpcGetMemHandle", peerRank, channel, where);
  *out = std::move(slots);
  return ncclSuccess;
}

ncclResult_t DeviceSlots::open(const CuIpcMemHandle& handle, uint64_t bytes, int peerRank,
                               int channel, const char* where, DeviceSlots* out) {
  const CudaDriver* cu = nullptr;
  CuContext ctx = nullptr;
  RINGCC_CHECK(cudaDriverAndContext(kPurpose, peerRank, channel, where, &cu, &ctx));
  DeviceSlots slots;
  const CuResult r = cu->cuIpcOpenMemHandle(&slots.ptr_, handle, kCuIpcMemLazyEnablePeerAccess);
  if (r != kCuSuccess) {
    char name[96];
    return failPeer(ncclSystemError, peerRank, where,
                    "cannot map the peer's FIFO of %llu bytes in its GPU for channel %d "
                    "(cuIpcOpenMemHandle: %s); NCCL_P2P_DISABLE=1 keeps FIFOs between "
                    "processes in host memory",
                    static_cast<unsigned long long>(bytes), channel,
                    cuErrorName(*cu, r, name, sizeof name));
  }
  slots.ctx_ = ctx;
  slots.imported_ = true;
  *out = std::move(slots);
  return ncclSuccess;
}

void DeviceSlots::release() {
  if (ptr_ == 0) return;
  releaseInContext("releasing a CUDA connection between processes", ctx_,
                   [&](const CudaDriver& cu) {
                     if (imported_)
                       cu.cuIpcCloseMemHandle(ptr_);
                     else
                       cu.cuMemFree(ptr_);
                   });
  ptr_ = 0;
  ctx_ = nullptr;
  imported_ = false;
}

}  // namespace ringcc
