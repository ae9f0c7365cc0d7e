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

ncclResult_t ringccCommMemoryKind(ncclComm_t comm, ringccMemKind_t* kind);

#ifdef __cplusplus
}
#endif

#endif /* RINGCC_H_ */
