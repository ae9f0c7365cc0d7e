// One operation as the API hands it on: what to do, on which buffers, for which
// communicator. Checked by src/api before it is made; plain data from here on.
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace ringcc {

enum class CollKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv,
};

const char* collName(CollKind kind);

struct CollArgs {
  CollKind kind = CollKind::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // per-rank count as in the API (all-gather: sendcount, ...)
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  // root for rooted collectives, peer for send/recv
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
};

}  // namespace ringcc
