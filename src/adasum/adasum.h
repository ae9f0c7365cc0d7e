// ringccAllReduceAdasum on host communicators: vector-halving, distance-doubling over the
// engine's send/recv, the dot products of each level summed among the ranks that share a
// piece (docs/adasum.md has the definition and the schedule).
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace ringcc {

// Arguments checked by the caller: a host communicator, a floating type of Adasum's four,
// segments summing to count (segments == nullptr: one segment of count). recvbuff holds
// the result on every rank; sendbuff may equal recvbuff.
ncclResult_t adasumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, const size_t* segments, int nsegments,
                             ncclComm* comm);

}  // namespace ringcc
