// What the transports' CUDA memory (a p2p FIFO in device or pinned memory, shm slots in a GPU,
// a segment registered for the GPUs) shares: finding the driver and the context the memory
// will belong to, one shape of error for a failed driver call, initializing device memory
// without waiting on other streams, and freeing in the owning context.
#pragma once

#include <cstdint>

#include "nccl.h"
#include "src/base/cuda_driver.h"

namespace ringcc {

// The driver (loaded for `purpose`, named if it cannot load) and the calling thread's current
// context, which memory allocated now belongs to; without one, ncclInvalidUsage naming the
// channel and peer.
ncclResult_t cudaDriverAndContext(const char* purpose, int peerRank, int channel, const char* where,
                                  const CudaDriver** cu, CuContext* ctx);

// A driver call's failure as ncclUnhandledCudaError naming the call, the channel and the peer.
ncclResult_t cudaCallFailed(const CudaDriver& cu, CuResult r, const char* call, int peerRank,
                            int channel, const char* where);

// Copies `copyBytes` from host `from` to device `copyTo` (none when 0), then zeroes `zeroBytes`
// at `zeroAt` (none when 0), through a short-lived non-blocking stream, and waits for both. A
// copy or memset on the legacy default stream would wait for every kernel on the device's
// blocking streams, among them a peer's kernel that may be waiting for this very connection.
CuResult initOnOwnStream(const CudaDriver& cu, CuDevicePtr copyTo, const void* from,
                         uint64_t copyBytes, CuDevicePtr zeroAt, uint64_t zeroBytes);

// Runs `release(cu)` with `ctx` current, whatever the calling thread's context, and restores
// it: memory is freed in the context that owns it. Does nothing if the driver is gone.
template <class Release>
void releaseInContext(const char* purpose, CuContext ctx, Release&& release) {
  const CudaDriver* cu = nullptr;
  if (cudaDriver(&cu, purpose) != ncclSuccess) return;
  CuContext previous = nullptr;
  cu->cuCtxGetCurrent(&previous);
  if (previous != ctx) cu->cuCtxSetCurrent(ctx);
  release(*cu);
  if (previous != ctx) cu->cuCtxSetCurrent(previous);
}

}  // namespace ringcc
