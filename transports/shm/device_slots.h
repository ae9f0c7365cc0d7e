// The slots of a shm connection between CUDA ranks of two processes, in the receiver's GPU
// memory, which the sender's kernels write through a CUDA IPC handle (NCCL's P2P transport
// between processes). The connection's control block (counters, closed flags, failReason)
// stays in the shm segment, in host memory mapped for both GPUs, so that the host side keeps
// seeing and signalling it as for any shm connection (closes, a dead peer: peer_watch.h); only
// the data moves from host memory to the GPU: one copy over NVLink (or inside one GPU) where
// staging through host memory makes two over PCIe.
//
// When: both ranks are CUDA ranks of different processes on one host and in one pid namespace
// (not containers apart), NCCL_P2P_DISABLE is not 1, this process sees the sender's GPU (by PCI bus id: src/base/pci_bus.h) and that GPU is
// the receiver's or can write into it (cuDeviceCanAccessPeer). The receiver decides, from the
// ranks' PeerInfo alone, and says so in its info; the sender then must open the handle.
//
// Memory: one cuMemAlloc block in the receiver's current context, Simple slots at 0 and the LL
// lines (zeroed: no epoch is 0) at deviceLlOffset. The sender opens it with
// cuIpcOpenMemHandle (lazy peer access) in its own current context. Each side releases its
// part (cuMemFree, cuIpcCloseMemHandle) in the context that made it when the Connector goes,
// which is after that side's last kernel. The driver leaves an import of memory its exporter
// freed undefined; no kernel touches it then (the peer's slots are written only while both
// sides run the same operation, and a stopped peer stops our kernels through the control
// block first).
#pragma once

#include <cstdint>

#include "nccl.h"
#include "src/base/cuda_driver.h"
#include "transports/transport.h"

namespace ringcc {

// Whether the receiver `spec.self` puts the slots of its connection from `spec.peer` in its
// GPU (see above). Never fails: anything it cannot tell means no.
bool deviceSlotsFor(const ConnSpec& spec);

// Offset of the LL lines in the block, and the block's size, for geometry g.
uint64_t deviceLlOffset(const ConnGeometry& g);
uint64_t deviceSlotsBytes(const ConnGeometry& g);

class DeviceSlots {
 public:
  DeviceSlots() = default;
  ~DeviceSlots() { release(); }
  DeviceSlots(DeviceSlots&& other) noexcept;
  DeviceSlots& operator=(DeviceSlots&& other) noexcept;
  DeviceSlots(const DeviceSlots&) = delete;
  DeviceSlots& operator=(const DeviceSlots&) = delete;

  // Receiver: allocates the block for geometry g in the current context, zeroes its LL lines
  // and fills *handle for the sender. Errors name `where`, the peer and the channel.
  static ncclResult_t allocate(const ConnGeometry& g, int peerRank, int channel, const char* where,
                               DeviceSlots* out, CuIpcMemHandle* handle);

  // Sender: maps the receiver's block of `bytes` into the current context.
  static ncclResult_t open(const CuIpcMemHandle& handle, uint64_t bytes, int peerRank, int channel,
                           const char* where, DeviceSlots* out);

  // The block's first byte in this process's address space (null when there is none).
  char* base() const { return reinterpret_cast<char*>(ptr_); }

 private:
  void release();

  CuDevicePtr ptr_ = 0;
  CuContext ctx_ = nullptr;
  bool imported_ = false;  // opened from a handle (closed, not freed)
};

}  // namespace ringcc
