// Which memory a communicator works on, and whether a call's buffers agree with it.
//
// Chosen at init, as a drop-in for NCCL must: CUDA when the process has a current CUDA
// context (NCCL's "current device") and host otherwise; RINGCC_DEVICE=host|cuda forces it. A
// process that has not loaded the CUDA driver has no context, so host-only programs never
// load CUDA. Each call's buffers are then checked against the communicator's kind: a host
// communicator given device memory, or a CUDA communicator given pageable host memory, is
// ncclInvalidArgument with a WARN naming the argument. (Without the driver loaded no pointer
// can be device memory, so host communicators in host-only processes skip the check.)
#pragma once

#include <atomic>

#include "nccl.h"
#include "ringcc_config.h"
#include "src/base/cuda_driver.h"
#include "src/base/peer_info.h"

namespace ringcc {

// What CUDA says a pointer is.
enum class PointerKind {
  Unknown,     // not CUDA's: pageable host memory (or no driver loaded)
  HostPinned,  // page-locked host memory CUDA knows (cudaHostAlloc, cudaHostRegister)
  Device,      // device memory, managed (unified) memory included
};
PointerKind classifyPointer(const CudaDriver* cu, const void* ptr);

// The pure decision, for tests: RINGCC_DEVICE's value, whether the driver is loaded in this
// process, and whether the calling thread has a current context.
enum class KindChoice { Host, Cuda, CudaNeedsDriver, Invalid };

// Whether this build has the CUDA engine's kernels (nvcc found at build time). Without them,
// chooseMemKind turns the automatic choice of CUDA (a current context) into host
// communicators, so that host users in CUDA processes keep working; RINGCC_DEVICE=cuda still
// reaches the engine's "built without CUDA kernels" error.
inline constexpr bool kCudaEngineBuilt = RINGCC_HAVE_CUDA;
KindChoice decideMemKind(const char* env, bool driverLoaded, bool hasContext);

// The kind a new communicator gets, with its CUDA device (-1 for host). RINGCC_DEVICE=cuda
// loads the driver, failing with an error naming what is missing; without a current context it
// takes device 0's primary context, as the CUDA runtime would.
ncclResult_t chooseMemKind(MemoryKind* out, int* cudaDev);

// ncclCommInitAll makes its ranks on helper threads, which have no current context. Non-null
// when the calling thread would make CUDA communicators (RINGCC_DEVICE=cuda, or unset with a
// current context), saying which: each helper thread then binds to its rank's device first.
const char* initThreadsNeedDevice();
// Makes device `dev`'s primary context current on the calling thread (as cudaSetDevice does),
// or with makeCurrent false only checks that it can; `why` (from the above) goes into the error
// if the driver cannot be loaded.
ncclResult_t bindThreadToDevice(int dev, const char* why, bool makeCurrent);

// ncclInvalidArgument with a WARN if `ptr` (the argument `what` of `where`) is not memory a
// communicator of `kind` can use.
ncclResult_t checkBufferKind(MemoryKind kind, const void* ptr, const char* what, const char* where);
// Both buffers of a call (null: not used), with one look at whether the driver is loaded: that
// look (the loader's object count) is most of the check's cost on a host communicator.
ncclResult_t checkCallBuffers(MemoryKind kind, const void* sendbuff, const void* recvbuff,
                              const char* where);

// checkCallBuffers for one communicator's calls, skipping the buffers that passed on its last
// few calls. The check asks the loader whether libcuda.so.1 arrived (dl_iterate_phdr, under the
// loader's lock) and the driver what a pointer is: about 260 of the ~1,860 instructions of a
// repeated 8-byte all-reduce on one rank, for an answer that does not change while the buffer
// lives. Programs reuse a few buffers (out of place, then in place), so a handful are kept.
// What this gives up: a buffer freed and then mapped at the very same address as memory of the
// other kind is not checked again. Safe against concurrent use (each pointer is checked on its
// own, so any mix of remembered pointers was checked).
class CheckedBuffers {
 public:
  ncclResult_t check(MemoryKind kind, const void* sendbuff, const void* recvbuff,
                     const char* where);

 private:
  static constexpr unsigned kKept = 4;
  bool known(const void* ptr) const;
  void remember(const void* ptr);

  std::atomic<const void*> kept_[kKept] = {};
  std::atomic<unsigned> next_{0};
};

}  // namespace ringcc
