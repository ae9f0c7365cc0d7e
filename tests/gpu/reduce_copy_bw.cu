// GPU benchmark (tests/gpu/run.sh): the kernels' reduce-copy (kernels/reduce_copy.h,
// reduceCopyPacked: 16-byte packs, every thread of every block a worker) copying device memory,
// against cudaMemcpy device to device on the same buffers. Prints GB/s of both and the ratio
// (issue 12's target: >= 90%). A test tool: it links the CUDA runtime; libnccl.so.2 does not.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/reduce_copy.h"

namespace ringcc {

__global__ void copyKernel(RedOp op, const void* src, void* dst, size_t count) {
  reduceCopyPacked(ncclFloat32, op, src, nullptr, dst, nullptr, count, false,
                   blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x,
                   gridDim.x * static_cast<size_t>(blockDim.x));
}

}  // namespace ringcc

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      fprintf(stderr, "reduce_copy_bw: %s: %s\n", #x, cudaGetErrorString(e)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  const size_t bytes = size_t{1} << 30;  // 1 GiB: far beyond the L2
  const size_t count = bytes / 4;
  void *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMemset(src, 1, bytes));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const ringcc::RedOp op = ringcc::makeRedOp(ncclSum, ncclFloat32, 1);
  const int reps = 20;
  float msCopy = 0, msKernel = 0;
  for (int round = 0; round < 2; ++round) {  // the first round warms up
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i)
      CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&msCopy, a, b));
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) ringcc::copyKernel<<<4 * sms, 512>>>(op, src, dst, count);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&msKernel, a, b));
  }
  // Bytes moved: read + write.
  const double gbCopy = 2.0 * bytes * reps / (msCopy * 1e6);
  const double gbKernel = 2.0 * bytes * reps / (msKernel * 1e6);
  printf("reduce_copy_bw: cudaMemcpy D2D %.0f GB/s, reduce-copy kernel %.0f GB/s (%.0f%%)\n",
         gbCopy, gbKernel, 100.0 * gbKernel / gbCopy);
  return 0;
}
