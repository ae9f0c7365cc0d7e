// Compiles the device-clean reduce-copy and the Program runner for the GPU: trivial kernels
// reach every datatype x op through the runtime dispatcher (the element walk, the strided form
// and the 16-byte packed form the kernels use) and drive the runner's three phases the way a
// channel's block will, so nvcc checks the whole header set for every target architecture.
// Nothing launches them yet; the CUDA executor's kernels will include the same headers.
#include "kernels/cuda/device_sync.h"
#include "kernels/prims.h"
#include "kernels/reduce_copy.h"

namespace ringcc {

// Every thread of the block takes its share of the elements, as a channel's block will.
__global__ void reduceCopyProbeKernel(ncclDataType_t type, RedOp op, const void* local,
                                      const void* peer, void* dst0, void* dst1, size_t count,
                                      bool applyPost) {
  if (blockIdx.x == 0) {
    reduceCopyStrided(type, op, local, peer, dst0, dst1, count, applyPost, threadIdx.x, blockDim.x);
  } else if (threadIdx.x == 0) {
    reduceCopy(type, op, local, peer, dst0, dst1, count, applyPost);
  }
}

// The packed form as the kernels use it: every thread of every block is one worker, so
// neighbouring threads take neighbouring 16-byte packs.
__global__ void reduceCopyPackedProbeKernel(ncclDataType_t type, RedOp op, const void* local,
                                            const void* peer, void* dst0, void* dst1, size_t count,
                                            bool applyPost) {
  reduceCopyPacked(type, op, local, peer, dst0, dst1, count, applyPost,
                   blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x,
                   gridDim.x * static_cast<size_t>(blockDim.x));
}

// One channel's block running a bound Program: thread 0 acquires a slice, every thread does
// its share of the reduce-copy, thread 0 publishes it. The runner lives in global memory (it
// holds per-lane state for up to kMaxLanes lanes).
__global__ void runProgramProbeKernel(ProgramRunner* runner) {
  __shared__ Slice slice;
  __shared__ int status;
  DeviceSync sync;
  for (;;) {
    if (threadIdx.x == 0) {
      RunError error = kRunOk;
      status = runner->acquire(sync, &slice, &error);
    }
    __syncthreads();
    if (status != kRunReady) return;  // done, error, or blocked: the host looks again later
    runner->reduceCopy(slice, threadIdx.x, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0) runner->publish(sync, slice);
    __syncthreads();
  }
}

// The conversions, one thread per element, for comparison with CUDA's own types later.
__global__ void convertProbeKernel(const float* in, uint8_t* e4m3, uint8_t* e5m2, uint16_t* half,
                                   uint16_t* bf16, float* back, size_t count) {
  size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  e4m3[k] = floatToFp8e4m3(in[k]).bits;
  e5m2[k] = floatToFp8e5m2(in[k]).bits;
  half[k] = floatToHalf(in[k]).bits;
  bf16[k] = floatToBf16(in[k]).bits;
  back[k] = halfToFloat(Half{half[k]}) + bf16ToFloat(BFloat16{bf16[k]}) +
            fp8e4m3ToFloat(Fp8E4M3{e4m3[k]}) + fp8e5m2ToFloat(Fp8E5M2{e5m2[k]});
}

}  // namespace ringcc
