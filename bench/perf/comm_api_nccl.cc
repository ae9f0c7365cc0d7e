// libnccl.so.2's entry points, referenced weakly (see comm_api.h).
#include "bench/perf/comm_api.h"

#pragma weak ncclGetVersion
#pragma weak ncclGetUniqueId
#pragma weak ncclCommInitRank
#pragma weak ncclCommInitAll
#pragma weak ncclCommDestroy
#pragma weak ncclCommAbort
#pragma weak ncclCommCount
#pragma weak ncclCommUserRank
#pragma weak ncclGroupStart
#pragma weak ncclGroupEnd
#pragma weak ncclAllReduce
#pragma weak ncclAllGather
#pragma weak ncclReduceScatter
#pragma weak ncclBroadcast
#pragma weak ncclReduce
#pragma weak ncclAlltoAll
#pragma weak ncclSend
#pragma weak ncclRecv
#pragma weak ncclRedOpCreatePreMulSum
#pragma weak ncclRedOpDestroy
#pragma weak ncclGetErrorString
#pragma weak ncclGetLastError
#pragma weak ringccCommMemoryKind

namespace ringcc::bench {

const CommApi& ncclCommApi() {
  static const CommApi api = [] {
    CommApi a;
    a.getVersion = ncclGetVersion;
    a.getUniqueId = ncclGetUniqueId;
    a.commInitRank = ncclCommInitRank;
    a.commInitAll = ncclCommInitAll;
    a.commDestroy = ncclCommDestroy;
    a.commAbort = ncclCommAbort;
    a.commCount = ncclCommCount;
    a.commUserRank = ncclCommUserRank;
    a.groupStart = ncclGroupStart;
    a.groupEnd = ncclGroupEnd;
    a.allReduce = ncclAllReduce;
    a.allGather = ncclAllGather;
    a.reduceScatter = ncclReduceScatter;
    a.broadcast = ncclBroadcast;
    a.reduce = ncclReduce;
    a.alltoAll = ncclAlltoAll;
    a.send = ncclSend;
    a.recv = ncclRecv;
    a.redOpCreatePreMulSum = ncclRedOpCreatePreMulSum;
    a.redOpDestroy = ncclRedOpDestroy;
    a.getErrorString = ncclGetErrorString;
    a.getLastError = ncclGetLastError;
    a.commMemoryKind = ringccCommMemoryKind;
    return a;
  }();
  return api;
}

}  // namespace ringcc::bench
