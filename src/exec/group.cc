#include "src/exec/group.h"

#include <memory>
#include <thread>
#include <vector>

#include "kernels/dtypes.h"
#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/core/engine.h"
#include "src/exec/engine_setup.h"
#include "src/tune/tune.h"

namespace ringcc {
namespace {

// A call of several steps, run after the group's operations (enqueueAfterOps).
struct AfterOp {
  CollArgs like;  // its communicator, and what the simulator counts for it
  std::function<ncclResult_t()> work;
};

struct GroupState {
  std::vector<CollArgs> ops;
  std::vector<std::function<ncclResult_t()>> deferred;
  std::vector<AfterOp> after;
};

// NCCL defines groups per calling thread. The depth is a plain int apart from the state:
// every call asks for it, and a thread_local with a constructor costs an initialization check
// on each access; the vectors are touched only inside a group. Local-dynamic, like the
// scopes' variables (src/base/error.h), so that enqueueOp reaches all three through one
// lookup of the library's TLS block.
__thread int tGroupDepth __attribute__((tls_model("local-dynamic"))) = 0;
thread_local GroupState tGroup;

// Runs deferred work (communicator inits) concurrently: inits of several ranks in one group
// wait for each other in the bootstrap. The first failure's cause, raised on its helper
// thread, becomes this thread's last error.
ncclResult_t runDeferred(std::vector<std::function<ncclResult_t()>>& work) {
  if (work.empty()) return ncclSuccess;
  std::vector<ncclResult_t> results(work.size(), ncclSuccess);
  std::vector<ErrorCause> causes(work.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < work.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = work[i]();
      if (results[i] != ncclSuccess && results[i] != ncclInProgress) causes[i] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < work.size(); ++i) {
    if (results[i] == ncclSuccess || results[i] == ncclInProgress) continue;
    adoptError(causes[i]);
    return results[i];
  }
  return ncclSuccess;
}

// Submits every communicator's operations, then waits for all of them, so operations on
// different communicators progress together.
// Index of `comm` in `comms`, appending it (and an empty list to `perComm`) when new: items
// grouped by communicator in first-seen order, each list in call order.
template <class Item>
size_t commIndex(ncclComm* comm, std::vector<ncclComm*>* comms,
                 std::vector<std::vector<Item>>* perComm) {
  size_t i = 0;
  while (i < comms->size() && (*comms)[i] != comm) ++i;
  if (i == comms->size()) {
    comms->push_back(comm);
    perComm->emplace_back();
  }
  return i;
}

ncclResult_t launchOps(const std::vector<CollArgs>& ops) {
  std::vector<ncclComm*> comms;
  std::vector<std::vector<CollArgs>> perComm;
  for (const CollArgs& op : ops) perComm[commIndex(op.comm, &comms, &perComm)].push_back(op);
  // Abort and destroy wait for these guards, so the engines outlive the launch.
  std::vector<std::unique_ptr<CallGuard>> guards;
  for (ncclComm* comm : comms) guards.push_back(std::make_unique<CallGuard>(comm));
  // The last communicator's batch runs on this thread, after the others were handed to their
  // engines' threads (with one communicator, nothing is handed off): one hand-off fewer, and
  // this thread works instead of waiting.
  ncclResult_t first = ncclSuccess;
  size_t firstComm = 0;
  auto failed = [&](size_t i, ncclResult_t r) {
    comms[i]->recordError(r);
    if (first == ncclSuccess) {
      first = r;
      firstComm = i;
    }
  };
  // Several communicators: two phases. CUDA engines prepare every batch (connections,
  // uploads: calls that may wait until no kernel runs on the device) and only then queue any
  // kernel, since a rank's kernel waits for its peers' and may keep a peer's preparation
  // waiting for ever. A batch that fails to prepare launches nothing anywhere in the group.
  const bool twoPhase = comms.size() > 1;
  bool deferred = false;  // an engine of the group has a second phase (CUDA)
  std::vector<EngineHandle> handles(comms.size(), 0);
  for (size_t i = 0; i < comms.size(); ++i) {
    deferred |= comms[i]->engine->defersLaunch();
    CommScope scope(comms[i]);
    const bool runInline = i + 1 == comms.size();
    EngineBatch batch{perComm[i], perComm[i].front().stream, runInline, twoPhase};
    ncclResult_t r = comms[i]->engine->enqueue(batch, &handles[i]);
    if (r != ncclSuccess) failed(i, r);
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    if (handles[i] == 0) continue;
    CommScope scope(comms[i]);
    ncclResult_t r = comms[i]->engine->wait(handles[i]);
    if (r != ncclSuccess) failed(i, r);
  }
  if (twoPhase && deferred) {
    const bool launch = first == ncclSuccess;
    const ErrorCause cause = launch ? ErrorCause{} : comms[firstComm]->firstError();
    for (size_t i = 0; i < comms.size(); ++i) {
      if (handles[i] == 0 || !comms[i]->engine->defersLaunch()) continue;
      CommScope scope(comms[i]);
      bool dropped = false;
      ncclResult_t r = comms[i]->engine->finishBatch(launch, &dropped);
      if (r != ncclSuccess) failed(i, r);
      // Dropped because another failed: this communicator's part of the group failed too.
      if (dropped && comms[i]->firstError().code == ncclSuccess) {
        comms[i]->noteWorkError(cause);
        comms[i]->recordError(cause.code);
      }
    }
  }
  // The causes were raised on the engine threads: this thread returns the first failure, so
  // its last error is that failure's cause.
  if (first != ncclSuccess) adoptError(comms[firstComm]->firstError());
  return first;
}

// The group's calls of several steps: per communicator in call order, on a thread of its own
// when there are several communicators (their steps wait for each other's), else on this one.
// Each step is an operation that records its failure on its communicator (enqueueOp).
ncclResult_t runAfterOps(const std::vector<AfterOp>& after) {
  if (after.empty()) return ncclSuccess;
  std::vector<ncclComm*> comms;
  std::vector<std::vector<const AfterOp*>> perComm;
  for (const AfterOp& a : after) perComm[commIndex(a.like.comm, &comms, &perComm)].push_back(&a);
  std::vector<std::function<ncclResult_t()>> work;
  for (size_t i = 0; i < comms.size(); ++i) {
    work.push_back([&, i] {
      CallGuard guard(comms[i]);  // abort and destroy wait for it, as for the operations
      for (const AfterOp* a : perComm[i]) RINGCC_CHECK(a->work());
      return ncclSuccess;
    });
  }
  return work.size() == 1 ? work[0]() : runDeferred(work);
}

}  // namespace

bool groupActive() { return tGroupDepth > 0; }

ncclResult_t groupStart() {
  ++tGroupDepth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (tGroupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd", "no group is open (ncclGroupStart missing)");
  if (--tGroupDepth > 0) return ncclSuccess;
  std::vector<CollArgs> ops;
  std::vector<std::function<ncclResult_t()>> deferred;
  std::vector<AfterOp> after;
  ops.swap(tGroup.ops);
  deferred.swap(tGroup.deferred);
  after.swap(tGroup.after);
  RINGCC_CHECK(runDeferred(deferred));
  // A failed launch leaves its communicators in error, refusing further calls: the calls of
  // several steps are not started.
  RINGCC_CHECK(launchOps(ops));
  return runAfterOps(after);
}

ncclResult_t groupSimulateEnd(float* estimatedMicros) {
  if (tGroupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd",
                "no group is open (ncclGroupStart missing)");
  if (--tGroupDepth > 0) {
    *estimatedMicros = 0;
    return ncclSuccess;
  }
  std::vector<CollArgs> ops;
  ops.swap(tGroup.ops);
  tGroup.deferred.clear();
  for (AfterOp& a : tGroup.after) ops.push_back(a.like);
  tGroup.after.clear();
  double total = 0;
  // What the tuner would choose for each operation, and the cost model's time for it: from
  // the engine's own plan context, the settings and link figures its calls are planned with.
  for (const CollArgs& op : ops) {
    const PlanContext& ctx = op.comm->engine->planContext();
    const uint64_t bytes = static_cast<uint64_t>(op.count) * dataTypeSize(op.datatype);
    total += chooseTune(ctx.tune, ctx.links, op.kind, bytes, ctx.nranks).micros;
  }
  *estimatedMicros = static_cast<float>(total);
  return ncclSuccess;
}

ncclResult_t enqueueOp(const CollArgs& args) {
  if (groupActive()) {
    tGroup.ops.push_back(args);
    return ncclSuccess;
  }
  // A lone operation: nothing else must progress meanwhile, so it runs on this thread. The
  // API entry point holds the communicator (ApiGuard) for as long as this runs.
  CommScope scope(args.comm);
  ncclResult_t r = args.comm->engine->runLone(args);
  if (r != ncclSuccess) args.comm->recordError(r);
  return r;
}

ncclResult_t enqueueDeferred(std::function<ncclResult_t()> work) {
  if (groupActive()) {
    tGroup.deferred.push_back(std::move(work));
    return ncclSuccess;
  }
  return work();
}

ncclResult_t enqueueAfterOps(const CollArgs& like, std::function<ncclResult_t()> work) {
  if (!groupActive()) return work();
  tGroup.after.push_back({like, std::move(work)});
  return ncclSuccess;
}

}  // namespace ringcc
