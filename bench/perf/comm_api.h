// The library entry points the perf driver calls, as a table of function pointers.
//
// The tools get the table of libnccl.so.2 (ncclCommApi(), looked up with dlsym): an entry point
// the library does not provide (yet) is a null pointer and the driver says so instead of
// failing to link or load. Tests hand the driver a table of their own.
#pragma once

#include <string>
#include <vector>

#include "bench/perf/coll_spec.h"
#include "nccl.h"
#include "ringcc.h"

namespace ringcc::bench {

struct CommApi {
  ncclResult_t (*getVersion)(int*) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commCount)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*commUserRank)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                         ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                           cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                                       ncclComm_t) = nullptr;
  ncclResult_t (*redOpDestroy)(ncclRedOp_t, ncclComm_t) = nullptr;
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  const char* (*getLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*commMemoryKind)(ncclComm_t, ringccMemKind_t*) = nullptr;  // optional
  // -R 1 (host buffers from the library: ringcc maps them between processes, one copy)
  ncclResult_t (*memAlloc)(void**, size_t) = nullptr;
  ncclResult_t (*memFree)(void*) = nullptr;
};

// libnccl.so.2's entry points (null where it lacks one).
const CommApi& ncclCommApi();

// Entry points a run of `kind` needs that `api` lacks (empty: it can run). `mulsum`: the run
// uses the premultiplied-sum operator. Alternatives count as present (all-to-all without
// ncclAlltoAll runs on grouped send/recv).
std::vector<std::string> missingEntries(const CommApi& api, CollKind kind, bool mulsum,
                                        bool multiProcess);

}  // namespace ringcc::bench
