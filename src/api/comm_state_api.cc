// Communicator calls of NCCL 2.29-2.32 beyond init and teardown: suspending its memory, and
// what memory it holds. (Growing, ncclCommGetUniqueId and ncclCommGrow, is in init_api.cc.)
//
// ncclCommMemStats is answered truthfully where ringcc knows: a host communicator holds no GPU
// memory, and none is ever suspended. Suspending is not implemented yet: its
// arguments are checked as NCCL checks them (ncclInvalidArgument naming the argument), then
// they answer ncclInvalidUsage with a WARN saying so; never a silent success.
#include "src/api/api.h"
#include "src/core/config.h"

using namespace ringcc;

namespace {

ncclResult_t notImplemented(const char* name, const char* why) {
  return fail(ncclInvalidUsage, name, "%s is not implemented in ringcc yet (%s)", name, why);
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  const char* where = "ncclCommSuspend";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return fail(ncclInvalidArgument, where, "flags 0x%x: only NCCL_SUSPEND_MEM (0x%x) is known",
                flags, NCCL_SUSPEND_MEM);
  return notImplemented(where, "its memory stays allocated");
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  const char* where = "ncclCommResume";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  return notImplemented(where, "no communicator is ever suspended");
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* where = "ncclCommMemStats";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(value, "value", where));
  int which;
  static_assert(sizeof(which) == sizeof(stat), "NCCL's enums are int-sized");
  __builtin_memcpy(&which, &stat, sizeof which);  // C callers may pass any int
  if (which < ncclStatGpuMemSuspend || which > ncclStatGpuMemTotal)
    return fail(ncclInvalidArgument, where, "stat %d is not a ncclCommMemStat_t", which);
  if (comm->memKind == MemoryKind::Cuda)
    return notImplemented(where,
                          "the GPU memory of CUDA communicators is not counted yet; host "
                          "communicators answer");
  // A host communicator's slots, segments and workspaces are host memory: it holds no GPU
  // memory, and nothing is ever suspended.
  *value = 0;
  return ncclSuccess;
}
