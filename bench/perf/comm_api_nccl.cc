// libnccl.so.2's entry points, looked up when the program starts (see comm_api.h).
//
// dlsym instead of plain references: a tool built while the library lacks an entry point
// still links and starts, and says which one is missing; and it picks up whatever
// libnccl.so.2 (or LD_PRELOAD) provides at run time.
#include <dlfcn.h>

#include "bench/perf/comm_api.h"

namespace ringcc::bench {
namespace {

template <typename Fn>
void lookup(Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

const CommApi& ncclCommApi() {
  static const CommApi api = [] {
    CommApi a;
    lookup(a.getVersion, "ncclGetVersion");
    lookup(a.getUniqueId, "ncclGetUniqueId");
    lookup(a.commInitRank, "ncclCommInitRank");
    lookup(a.commInitAll, "ncclCommInitAll");
    lookup(a.commDestroy, "ncclCommDestroy");
    lookup(a.commAbort, "ncclCommAbort");
    lookup(a.commCount, "ncclCommCount");
    lookup(a.commUserRank, "ncclCommUserRank");
    lookup(a.groupStart, "ncclGroupStart");
    lookup(a.groupEnd, "ncclGroupEnd");
    lookup(a.allReduce, "ncclAllReduce");
    lookup(a.allGather, "ncclAllGather");
    lookup(a.reduceScatter, "ncclReduceScatter");
    lookup(a.broadcast, "ncclBroadcast");
    lookup(a.reduce, "ncclReduce");
    lookup(a.alltoAll, "ncclAlltoAll");
    lookup(a.send, "ncclSend");
    lookup(a.recv, "ncclRecv");
    lookup(a.redOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
    lookup(a.redOpDestroy, "ncclRedOpDestroy");
    lookup(a.getErrorString, "ncclGetErrorString");
    lookup(a.getLastError, "ncclGetLastError");
    lookup(a.commMemoryKind, "ringccCommMemoryKind");
    lookup(a.memAlloc, "ncclMemAlloc");
    lookup(a.memFree, "ncclMemFree");
    return a;
  }();
  return api;
}

}  // namespace ringcc::bench
