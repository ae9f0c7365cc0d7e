// The engine of a communicator: its connections and the executor that runs planned jobs on
// them. Created at the end of communicator init, once peers are known; destroyed before the
// bootstrap it used to exchange connection information.
//
// The API is asynchronous, as a CUDA executor needs it: enqueue() starts a batch (one group's
// operations on this communicator, in call order, with the user's stream) and returns a
// handle; wait() blocks until that batch is done and returns its first error. A host engine
// either runs a batch on the calling thread inside enqueue() (`inline`: nothing else needs to
// progress meanwhile) or hands it to its own thread, so that one thread can start batches on
// several communicators before waiting on any of them. Either way, once wait() returned, the
// results are in the output buffers. The CUDA engine (src/cuda/cuda_engine.h) queues kernels on
// the stream instead: once wait() returned they are queued, and the stream completes them, as
// with NCCL.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "nccl.h"
#include "src/plan/coll_args.h"
#include "src/plan/planner.h"

struct ncclComm;

namespace ringcc {

// Names one enqueued batch of one engine.
using EngineHandle = uint64_t;

struct EngineBatch {
  std::span<const CollArgs> ops;  // valid until wait() returns
  cudaStream_t stream = nullptr;  // the stream of the batch's calls (host engines ignore it)
  bool runInline = false;         // host: run on the calling thread, inside enqueue()
  // A group over several communicators (src/exec/group.h): a CUDA engine only prepares the
  // batch (plan, connections, uploads, kernel arguments) before wait() returns, and queues its
  // kernels at finishBatch(), once every communicator of the group has prepared. Host engines
  // ignore it.
  bool deferLaunch = false;
};

// The interface lives with the communicator that holds one; the engines implement it above
// (src/exec: host, src/cuda: CUDA) and src/init/engine_factory.h picks one.
class CommEngine {
 public:
  virtual ~CommEngine() = default;

  // Starts a batch; *handle names it for wait(). One batch at a time per engine: the next
  // enqueue() comes after the previous batch's wait().
  virtual ncclResult_t enqueue(const EngineBatch& batch, EngineHandle* handle) = 0;

  // Blocks until the batch is done; returns its first error.
  virtual ncclResult_t wait(EngineHandle handle) = 0;

  // One operation outside any group, run to completion (host) or queued (CUDA) before it
  // returns: enqueue() then wait() of an inline batch of one. The call a repeated small
  // operation takes, so a host engine runs it without the hand-off's bookkeeping.
  virtual ncclResult_t runLone(const CollArgs& op) {
    EngineHandle handle = 0;
    ncclResult_t r = enqueue(EngineBatch{{&op, 1}, op.stream, true}, &handle);
    return r == ncclSuccess ? wait(handle) : r;
  }

  // After wait() of a batch enqueued with deferLaunch: queues what it prepared (`launch`), or
  // drops it because another communicator of the group failed to prepare (*dropped: there was
  // work, and it will not run). Host engines have nothing deferred.
  virtual ncclResult_t finishBatch(bool launch, bool* dropped) {
    (void)launch;
    *dropped = false;
    return ncclSuccess;
  }
  // Whether this engine leaves work for finishBatch: a plain read, so that a group of host
  // communicators pays nothing for the second phase it does not have.
  bool defersLaunch() const { return defersLaunch_; }

  // Stops operations in flight (they return an error); the engine stays destroyable.
  virtual void abortOps() = 0;

  // What the engine holds for operations, in bytes of the communicator's memory kind:
  // `releasable` is what releaseMemory() frees (connections' FIFO control blocks and slots as
  // this rank maps them), `persistent` what it keeps.
  struct Memory {
    uint64_t releasable = 0;
    uint64_t persistent = 0;
  };
  virtual Memory memory() const = 0;
  // Waits until the work this rank queued has finished: its kernels on the user's streams for a
  // CUDA engine (and their stops, raised); a host engine's work is done when wait() returns.
  // ncclCommSuspend calls it before its barrier, so that past the barrier no rank's kernel
  // still reads a connection that is about to close.
  virtual ncclResult_t finishQueued() { return ncclSuccess; }
  // ncclCommSuspend(NCCL_SUSPEND_MEM): closes every connection (FIFO memory, shared-memory
  // segments, network endpoints) and forgets the plans bound to them; the next operation
  // makes what it needs anew. Collective, and only between operations: every rank calls it
  // once all of them are past their last operation (the caller has passed a barrier after
  // finishQueued), so no peer waits on a connection that closes. An engine that cannot
  // answers ncclInvalidUsage naming what is missing.
  virtual ncclResult_t releaseMemory() = 0;

  // An error that work already handed off found since (a CUDA kernel that stopped), for
  // ncclCommGetAsyncError; raised with its cause. Host engines report at wait() and have none.
  virtual ncclResult_t pollAsyncError() { return ncclSuccess; }
  // What the engine plans with (tuning settings, link figures, geometry), so that an estimate
  // (ncclGroupSimulateEnd) uses the very figures a real call would.
  virtual const PlanContext& planContext() const = 0;

 protected:
  bool defersLaunch_ = false;  // set by engines that override finishBatch
};

}  // namespace ringcc
