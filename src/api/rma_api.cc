// NCCL's one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal) and window pointers.
// They work on memory windows (ncclCommWindowRegister), which ringcc does not provide: the
// arguments are checked (ncclInvalidArgument naming the argument), then each call answers
// ncclInvalidUsage with a WARN saying it is not implemented; never a silent success.
#include <cstring>

#include "src/api/api.h"

using namespace ringcc;

namespace {

ncclResult_t notImplemented(const char* name) {
  return fail(ncclInvalidUsage, name,
              "%s is not implemented in ringcc yet (one-sided operations need memory windows, "
              "which ringcc does not provide)",
              name);
}

ncclResult_t checkPeer(const ncclComm* comm, int peer, const char* what, const char* where) {
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, where, "%s %d is out of range [0, %d)", what, peer,
                comm->nranks);
  return ncclSuccess;
}

ncclResult_t checkSignal(int sigIdx, int ctx, const char* where) {
  if (sigIdx < 0) return fail(ncclInvalidArgument, where, "sigIdx %d must be >= 0", sigIdx);
  if (ctx < 0) return fail(ncclInvalidArgument, where, "ctx %d must be >= 0", ctx);
  return ncclSuccess;
}

ncclResult_t checkFlags(unsigned int flags, const char* where) {
  if (flags != 0) return fail(ncclInvalidArgument, where, "flags 0x%x: reserved, must be 0", flags);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
         unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)peerWinOffset, (void)stream;
  const char* where = "ncclPutSignal";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  int type;
  std::memcpy(&type, &datatype, sizeof type);  // C callers may pass any int
  if (type < 0 || type >= ncclNumTypes)
    return fail(ncclInvalidArgument, where, "datatype %d is not a valid ncclDataType_t", type);
  if (count > 0) RINGCC_CHECK(checkNotNull(localbuff, "localbuff", where));
  RINGCC_CHECK(checkPeer(comm, peer, "peer", where));
  RINGCC_CHECK(checkNotNull(peerWin, "peerWin", where));
  RINGCC_CHECK(checkSignal(sigIdx, ctx, where));
  RINGCC_CHECK(checkFlags(flags, where));
  return notImplemented(where);
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  const char* where = "ncclSignal";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  RINGCC_CHECK(checkPeer(comm, peer, "peer", where));
  RINGCC_CHECK(checkSignal(sigIdx, ctx, where));
  RINGCC_CHECK(checkFlags(flags, where));
  return notImplemented(where);
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs,
         ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  const char* where = "ncclWaitSignal";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  if (nDesc < 0) return fail(ncclInvalidArgument, where, "nDesc %d must be >= 0", nDesc);
  if (nDesc > 0) RINGCC_CHECK(checkNotNull(signalDescs, "signalDescs", where));
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    if (d.opCnt < 0)
      return fail(ncclInvalidArgument, where, "signalDescs[%d].opCnt %d must be >= 0", i, d.opCnt);
    RINGCC_CHECK(checkPeer(comm, d.peer, "signalDescs[].peer", where));
    RINGCC_CHECK(checkSignal(d.sigIdx, d.ctx, where));
  }
  return notImplemented(where);
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* where = "ncclWinGetUserPtr";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(win, "win", where));
  RINGCC_CHECK(checkNotNull(outUserPtr, "outUserPtr", where));
  *outUserPtr = nullptr;
  return fail(ncclInvalidUsage, where,
              "ncclWinGetUserPtr is not implemented in ringcc yet (ncclCommWindowRegister makes "
              "no windows, so no window has a user pointer)");
}
