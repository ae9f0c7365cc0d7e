// The memory of one p2p connection's FIFO (transports/fifo_layout.h): the host heap for host
// communicators, device memory for CUDA ones. The receiver allocates it; the sender, a thread
// of the same process, uses the very same addresses (a kernel on the same GPU, or on a peer GPU
// once peer access is enabled). For CUDA ranks on GPUs without peer access the FIFO is pinned
// host memory mapped into every context (cuMemHostAlloc, DEVICEMAP | PORTABLE): both GPUs
// reach it over PCIe, as NCCL stages through host memory where P2P is not possible.
//
// Device memory is allocated with cuMemAlloc in the receiving thread's current context (the
// rank's device) and initialized through a short-lived non-blocking stream: a copy or memset
// on the legacy default stream would wait for every kernel on the device's blocking streams,
// among them a peer rank's kernel that may be waiting for this very connection.
#pragma once

#include <cstdint>

#include "nccl.h"
#include "src/base/cuda_driver.h"
#include "transports/fifo_layout.h"
#include "transports/transport.h"

namespace ringcc {

struct FifoMemory {
  MemoryKind kind = MemoryKind::Host;
  char* base = nullptr;     // the FIFO's first byte: a host address, or a device address
  CuContext ctx = nullptr;  // Cuda: the context that allocated it (and frees it)
  void* pinned = nullptr;   // Cuda: the pinned host block when the FIFO lives there, else null
};

// Allocates l.total bytes of `kind` with the control block and the LL lines zeroed and the
// control's refKind set (counters at 0, LL flags at 0: no epoch is 0). Simple slots are left
// as they are: nothing reads a slot before its tail moved. Errors name the peer and channel.
// `pinnedHost` (Cuda only): in pinned host memory instead of the current device's.
ncclResult_t allocFifoMemory(MemoryKind kind, const FifoLayout& l, uint64_t llBytes,
                             uint32_t refKind, int peerRank, int channel, FifoMemory* out,
                             bool pinnedHost = false);

// Frees it (device memory in its own context, whatever the calling thread's current one).
void freeFifoMemory(const FifoMemory& m);

// The current context of the calling thread, for a CUDA connection's info; null without one.
CuContext currentCudaContext();

// Whether kernels on device `dev` can write into device `peerDev`'s memory (cuDeviceCanAccessPeer;
// a device can always reach its own).
ncclResult_t cudaPeerAccessible(int dev, int peerDev, bool* out);

// Lets kernels of the calling thread's current context write into memory of `peer`'s device
// (a receiver on another GPU of this process). Already enabled counts as done; a pair of GPUs
// without peer access is ncclSystemError naming both devices.
ncclResult_t enablePeerAccess(CuContext peer, int selfDev, int peerDev, int peerRank);

}  // namespace ringcc
