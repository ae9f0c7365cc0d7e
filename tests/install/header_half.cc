// Built by header_cuda.sh, outside the build, the way nccl-tests builds against a drop-in:
// `-I<ringcc>/include -I/usr/local/cuda/include`, only nccl.h included. It uses CUDA's `half`
// and `__nv_bfloat16` (which need nccl.h to include cuda_fp16.h and cuda_bf16.h, as NVIDIA's
// does), then runs a half all-reduce over two host communicators to show that the program
// links and runs against ringcc's libnccl.so.2 (NVIDIA's would need a GPU).
#include <stdio.h>

#include "nccl.h"

#ifndef RINGCC_NCCL_H
#error "NVIDIA's nccl.h was picked up instead of ringcc's"
#endif

int main() {
  static_assert(sizeof(half) == 2, "CUDA's half is two bytes");
  static_assert(sizeof(__nv_bfloat16) == 2, "CUDA's bfloat16 is two bytes");
  const int kCount = 4;
  half buf[2][kCount];
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < kCount; ++i) buf[r][i] = __float2half(static_cast<float>(r + i) + 0.5f);

  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitAll failed\n");
    return 1;
  }
  if (ncclGroupStart() != ncclSuccess) return 1;
  for (int r = 0; r < 2; ++r) {
    if (ncclAllReduce(buf[r], buf[r], kCount, ncclHalf, ncclSum, comms[r], nullptr) !=
        ncclSuccess) {
      fprintf(stderr, "ncclAllReduce failed\n");
      return 1;
    }
  }
  if (ncclGroupEnd() != ncclSuccess) return 1;
  int bad = 0;
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < kCount; ++i) {
      float want = static_cast<float>(2 * i + 1) + 1.0f;  // (0+i+.5) + (1+i+.5)
      float got = __half2float(buf[r][i]);
      if (got != want) {
        fprintf(stderr, "rank %d element %d: %g, expected %g\n", r, i, got, want);
        bad = 1;
      }
    }
  }
  __nv_bfloat16 b = __float2bfloat16(3.0f);
  if (__bfloat162float(b) != 3.0f) bad = 1;
  for (int r = 0; r < 2; ++r) ncclCommDestroy(comms[r]);
  if (!bad) printf("half all-reduce through ringcc: ok\n");
  return bad;
}
