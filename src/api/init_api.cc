// Entry points that create, query and end communicators.
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/api/api.h"
#include "src/base/log.h"
#include "src/bootstrap/grow.h"
#include "src/bootstrap/unique_id.h"
#include "src/core/engine.h"
#include "src/exec/group.h"
#include "src/init/comm_init.h"

using namespace ringcc;

namespace {

// Registers what an init call produced (also while it is still in progress).
ncclResult_t finishInit(ncclResult_t r, ncclComm_t* out) {
  if ((r == ncclSuccess || r == ncclInProgress) && *out) registerComm(*out);
  return r;
}

ncclResult_t checkRankArgs(int nranks, int rank, const char* where) {
  if (nranks < 1) return fail(ncclInvalidArgument, where, "nranks %d must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, where, "rank %d is out of range [0, %d)", rank, nranks);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  RINGCC_CHECK(checkNotNull(version, "version", "ncclGetVersion"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  RINGCC_CHECK(checkNotNull(uniqueId, "uniqueId", "ncclGetUniqueId"));
  return bootstrapGetUniqueId(uniqueId);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t* config) {
  const char* where = "ncclCommInitRankConfig";
  RINGCC_CHECK(checkNotNull(comm, "comm (output pointer)", where));
  *comm = nullptr;
  RINGCC_CHECK(checkRankArgs(nranks, rank, where));
  CommConfig cfg;
  RINGCC_CHECK(readConfig(config, where, &cfg));
  // Inside a group, init runs at ncclGroupEnd, concurrently with the group's other inits.
  return enqueueDeferred(
      [=] { return finishInit(commInitRank(comm, nranks, commId, rank, cfg), comm); });
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank) {
  const char* where = "ncclCommInitRank";
  RINGCC_CHECK(checkNotNull(comm, "comm (output pointer)", where));
  *comm = nullptr;
  RINGCC_CHECK(checkRankArgs(nranks, rank, where));
  return enqueueDeferred(
      [=] { return finishInit(commInitRank(comm, nranks, commId, rank, CommConfig{}), comm); });
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
         int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* where = "ncclCommInitRankScalable";
  RINGCC_CHECK(checkNotNull(newcomm, "newcomm (output pointer)", where));
  *newcomm = nullptr;
  RINGCC_CHECK(checkRankArgs(nranks, myrank, where));
  if (nId < 1 || nId > nranks)
    return fail(ncclInvalidArgument, where, "nId %d must be in [1, nranks=%d]", nId, nranks);
  RINGCC_CHECK(checkNotNull(commIds, "commIds", where));
  CommConfig cfg;
  RINGCC_CHECK(readConfig(config, where, &cfg));
  // Every rank holds the same ids in the same order; one root serves the rendezvous, the
  // others stay idle. (NCCL spreads ranks over the roots to speed up very large inits.)
  return finishInit(commInitRank(newcomm, nranks, commIds[0], myrank, cfg), newcomm);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  const char* where = "ncclCommInitAll";
  RINGCC_CHECK(checkNotNull(comms, "comms", where));
  if (ndev < 1) return fail(ncclInvalidArgument, where, "ndev %d must be at least 1", ndev);
  std::fill(comms, comms + ndev, nullptr);
  RINGCC_CHECK(commInitAll(comms, ndev, devlist));
  for (int i = 0; i < ndev; ++i) registerComm(comms[i]);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  const char* where = "ncclCommSplit";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  RINGCC_CHECK(checkNotNull(newcomm, "newcomm (output pointer)", where));
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, where, "color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
  CommConfig cfg = comm->config;
  if (config) RINGCC_CHECK(readConfig(config, where, &cfg));
  return finishInit(commSplit(comm, color, key, newcomm, cfg), newcomm);
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList,
         int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* where = "ncclCommShrink";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(newcomm, "newcomm (output pointer)", where));
  *newcomm = nullptr;
  if (excludeRanksCount < 0 || excludeRanksCount >= comm->nranks)
    return fail(ncclInvalidArgument, where, "excludeRanksCount %d must be in [0, nranks=%d)",
                excludeRanksCount, comm->nranks);
  if (excludeRanksCount > 0)
    RINGCC_CHECK(checkNotNull(excludeRanksList, "excludeRanksList", where));
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, where, "shrinkFlags 0x%x is not a known flag", shrinkFlags);
  std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
  for (int r : exclude) {
    if (r < 0 || r >= comm->nranks)
      return fail(ncclInvalidArgument, where, "excluded rank %d is out of range [0, %d)", r,
                  comm->nranks);
    if (r == comm->rank)
      return fail(ncclInvalidArgument, where,
                  "rank %d excludes itself; excluded ranks must not call ncclCommShrink", r);
  }
  CommConfig cfg = comm->config;
  if (config) RINGCC_CHECK(readConfig(config, where, &cfg));
  return finishInit(commShrink(comm, exclude, newcomm, cfg, shrinkFlags), newcomm);
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* where = "ncclCommGetUniqueId";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  RINGCC_CHECK(checkNotNull(uniqueId, "uniqueId", where));
  return commGrowId(comm, uniqueId);
}

