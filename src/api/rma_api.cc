// NCCL's one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal) and window pointers:
// the arguments are checked here (ncclInvalidArgument naming the argument), then handed to
// src/rma (rma_ops.h), which checks what needs the windows and runs or groups the call.
#include <cstdint>
#include <cstring>

#include "kernels/dtypes.h"
#include "src/api/api.h"
#include "src/rma/rma_ops.h"

using namespace ringcc;

namespace {

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
  const size_t elem = dataTypeSize(datatype);
  if (count > SIZE_MAX / elem)
    return fail(ncclInvalidArgument, where, "count %zu of %zu-byte elements overflows", count,
                elem);
  return rmaPutSignal(comm, localbuff, count * elem, peer, peerWin, peerWinOffset, sigIdx, ctx,
                      stream);
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream) {
  const char* where = "ncclSignal";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  RINGCC_CHECK(checkPeer(comm, peer, "peer", where));
  RINGCC_CHECK(checkSignal(sigIdx, ctx, where));
  RINGCC_CHECK(checkFlags(flags, where));
  return rmaPutSignal(comm, nullptr, 0, peer, nullptr, 0, sigIdx, ctx, stream);
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs,
         ncclComm_t comm, cudaStream_t stream) {
  const char* where = "ncclWaitSignal";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  if (nDesc <= 0) return fail(ncclInvalidArgument, where, "nDesc %d must be > 0", nDesc);
  RINGCC_CHECK(checkNotNull(signalDescs, "signalDescs", where));
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    if (d.opCnt <= 0)
      return fail(ncclInvalidArgument, where, "signalDescs[%d].opCnt %d must be > 0", i, d.opCnt);
    RINGCC_CHECK(checkPeer(comm, d.peer, "signalDescs[].peer", where));
    RINGCC_CHECK(checkSignal(d.sigIdx, d.ctx, where));
  }
  return rmaWaitSignal(comm, {signalDescs, static_cast<size_t>(nDesc)}, stream);
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* where = "ncclWinGetUserPtr";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(outUserPtr, "outUserPtr", where));
  *outUserPtr = nullptr;
  RINGCC_CHECK(checkNotNull(win, "win", where));
  return rmaWindowUserPtr(comm, win, outUserPtr);
}
