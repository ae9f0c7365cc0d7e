/*
 * ringcc's own extensions to the NCCL API.
 *
 * (Placeholder written by the benchmarks branch: the lead's version of this header replaces it.
 * It declares only what the perf tools need.)
 */
#ifndef RINGCC_H_
#define RINGCC_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a communicator's buffers live: host memory (calls complete before they return) or CUDA
 * device memory (stream-ordered, asynchronous like NCCL). Fixed at init. */
typedef enum { ringccMemHost = 0, ringccMemCuda = 1 } ringccMemKind_t;

ncclResult_t ringccCommMemoryKind(ncclComm_t comm, ringccMemKind_t* kind);

#ifdef __cplusplus
}
#endif

#endif /* RINGCC_H_ */
