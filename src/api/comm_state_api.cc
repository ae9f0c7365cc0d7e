// Communicator calls of NCCL 2.29-2.32 beyond init and teardown: suspending its memory, and
// what memory it holds. (Growing, ncclCommGetUniqueId and ncclCommGrow, is in init_api.cc.)
//
// ncclCommSuspend is collective, between operations: every rank calls it once its operations
// on the communicator are done (as NCCL requires: its peers' memory is registered with it).
// With NCCL_SUSPEND_MEM a communicator closes every connection (FIFO memory, shared-memory
// segments, network endpoints) and frees its workspace after a barrier of the ranks, so no
// peer still waits on a connection; until ncclCommResume every call that would use it answers
// ncclInvalidUsage saying it is suspended, and the first operation after the resume makes the
// connections anew. ncclCommMemStats counts the communicator's memory in its own kind: a host
// communicator's stats are host memory (the memory NCCL's stats would count is the memory the
// communicator runs on), a CUDA communicator's its GPU's (and the host memory it maps for it).
// A CUDA communicator first waits for its own kernels (CommEngine::finishQueued), then joins
// the barrier: past it no rank's kernel still uses a connection.
#include "src/api/api.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/config.h"
#include "src/core/engine.h"

using namespace ringcc;

namespace {

// Bytes the communicator would free when suspended, and what it keeps.
CommEngine::Memory commMemory(const ncclComm* comm) {
  CommEngine::Memory m = comm->engine ? comm->engine->memory() : CommEngine::Memory{};
  m.releasable += comm->hostScratch.capacity();  // Adasum's workspace
  return m;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  const char* where = "ncclCommSuspend";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return fail(ncclInvalidArgument, where, "flags 0x%x: only NCCL_SUSPEND_MEM (0x%x) is known",
                flags, NCCL_SUSPEND_MEM);
  if (flags & NCCL_SUSPEND_MEM) {
    // Every rank is past its last operation, kernels included, before any connection closes:
    // a peer still inside one would see this side close and fail.
    RINGCC_CHECK(comm->engine->finishQueued());
    RINGCC_CHECK(comm->bootstrap->barrier());
    RINGCC_CHECK(comm->engine->releaseMemory());
    std::vector<unsigned char>().swap(comm->hostScratch);
  }
  comm->suspended.store(true);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  const char* where = "ncclCommResume";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where, /*suspendedOk=*/true));
  if (!comm->suspended.load())
    return fail(ncclInvalidUsage, where, "communicator is not suspended (no ncclCommSuspend)");
  // Nothing to restore up front: each connection is made again by the first operation that
  // needs it, with its peer, as at init.
  comm->suspended.store(false);
  return ncclSuccess;
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
  if (comm->asyncError.load() == ncclInProgress)
    return fail(ncclInvalidUsage, where, "communicator is still initializing");
  const CommEngine::Memory m = commMemory(comm);
  switch (which) {
    case ncclStatGpuMemSuspend:
      *value = m.releasable;
      break;
    case ncclStatGpuMemSuspended:
      *value = comm->suspended.load() ? 1 : 0;
      break;
    case ncclStatGpuMemPersist:
      *value = m.persistent;
      break;
    default:  // ncclStatGpuMemTotal
      *value = m.releasable + m.persistent;
      break;
  }
  return ncclSuccess;
}
