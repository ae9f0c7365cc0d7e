// One operation as the API hands it on: what to do, on which buffers, for which
// communicator. Checked by src/api before it is made; plain data from here on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/red_op.h"
#include "nccl.h"
#include "src/sched/builders.h"

struct ncclComm;

namespace ringcc {

struct CollArgs {
  Coll kind = Coll::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // per-rank count as in the API (all-gather: sendcount, ...)
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  // The operator resolved when the call was made (a PreMulSum handle may be destroyed as soon
  // as the call returns, before its group ends, as NCCL allows).
  RedOp redOp = {};
  int root = 0;  // root for rooted collectives, peer for send/recv
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  uint64_t callUs = 0;  // when the call was made: set only while tracing (src/trace/trace.h)
};

}  // namespace ringcc
