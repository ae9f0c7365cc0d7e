#include "src/rma/rma_ops.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/base/mem_kind.h"
#include "src/exec/group.h"
#include "src/rma/rma_comm.h"

namespace ringcc {
namespace {

// One communicator's one-sided calls of the open group, in call order.
struct GroupQueue {
  Communicator* comm;
  std::vector<std::function<ncclResult_t()>> work;
};

// This thread's queues of the open group. The group's deferred work (src/exec/group.h) owns
// each queue; it is dropped when the group ends, which expires the weak pointer here, so a
// later group starts a new queue without being told the group ended.
thread_local std::vector<std::pair<Communicator*, std::weak_ptr<GroupQueue>>> tQueues;

ncclResult_t runQueue(GroupQueue& q) {
  CallGuard hold(q.comm);
  CommScope scope(q.comm);
  for (auto& work : q.work) {
    const ncclResult_t r = work();
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

// Failures a peer caused leave the communicator failed, as a collective's do; bad arguments
// and usage do not.
ncclResult_t noted(Communicator* comm, ncclResult_t r) {
  if (r == ncclRemoteError || r == ncclSystemError || r == ncclInternalError) comm->recordError(r);
  return r;
}

ncclResult_t runOrQueue(Communicator* comm, std::function<ncclResult_t()> work) {
  if (!groupActive()) {
    CommScope scope(comm);
    return noted(comm, work());
  }
  std::erase_if(tQueues, [](const auto& e) { return e.second.expired(); });
  for (auto& [c, weak] : tQueues) {
    if (c != comm) continue;
    std::shared_ptr<GroupQueue> q = weak.lock();
    q->work.push_back([comm, w = std::move(work)] { return noted(comm, w()); });
    return ncclSuccess;
  }
  auto q = std::make_shared<GroupQueue>();
  q->comm = comm;
  q->work.push_back([comm, w = std::move(work)] { return noted(comm, w()); });
  tQueues.emplace_back(comm, q);
  return enqueueDeferred([q] { return runQueue(*q); });
}

ncclResult_t rmaState(Communicator* comm, const char* where, CommRma** out) {
  if (!comm->rma)
    return fail(ncclInvalidUsage, where,
                "no window was registered on this communicator: its signals are set up by the "
                "first ncclCommWindowRegister (collective)");
  *out = comm->rma.get();
  return ncclSuccess;
}

RmaWindow* windowOf(Communicator* comm, ncclWindow_t win) {
  return comm->rma ? comm->rma->find(win) : nullptr;
}

}  // namespace

ncclResult_t rmaWindowRegister(Communicator* comm, void* buff, size_t size, int flags,
                               ncclWindow_t* win) {
  const char* where = "ncclCommWindowRegister";
  RINGCC_CHECK(checkBufferKind(comm->memKind, buff, "buff", where));
  return runOrQueue(comm, [=]() -> ncclResult_t {
    if (!comm->rma) {
      std::unique_ptr<CommRma> rma;
      RINGCC_CHECK(CommRma::setup(comm, &rma));
      comm->rma = {rma.release(), [](CommRma* p) { delete p; }};
    }
    RmaWindow* made = nullptr;
    RINGCC_CHECK(comm->rma->registerWindow(buff, size, flags, &made));
    *win = reinterpret_cast<ncclWindow_t>(made);
    return ncclSuccess;
  });
}

ncclResult_t rmaWindowDeregister(Communicator* comm, ncclWindow_t win) {
  const char* where = "ncclCommWindowDeregister";
  if (win == nullptr) return ncclSuccess;
  RmaWindow* w = windowOf(comm, win);
  if (!w)
    return fail(ncclInvalidArgument, where,
                "win %p is not a registered window of this communicator (another "
                "communicator's, or deregistered already)",
                static_cast<void*>(win));
  return runOrQueue(comm, [comm, w] { return comm->rma->deregisterWindow(w); });
}

ncclResult_t rmaWindowUserPtr(Communicator* comm, ncclWindow_t win, void** out) {
  const char* where = "ncclWinGetUserPtr";
  RmaWindow* w = windowOf(comm, win);
  if (!w)
    return fail(ncclInvalidArgument, where,
                "win %p is not a registered window of this communicator", static_cast<void*>(win));
  *out = w->buff;
  return ncclSuccess;
}

ncclResult_t rmaPutSignal(Communicator* comm, const void* src, size_t bytes, int peer,
                          ncclWindow_t win, size_t offset, int sigIdx, int ctx,
                          cudaStream_t stream) {
  const char* where = win ? "ncclPutSignal" : "ncclSignal";
  CommRma* rma = nullptr;
  RINGCC_CHECK(rmaState(comm, where, &rma));
  if (bytes > 0) RINGCC_CHECK(checkBufferKind(comm->memKind, src, "localbuff", where));
  RmaPut put{src, bytes, peer, nullptr, offset, sigIdx, ctx, stream};
  if (win) {
    put.win = rma->find(win);
    if (!put.win)
      return fail(ncclInvalidArgument, where,
                  "peerWin %p is not a registered window of this communicator (another "
                  "communicator's, or deregistered)",
                  static_cast<void*>(win));
  }
  RINGCC_CHECK(rma->checkPut(put, where));
  return runOrQueue(comm, [rma, put] { return rma->put(put); });
}

ncclResult_t rmaWaitSignal(Communicator* comm, std::span<const ncclWaitSignalDesc_t> descs,
                           cudaStream_t stream) {
  CommRma* rma = nullptr;
  RINGCC_CHECK(rmaState(comm, "ncclWaitSignal", &rma));
  for (const ncclWaitSignalDesc_t& d : descs)
    RINGCC_CHECK(rma->checkSignal(d.sigIdx, d.ctx, "signalDescs[].", "ncclWaitSignal"));
  // The descriptors are the caller's: copied, since a grouped wait runs after the call.
  std::vector<ncclWaitSignalDesc_t> copy(descs.begin(), descs.end());
  return runOrQueue(comm,
                    [rma, copy = std::move(copy), stream] { return rma->wait(copy, stream); });
}

}  // namespace ringcc
