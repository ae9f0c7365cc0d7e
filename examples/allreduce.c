/*
 * A minimal program against ringcc's NCCL API: one process, NRANKS communicators made with
 * ncclCommInitAll, one grouped all-reduce (sum) over host buffers, the result checked.
 *
 * ringcc's communicators are host communicators: buffers are host pointers, the stream
 * argument is ignored, and a call returns when its result is in the output buffer.
 *
 * It also prints the library's version (ncclGetVersion) and fails when the library loaded is
 * not ringcc's: NVIDIA's libnccl.so.2 has the same name, and the loader may find it first.
 * Only ringcc exports ringccGetVersion (ringcc.h), so the program looks it up. See the README,
 * "Building a program against ringcc".
 *
 *   cc examples/allreduce.c $(pkg-config --cflags --libs nccl) -o allreduce && ./allreduce
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define NRANKS 4
#define COUNT 1024

#define CHECK(call)                                                                 \
  do {                                                                              \
    ncclResult_t r_ = (call);                                                       \
    if (r_ != ncclSuccess) {                                                        \
      fprintf(stderr, "allreduce: %s failed: %s\n", #call, ncclGetErrorString(r_)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version));
  printf("ncclGetVersion: %d\n", version);
  ncclResult_t (*ringccGetVersion)(int*) =
      (ncclResult_t(*)(int*))dlsym(RTLD_DEFAULT, "ringccGetVersion");
  if (ringccGetVersion == NULL) {
    fprintf(stderr,
            "allreduce: the libnccl.so.2 loaded is not ringcc's (no ringccGetVersion; "
            "ncclGetVersion %d); another NCCL was found first\n",
            version);
    return 1;
  }
  CHECK(ringccGetVersion(&version));
  printf("ringccGetVersion: %d\n", version);

  ncclComm_t comms[NRANKS];
  CHECK(ncclCommInitAll(comms, NRANKS, NULL));

  float* send[NRANKS];
  float* recv[NRANKS];
  for (int r = 0; r < NRANKS; ++r) {
    send[r] = malloc(COUNT * sizeof(float));
    recv[r] = malloc(COUNT * sizeof(float));
    if (!send[r] || !recv[r]) {
      fprintf(stderr, "allreduce: out of memory\n");
      return 1;
    }
    for (int i = 0; i < COUNT; ++i) send[r][i] = (float)(r + 1) * (float)(i % 7);
  }

  /* One thread drives every rank, so the calls are grouped. */
  CHECK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r)
    CHECK(ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, comms[r], NULL));
  CHECK(ncclGroupEnd());

  int errors = 0;
  const float rankSum = NRANKS * (NRANKS + 1) / 2.0f; /* 1 + 2 + ... + NRANKS */
  for (int r = 0; r < NRANKS; ++r)
    for (int i = 0; i < COUNT; ++i)
      if (recv[r][i] != rankSum * (float)(i % 7)) ++errors;

  for (int r = 0; r < NRANKS; ++r) {
    CHECK(ncclCommDestroy(comms[r]));
    free(send[r]);
    free(recv[r]);
  }
  if (errors) {
    fprintf(stderr, "allreduce: %d wrong values\n", errors);
    return 1;
  }
  printf("allreduce: %d ranks, %d floats: OK\n", NRANKS, COUNT);
  return 0;
}
