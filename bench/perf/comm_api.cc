#include "bench/perf/comm_api.h"

namespace ringcc::bench {

std::vector<std::string> missingEntries(const CommApi& api, CollKind kind, bool mulsum,
                                        bool multiProcess) {
  std::vector<std::string> missing;
  auto need = [&](const void* fn, const char* name) {
    if (!fn) missing.push_back(name);
  };
  need(reinterpret_cast<const void*>(api.commInitAll), "ncclCommInitAll");
  need(reinterpret_cast<const void*>(api.commInitRank), "ncclCommInitRank");
  need(reinterpret_cast<const void*>(api.commDestroy), "ncclCommDestroy");
  need(reinterpret_cast<const void*>(api.commAbort), "ncclCommAbort");
  need(reinterpret_cast<const void*>(api.groupStart), "ncclGroupStart");
  need(reinterpret_cast<const void*>(api.groupEnd), "ncclGroupEnd");
  need(reinterpret_cast<const void*>(api.getErrorString), "ncclGetErrorString");
  if (multiProcess) need(reinterpret_cast<const void*>(api.getUniqueId), "ncclGetUniqueId");
  switch (kind) {
    case CollKind::AllReduce: need(reinterpret_cast<const void*>(api.allReduce), "ncclAllReduce"); break;
    case CollKind::AllGather: need(reinterpret_cast<const void*>(api.allGather), "ncclAllGather"); break;
    case CollKind::Broadcast: need(reinterpret_cast<const void*>(api.broadcast), "ncclBroadcast"); break;
    case CollKind::Reduce: need(reinterpret_cast<const void*>(api.reduce), "ncclReduce"); break;
    case CollKind::ReduceScatter:
      need(reinterpret_cast<const void*>(api.reduceScatter), "ncclReduceScatter");
      break;
    case CollKind::AlltoAll:
      if (!api.alltoAll) {
        need(reinterpret_cast<const void*>(api.send), "ncclAlltoAll or ncclSend");
        need(reinterpret_cast<const void*>(api.recv), "ncclAlltoAll or ncclRecv");
        need(reinterpret_cast<const void*>(api.commCount), "ncclCommCount");
      }
      break;
    case CollKind::SendRecv:
      need(reinterpret_cast<const void*>(api.send), "ncclSend");
      need(reinterpret_cast<const void*>(api.recv), "ncclRecv");
      need(reinterpret_cast<const void*>(api.commCount), "ncclCommCount");
      need(reinterpret_cast<const void*>(api.commUserRank), "ncclCommUserRank");
      break;
  }
  if (mulsum) {
    need(reinterpret_cast<const void*>(api.redOpCreatePreMulSum), "ncclRedOpCreatePreMulSum");
    need(reinterpret_cast<const void*>(api.redOpDestroy), "ncclRedOpDestroy");
  }
  return missing;
}

}  // namespace ringcc::bench
