// ringccAllReduceAdasum on host and CUDA communicators: vector-halving, distance-doubling over
// the engine's send/recv, the dot products of each level summed among the ranks that share a
// piece (docs/adasum.md has the definition and the schedule).
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace ringcc {

// Arguments checked by the caller: a floating type of Adasum's four, segments summing to
// count (segments == nullptr: one segment of count), buffers of the communicator's memory
// kind. recvbuff holds the result on every rank; sendbuff may equal recvbuff. On a CUDA
// communicator every step is queued on `stream` and the call returns before it ran.
ncclResult_t adasumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, const size_t* segments, int nsegments,
                             ncclComm* comm, cudaStream_t stream);

}  // namespace ringcc
