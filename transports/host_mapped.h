// Host memory that a CUDA rank's kernels reach: the FIFO of a connection that must live in
// ordinary host memory because another process maps it too (a shm segment) or because the
// proxy moves it (a network link's slots, staged through the host). The memory is registered
// with the driver (cuMemHostRegister, PORTABLE | DEVICEMAP: page-locked, mapped into every
// context) and the kernels use its device address; the host keeps using the host address.
// This is how NCCL's shm transport and its network staging reach host memory from a GPU.
//
// Registration belongs to the calling thread's current context; unregistering (destruction)
// makes that context current for the call, whatever the destroying thread's is. The memory
// must outlive the mapping, and no kernel may still use it when the mapping is destroyed.
#pragma once

#include <cstddef>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

class HostMapping {
 public:
  HostMapping() = default;
  ~HostMapping() { release(); }
  HostMapping(HostMapping&& other) noexcept;
  HostMapping& operator=(HostMapping&& other) noexcept;
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;

  // Registers [host, host + bytes) with the current context of the calling thread. Errors
  // (no driver, no current context, the driver refusing) name `where`, the peer and channel.
  static ncclResult_t map(void* host, size_t bytes, int peerRank, int channel, const char* where,
                          HostMapping* out);

  // The device address of the registered memory's first byte (null when nothing is mapped).
  char* device() const { return reinterpret_cast<char*>(device_); }
  bool mapped() const { return host_ != nullptr; }

 private:
  void release();

  void* host_ = nullptr;
  CuDevicePtr device_ = 0;
  CuContext ctx_ = nullptr;
};

}  // namespace ringcc
