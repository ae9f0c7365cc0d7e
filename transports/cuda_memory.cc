#include "transports/cuda_memory.h"

#include "src/base/error.h"

namespace ringcc {

ncclResult_t cudaDriverAndContext(const char* purpose, int peerRank, int channel, const char* where,
                                  const CudaDriver** cu, CuContext* ctx) {
  RINGCC_CHECK(cudaDriver(cu, purpose));
  if ((*cu)->cuCtxGetCurrent(ctx) != kCuSuccess || *ctx == nullptr)
    return failPeer(ncclInvalidUsage, peerRank, where,
                    "no current CUDA context on the thread making channel %d's connection",
                    channel);
  return ncclSuccess;
}

ncclResult_t cudaCallFailed(const CudaDriver& cu, CuResult r, const char* call, int peerRank,
                            int channel, const char* where) {
  char name[96];
  return failPeer(ncclUnhandledCudaError, peerRank, where, "%s failed for channel %d: %s", call,
                  channel, cuErrorName(cu, r, name, sizeof name));
}

CuResult initOnOwnStream(const CudaDriver& cu, CuDevicePtr copyTo, const void* from,
                         uint64_t copyBytes, CuDevicePtr zeroAt, uint64_t zeroBytes) {
  CuStream stream = nullptr;
  CuResult r = cu.cuStreamCreate(&stream, kCuStreamNonBlocking);
  if (r != kCuSuccess) return r;
  if (copyBytes > 0) r = cu.cuMemcpyHtoDAsync(copyTo, from, copyBytes, stream);
  if (r == kCuSuccess && zeroBytes > 0) r = cu.cuMemsetD8Async(zeroAt, 0, zeroBytes, stream);
  if (r == kCuSuccess) r = cu.cuStreamSynchronize(stream);
  cu.cuStreamDestroy(stream);
  return r;
}

}  // namespace ringcc
