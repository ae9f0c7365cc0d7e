// Device buffers for the perf tools, as nccl-tests uses them: when the CUDA driver is there and
// has a GPU, each rank runs on device (local rank index mod the device count): its primary
// context is made current around its init and its calls, its buffers are device memory, its
// operations go on a non-blocking stream of its own, and the timer stops only once every
// stream has finished. Data is filled and checked in host mirrors, copied to and from the
// device around each checked operation.
//
// The driver is loaded with dlopen (libcuda.so.1), never linked: the tools run on machines
// without one, with host buffers, as before. RINGCC_DEVICE=host keeps them on the host even
// where a GPU is. Tests hand the driver in (PerfIo::cuda), an emulated one.
//
// Types: src/base/cuda_driver.h's (only its types; this file loads its own table).
#pragma once

#include <string>
#include <vector>

#include "src/base/cuda_driver.h"

namespace ringcc::bench {

// The driver from libcuda.so.1 with the entry points the tools use, initialized, if it loads
// and has at least one device; else null with *why saying what was missing. Loaded once.
const CudaDriver* loadPerfCuda(std::string* why);

// One local rank's device, stream and buffers.
struct RankDevice {
  int dev = -1;
  CuContext ctx = nullptr;
  CuStream stream = nullptr;
  CuDevicePtr send = 0, recv = 0;
};

// The ranks of this process on devices: rank k of nLocal on device (first + k) mod count.
class PerfDevices {
 public:
  // Retains each rank's primary context. False with *err on a driver error.
  bool open(const CudaDriver* cu, int first, int nLocal, std::string* err);
  // Device buffers of `bytes` each and a stream per rank (in its context).
  bool allocate(size_t bytes, std::string* err);
  void release();  // buffers and streams; contexts stay (primary contexts are the process's)

  bool active() const { return cu_ != nullptr; }
  int size() const { return static_cast<int>(ranks_.size()); }
  const RankDevice& rank(int k) const { return ranks_[static_cast<size_t>(k)]; }
  // Makes rank k's context current on the calling thread.
  bool use(int k) const;
  // Copies between a rank's host mirror and its device buffer (synchronous).
  bool upload(int k, bool recvBuffer, const void* host, size_t bytes) const;
  bool download(int k, void* host, size_t bytes) const;  // from the receive buffer
  // Waits for everything queued on rank k's stream.
  bool sync(int k) const;
  const char* lastError() const { return lastError_.c_str(); }

 private:
  bool check(CuResult r, const char* call) const;

  const CudaDriver* cu_ = nullptr;
  std::vector<RankDevice> ranks_;
  mutable std::string lastError_;
};

}  // namespace ringcc::bench
