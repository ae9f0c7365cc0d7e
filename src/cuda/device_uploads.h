// Device copies of what outlives a call, for the CUDA batch kernel's arguments (kernels/cuda/
// batch_args.h): Programs, connection views, ring orders. Each is uploaded once and found
// again by its host address and contents, so a repeated call uploads nothing and needs no host
// synchronisation (the condition for CUDA graph capture: the first call of a shape, which
// uploads, must come before a capture, as with NCCL's own first-call setup).
//
// Copies live in an arena: chunks of device memory, each with a page-locked host twin of the
// same size that keeps the uploaded contents (what later calls compare against, and the
// source of the copy). A chunk is allocated at communicator init (reserve) and a new, larger
// one only when the arena is full, which happens while a batch is prepared: before any kernel
// of its group is queued (src/exec/group.h), never while a peer's kernel of the group may be
// waiting for this rank's. An upload is a cuMemcpyHtoDAsync on the batch's own stream, ahead
// of the kernel that reads it, from page-locked memory that is never rewritten: no host wait,
// no allocation while kernels run (either may wait until no kernel runs on the device).
//
// A host table whose contents changed since its upload (the planner rewrites its grouped
// send/recv Programs in place from batch to batch) gets a new device copy; older copies stay
// in the arena until the communicator is destroyed, since a kernel still queued on a stream may
// read them. Each host address keeps at most kMaxVersions copies and reuses one whose contents
// match, so a loop alternating between a few batch shapes stops uploading.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

class DeviceUploads {
 public:
  static constexpr size_t kMaxVersions = 8;
  static constexpr size_t kAlign = 64;  // every copy starts on its own cache line

  explicit DeviceUploads(const CudaDriver& cu) : cu_(cu) {}
  ~DeviceUploads();
  DeviceUploads(const DeviceUploads&) = delete;
  DeviceUploads& operator=(const DeviceUploads&) = delete;

  // Allocates a chunk of at least `bytes` (device memory and its page-locked twin): at init,
  // and whenever get() finds the arena full.
  ncclResult_t reserve(size_t bytes);

  // The device copy of `bytes` bytes at `host`, queueing its upload on `stream` if no copy
  // matches. A stream being captured into a CUDA graph (`capturing`) may not upload (the copy
  // would become part of the graph, and the arena may have to grow): a table with no matching
  // copy is ncclInvalidUsage saying to run the call once before capturing.
  ncclResult_t get(const void* host, size_t bytes, CuStream stream, bool capturing,
                   CuDevicePtr* out);
  template <class T>
  ncclResult_t get(const T* host, size_t n, CuStream stream, bool capturing, const T** out) {
    CuDevicePtr p = 0;
    ncclResult_t r = get(static_cast<const void*>(host), n * sizeof(T), stream, capturing, &p);
    *out = reinterpret_cast<const T*>(p);
    return r;
  }

  size_t uploads() const { return uploads_; }  // device copies made so far
  size_t chunks() const { return chunks_.size(); }
  // Device memory the arena holds (its chunks; their page-locked twins are as large).
  uint64_t deviceBytes() const {
    uint64_t n = 0;
    for (const Chunk& c : chunks_) n += c.size;
    return n;
  }

 private:
  struct Chunk {
    CuDevicePtr device = 0;
    unsigned char* host = nullptr;  // page-locked: the contents of every copy in the chunk
    size_t size = 0;
    size_t used = 0;
  };
  struct Version {
    const unsigned char* contents = nullptr;  // in a chunk's host twin
    size_t bytes = 0;
    CuDevicePtr device = 0;
  };
  const CudaDriver& cu_;
  std::vector<Chunk> chunks_;  // the last one is filled; the others are full
  std::map<const void*, std::vector<Version>> copies_;
  size_t uploads_ = 0;
};

}  // namespace ringcc
