// Device copies of what outlives a call, for the CUDA batch kernel's arguments (kernels/cuda/
// batch_args.h): Programs, connection views, ring orders. Each is uploaded once and found
// again by its host address and contents, so a repeated call uploads nothing and needs no host
// synchronisation (the condition for CUDA graph capture: the first call of a shape, which
// uploads, must come before a capture, as with NCCL's own first-call setup).
//
// A host table whose contents changed since its upload (the planner rewrites its grouped
// send/recv Programs in place from batch to batch) gets a new device copy; older copies stay
// alive until the communicator is destroyed, since a kernel still queued on a stream may read
// them. Each host address keeps at most kMaxVersions copies and reuses one whose contents
// match, so a loop alternating between a few batch shapes stops uploading.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

class DeviceUploads {
 public:
  static constexpr size_t kMaxVersions = 8;

  // Copies go through `copyStream`, the engine's private non-blocking stream: a copy on the
  // legacy default stream would wait for every kernel on the device's blocking streams, some
  // of which may be waiting for this very rank's next kernel (a peer's, on the same GPU).
  DeviceUploads(const CudaDriver& cu, CuStream copyStream) : cu_(cu), copyStream_(copyStream) {}
  ~DeviceUploads();
  DeviceUploads(const DeviceUploads&) = delete;
  DeviceUploads& operator=(const DeviceUploads&) = delete;

  // The device copy of `bytes` bytes at `host`, uploading them if no copy matches. An upload
  // is a copy the host waits for, which a stream being captured into a CUDA graph forbids: while
  // `stream` captures, a table with no matching copy is ncclInvalidUsage saying to run the call
  // once before capturing (graph-capture bookkeeping).
  ncclResult_t get(const void* host, size_t bytes, CuStream stream, CuDevicePtr* out);
  template <class T>
  ncclResult_t get(const T* host, size_t n, CuStream stream, const T** out) {
    CuDevicePtr p = 0;
    ncclResult_t r = get(static_cast<const void*>(host), n * sizeof(T), stream, &p);
    *out = reinterpret_cast<const T*>(p);
    return r;
  }

  size_t uploads() const { return uploads_; }  // device copies made so far

 private:
  struct Version {
    std::vector<unsigned char> contents;
    CuDevicePtr device = 0;
  };
  const CudaDriver& cu_;
  CuStream copyStream_;
  std::map<const void*, std::vector<Version>> copies_;
  std::vector<CuDevicePtr> retired_;  // copies evicted beyond kMaxVersions: freed at the end
  size_t uploads_ = 0;
};

}  // namespace ringcc
