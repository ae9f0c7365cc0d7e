// The host engine: runs a communicator's operations on host memory with one engine thread.
//
// submit() hands a batch to the engine thread and returns; wait() blocks until it is done.
// The engine thread, per batch:
//   1. builds one Program per operation and channel (src/sched), all send/recv of the batch
//      merged into one grouped point-to-point Program;
//   2. makes the connections their ports need (ConnectionTable);
//   3. runs them: per channel the Programs run in call order, the channels side by side, all
//      driven by non-blocking ProgramRunner::advance() calls from this one thread. When no
//      runner can move, it spins NCCL_SPIN_COUNT rounds, then sleeps on a counter it waits for
//      (futex), waking at least every millisecond to notice aborts, dead peers and the
//      NCCL_TIMEOUT deadline. A peer counts as gone (ncclRemoteError) only if a lane is blocked
//      on its connection and is still blocked one round after the peer was seen to leave.
// The thread exists for the communicator's life and sleeps between batches. A batch that
// touches only this communicator runs on the caller's thread instead (run()), the same code
// without the hand-offs; batch after batch, only one thread at a time drives the engine.
// A batch that fails closes all the engine's connections, so that peers still inside the
// operation fail too instead of waiting on this rank (the communicator takes no new
// operations after an error anyway). Making connections (step 2) ends on the same abort,
// revoke and NCCL_TIMEOUT as running does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <span>
#include <mutex>
#include <thread>
#include <vector>

#include "src/exec/connections.h"
#include "src/exec/engine.h"
#include "src/exec/plan_cache.h"
#include "src/sched/program.h"

namespace ringcc {

class HostEngine final : public CommEngine {
 public:
  explicit HostEngine(ncclComm* comm);
  ~HostEngine() override;

  // Connects channel 0's ring, so that unreachable peers show up at init. Collective.
  ncclResult_t connectRing();

  ncclResult_t submit(const std::vector<CollArgs>& ops) override;
  ncclResult_t wait() override;
  ncclResult_t run(std::span<const CollArgs> ops) override;
  void abortOps() override;

 private:
  struct Job;
  // A peer that closed or left a connection some lane is blocked on.
  struct GonePeer {
    const Job* job = nullptr;
    const Connector* conn = nullptr;
    PeerState state = PeerState::Open;
  };

  void threadMain();
  ncclResult_t runBatch(std::span<const CollArgs> ops);
  ncclResult_t planAndRun(std::span<const CollArgs> ops);
  // Knobs read once, when the communicator is made (NCCL reads its parameters at init too).
  struct Params {
    int maxChannels;
    int minChannels;
    int spinCount;
    std::chrono::milliseconds timeout;
  };

  ncclResult_t planBatch(std::span<const CollArgs> ops);
  ncclResult_t planP2p(const std::vector<const CollArgs*>& ops);
  ncclResult_t bindJobs();
  ncclResult_t runJobs();
  GonePeer findGonePeer(const std::vector<std::vector<Job*>>& queues,
                        const std::vector<size_t>& head) const;
  void reportStuck() const;
  bool stopRequested() const;
  // The error of an operation stopped by abort or revoke (ncclInvalidUsage), logged.
  ncclResult_t stopped(const char* phase) const;
  Job* newJob();

  ncclComm* comm_;
  const Params params_;
  ConnectionTable conns_;
  PlanCache plans_;
  // The current batch's jobs: jobs_[0, nJobs_). Kept between batches so that runners and
  // buffer tables are not allocated again.
  std::vector<std::unique_ptr<Job>> jobs_;
  size_t nJobs_ = 0;
  // Scratch of bindJobs and runJobs, kept so that a batch allocates nothing in steady state.
  std::vector<PortKey> keys_;
  std::vector<std::vector<Job*>> queues_;  // per channel, the jobs in call order
  std::vector<size_t> head_;               // per channel, the job running now

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<CollArgs> batch_;
  bool hasBatch_ = false;
  bool batchDone_ = false;
  bool exit_ = false;
  ncclResult_t result_ = ncclSuccess;
  std::atomic<bool> abortOps_{false};
  std::thread thread_;
};

}  // namespace ringcc
