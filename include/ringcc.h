/*
 * ringcc's own extensions to the NCCL API. Include after (or instead of) nccl.h.
 *
 * Everything here is optional: a program written for NCCL never needs it. Tools that want
 * to know where a communicator's buffers must live (the perf tools, tests) ask here.
 */
#ifndef RINGCC_H_
#define RINGCC_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a communicator's buffers live. Host communicators take host pointers and complete
 * every call before it returns; CUDA communicators take device pointers and are
 * stream-ordered, as in NCCL. Chosen at init: RINGCC_DEVICE=host|cuda, else host wherever no
 * GPU is usable. */
typedef enum { ringccMemHost = 0, ringccMemCuda = 1 } ringccMemKind_t;

/* Telling ringcc from NVIDIA's NCCL. Both are libnccl.so.2 with the same API, and ncclGetVersion
 * gives the NCCL version whose API the library implements (23203: 2.32.3, for ringcc too), so
 * that version checks in programs written for NCCL keep working. Only ringcc exports
 * ringccGetVersion: look it up with dlsym (a NULL answer means another NCCL was loaded); it
 * gives RINGCC_VERSION_CODE. Which calls ringcc implements, and which answer ncclInvalidUsage
 * "not implemented in ringcc yet", is in docs/api.md. */
#define RINGCC_VERSION_CODE 23203
ncclResult_t ringccGetVersion(int* version);

ncclResult_t ringccCommMemoryKind(ncclComm_t comm, ringccMemKind_t* kind);

/* Adasum all-reduce (docs/adasum.md): every rank receives the adaptive sum of the ranks'
 * vectors, where two vectors combine as
 *   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 * (aligned gradients are averaged, orthogonal ones added), pairing ranks as a binary tree:
 * with p the largest power of two <= nranks, rank i < nranks - p first takes
 * adasum(v_i, v_{p+i}); then for d = 1, 2, ..., p/2, v_s = adasum(v_s, v_{s+d}) for every s
 * divisible by 2d; the result is v_0. Products are summed in double for every type.
 * datatype: ncclFloat16, ncclBfloat16, ncclFloat32 or ncclFloat64. segments == NULL (or
 * nsegments == 0): the buffer is one vector; otherwise segments[0..nsegments) are element
 * counts summing to count, each its own vector (a fused bucket of several tensors). In place
 * (sendbuff == recvbuff) is allowed. Inside a group it runs at ncclGroupEnd, after the
 * group's other operations. On a CUDA communicator every step is queued on `stream` and
 * the call returns before it ran, as any collective. */
ncclResult_t ringccAllReduceAdasum(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, const size_t* segments,
                                   int nsegments, ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RINGCC_H_ */
