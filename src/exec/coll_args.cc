#include "src/exec/coll_args.h"

namespace ringcc {

const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::Reduce: return "Reduce";
    case CollKind::AllGather: return "AllGather";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::AlltoAll: return "AlltoAll";
    case CollKind::Gather: return "Gather";
    case CollKind::Scatter: return "Scatter";
    case CollKind::Send: return "Send";
    case CollKind::Recv: return "Recv";
  }
  return "?";
}

}  // namespace ringcc