// NCCL's rules: an existing rank passes its communicator and rank -1 (it keeps its rank), the
// coordinator (the rank that called ncclCommGetUniqueId) also the id, the others NULL; a new
// rank passes comm NULL, the id and its rank, at least the old size. nRanks exceeds the old
// size. A NULL config: the parent's (existing ranks) or the defaults (new ranks).
NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
         int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* where = "ncclCommGrow";
  RINGCC_CHECK(checkNotNull(newcomm, "newcomm (output pointer)", where));
  *newcomm = nullptr;
  if (comm != nullptr) {
    ApiGuard guard;
    RINGCC_CHECK(guard.enterReady(comm, where));
    if (rank != -1)
      return fail(ncclInvalidArgument, where,
                  "rank is %d; ranks of the existing communicator pass -1 (they keep theirs)",
                  rank);
    if (nRanks <= comm->nranks)
      return fail(ncclInvalidArgument, where, "nRanks %d must exceed the communicator's %d", nRanks,
                  comm->nranks);
    int growFrom = 0;
    if (uniqueId) RINGCC_CHECK(bootstrapGrowFrom(*uniqueId, where, &growFrom));
    CommConfig cfg = comm->config;
    if (config) RINGCC_CHECK(readConfig(config, where, &cfg));
    const ncclUniqueId id = uniqueId ? *uniqueId : ncclUniqueId{};
    const bool coordinator = uniqueId != nullptr;
    // Inside a group, the grow runs at ncclGroupEnd with the group's other inits and grows
    // (one thread may drive several ranks); the parent must still be live by then.
    return enqueueDeferred([=] {
      ApiGuard held;
      RINGCC_CHECK(held.enterReady(comm, where));
      return finishInit(commGrow(comm, nRanks, coordinator ? &id : nullptr, newcomm, cfg), newcomm);
    });
  }
  if (uniqueId == nullptr)
    return fail(ncclInvalidArgument, where,
                "comm and uniqueId are both NULL: a new rank passes the id of "
                "ncclCommGetUniqueId, an existing rank its communicator");
  if (rank == -1)
    return fail(ncclInvalidArgument, where,
                "comm is NULL and rank is -1: a new rank passes its rank in the grown "
                "communicator, an existing rank its communicator");
  int growFrom = 0;
  RINGCC_CHECK(bootstrapGrowFrom(*uniqueId, where, &growFrom));
  if (nRanks <= growFrom)
    return fail(ncclInvalidArgument, where,
                "nRanks %d must exceed the size %d of the communicator the uniqueId grows", nRanks,
                growFrom);
  if (rank < growFrom || rank >= nRanks)
    return fail(ncclInvalidArgument, where,
                "rank %d is out of range [%d, %d): ranks 0..%d are the existing ones, new "
                "ranks take the others",
                rank, growFrom, nRanks, growFrom - 1);
  CommConfig cfg;
  RINGCC_CHECK(readConfig(config, where, &cfg));
  const ncclUniqueId id = *uniqueId;
  return enqueueDeferred(
      [=] { return finishInit(commGrowJoin(nRanks, id, rank, newcomm, cfg), newcomm); });
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommFinalize"));
  if (comm->revoked.load())
    return fail(ncclInvalidUsage, "ncclCommFinalize", "communicator was revoked");
  return commFinalize(comm);
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "ncclCommRevoke", "revokeFlags must be 0, not %d",
                revokeFlags);
  return commRevoke(comm);
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  RINGCC_CHECK(checkComm(comm, "ncclCommDestroy"));
  unregisterComm(comm);
  return commDestroy(comm);
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  RINGCC_CHECK(checkComm(comm, "ncclCommAbort"));
  unregisterComm(comm);
  return commAbort(comm);
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommGetAsyncError"));
  RINGCC_CHECK(checkNotNull(asyncError, "asyncError", "ncclCommGetAsyncError"));
  // Work handed off earlier (a CUDA kernel) may have stopped since: its error becomes the
  // communicator's. Not while a non-blocking init may still be making the engine.
  if (comm->asyncError.load() == ncclSuccess && comm->engine) {
    ncclResult_t found = comm->engine->pollAsyncError();
    if (found != ncclSuccess) comm->recordError(found);
  }
  *asyncError = static_cast<ncclResult_t>(comm->asyncError.load());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommCount"));
  RINGCC_CHECK(checkNotNull(count, "count", "ncclCommCount"));
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommCuDevice"));
  RINGCC_CHECK(checkNotNull(device, "device", "ncclCommCuDevice"));
  *device = comm->cudaDev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ncclCommUserRank"));
  RINGCC_CHECK(checkNotNull(rank, "rank", "ncclCommUserRank"));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) { return errorString(result); }

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  // The calling thread's last error: raised on it, or the cause of a call of it whose work
  // failed on another thread (engine or init helper threads). A thread with none gets
  // `comm`'s first error, if comm has one (say, a non-blocking init that failed on its own
  // thread), else "" (as NCCL with no error). NCCL keeps one text per process and ignores
  // comm. The text lives until this thread's next ncclGetLastError.
  thread_local std::string text;
  text = lastErrorMessage();
  if (text.empty()) {
    ApiGuard guard;  // keeps comm alive while we read it; no error if it is not live
    if (guard.tryEnter(comm)) text = comm->firstError().message;
  }
  return text.c_str();
}

NCCL_API(void, ncclResetDebugInit, void) { resetLogging(); }

// Exported by NVIDIA's library too; same job as ncclResetDebugInit.
NCCL_API(void, ncclResetDebugInitInternal, void) { resetLogging(); }
