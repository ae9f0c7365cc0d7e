// GPU check (tests/gpu/run.sh; needs a GPU and the driver): loads the batch kernel embedded in
// libnccl's objects through the lazily opened driver, the way a CUDA communicator will, and
// launches it on an empty batch and on a batch whose block finds no job of its channel, then
// synchronises. Checks that the fatbin suits this GPU, that the kernel's name and argument
// block match the host's, and that a launch returns. Exit 0 ok; 1 failed (reason printed).
#include <cstdio>
#include <cstring>

#include "kernels/cuda/batch_args.h"
#include "src/base/cuda_driver.h"
#include "src/base/error.h"
#include "src/cuda/kernel_module.h"

using namespace ringcc;

namespace {

int failed(const char* what, const CudaDriver* cu, CuResult r) {
  char name[96] = "";
  if (cu) cuErrorName(*cu, r, name, sizeof name);
  fprintf(stderr, "kernel_launch: %s %s %s\n", what, name, lastErrorMessage().c_str());
  return 1;
}

}  // namespace

int main() {
  const CudaDriver* cu = nullptr;
  if (cudaDriver(&cu, "kernel_launch") != ncclSuccess) return failed("no driver:", nullptr, 0);
  CuContext ctx = nullptr;
  CuResult r = cu->cuDevicePrimaryCtxRetain(&ctx, 0);
  if (r == kCuSuccess) r = cu->cuCtxSetCurrent(ctx);
  if (r != kCuSuccess) return failed("device 0's context:", cu, r);
  CuFunction fn = nullptr;
  if (kernelFunction(*cu, Kernel::Batch, &fn) != ncclSuccess) return failed("loading:", cu, 0);

  CuDevicePtr scratch = 0, status = 0;
  r = cu->cuMemAlloc(&scratch, 2 * sizeof(ChannelScratch));
  if (r == kCuSuccess) r = cu->cuMemAlloc(&status, 2 * sizeof(uint32_t));
  if (r == kCuSuccess) r = cu->cuMemsetD8(status, 0, 2 * sizeof(uint32_t));
  if (r != kCuSuccess) return failed("cuMemAlloc:", cu, r);
  static BatchArgs args;
  std::memset(&args, 0, sizeof args);
  args.scratch = reinterpret_cast<ChannelScratch*>(scratch);
  args.status = reinterpret_cast<uint32_t*>(status);
  for (uint32_t blocks : {1u, 2u}) {
    args.nBlocks = blocks;
    // Two blocks, no job on channel 1 and an empty job list: every block returns at once.
    void* params[] = {&args};
    r = cu->cuLaunchKernel(fn, blocks, 1, 1, kLaunchThreads, 1, 1, 0, nullptr, params, nullptr);
    if (r != kCuSuccess) return failed("cuLaunchKernel:", cu, r);
    r = cu->cuStreamSynchronize(nullptr);
    if (r != kCuSuccess) return failed("the kernel:", cu, r);
  }
  uint32_t st[2] = {9, 9};
  r = cu->cuMemcpyDtoH(st, status, sizeof st);
  if (r != kCuSuccess) return failed("cuMemcpyDtoH:", cu, r);
  if (st[0] != kBlockOk || st[1] != kBlockOk) {
    fprintf(stderr, "kernel_launch: blocks reported status %u %u on an empty batch\n", st[0],
            st[1]);
    return 1;
  }
  cu->cuMemFree(scratch);
  cu->cuMemFree(status);
  printf("kernel_launch: batch kernel loaded (%zu-byte fatbin) and launched: ok\n", [] {
    size_t n = 0;
    batchKernelImage(&n);
    return n;
  }());
  return 0;
}
