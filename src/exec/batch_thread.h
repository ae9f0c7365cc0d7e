// How an engine runs its batches (src/core/engine.h): a batch enqueued `inline` runs on the
// calling thread inside enqueue(); any other is handed to the engine's own thread, which
// exists for the engine's life, so that one thread can start batches on several
// communicators before waiting on any of them. Either way wait() returns the batch's result.
// One batch at a time: the next enqueue() comes after the previous wait(). Handles count up
// from 1 for both kinds of batch.
//
// The hand-off spins briefly, then sleeps, on both sides: the engine thread polls for the next
// batch for kHandOffSpin after each one before it sleeps on the condition variable, and wait()
// polls for the result as long before it sleeps. A thread driving several communicators
// (nccl-tests -g) issues its next group right after the last, and a sleep and a wake-up per
// batch cost tens of microseconds (`all_reduce_perf -g 2`: 57-165 us per all-reduce from 8 B
// to 256 KiB with them, 2.2-24 us without; docs/benchmarks.md). Polls yield the core, for
// hosts with more threads than cores.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <thread>

#include "nccl.h"
#include "src/core/engine.h"
#include "src/plan/coll_args.h"

namespace ringcc {

class BatchThread {
 public:
  using Run = std::function<ncclResult_t(std::span<const CollArgs> ops, cudaStream_t stream)>;

  // `run` runs one batch. `wrapThread` sets the engine's thread up for its whole life (a
  // CommScope, a CUDA context): it calls `body` once, inside whatever it opens.
  using Wrap = std::function<void(const std::function<void()>& body)>;
  BatchThread(Run run, Wrap wrapThread);
  ~BatchThread() { stop(); }
  BatchThread(const BatchThread&) = delete;
  BatchThread& operator=(const BatchThread&) = delete;

  ncclResult_t enqueue(const EngineBatch& batch, EngineHandle* handle);
  ncclResult_t wait(EngineHandle handle);

  // How long either side of a hand-off polls before it sleeps.
  static constexpr std::chrono::microseconds kHandOffSpin{200};

  // Ends the thread once its current batch (if any) returned; the owner makes that batch stop
  // first (its abort flag). Idempotent.
  void stop();

 private:
  void threadMain();

  Run run_;
  // The caller's thread owns nextHandle_ and the inline pair (enqueue and wait come from the
  // thread that holds the communicator). The hand-off pair is written under mu_ (so that a
  // sleeper checking it under mu_ misses no notify) and read by pollers without it.
  EngineHandle nextHandle_ = 1;
  EngineHandle inlineHandle_ = 0;            // the last batch run inside enqueue() ...
  ncclResult_t inlineResult_ = ncclSuccess;  // ... and its result
  std::mutex mu_;
  std::condition_variable cv_;
  EngineBatch batch_;
  std::atomic<EngineHandle> enqueued_{0};  // the last batch handed to the engine thread ...
  std::atomic<EngineHandle> finished_{0};  // ... and the last one it finished
  ncclResult_t result_ = ncclSuccess;      // (written before finished_, read after it)
  std::atomic<bool> exit_{false};
  std::thread thread_;
};

}  // namespace ringcc
