// The host engine: runs a communicator's operations on host memory.
//
// Per batch:
//   1. the planner (src/plan/planner.h) turns the operations into jobs: one per operation and
//      channel, all send/recv of the batch merged into grouped point-to-point jobs;
//   2. the connections their ports need are made (ConnectionTable);
//   3. the jobs run: per channel in call order, the channels side by side, all driven by
//      non-blocking ProgramRunner::advance() calls from one thread. When no runner can move,
//      the thread spins NCCL_SPIN_COUNT rounds (yielding the core after a few), then sleeps on
//      a counter it waits for (futex), waking at least every millisecond to notice aborts,
//      dead peers and the NCCL_TIMEOUT deadline (src/exec/wait_policy.h). A peer counts as
//      gone (ncclRemoteError) only if a lane is blocked on its connection and is still
//      blocked one round after the peer was seen to leave.
// A batch enqueued `inline` runs on the caller's thread inside enqueue(); any other batch is
// handed to the engine's own thread, which exists for the communicator's life and sleeps
// between batches. Batch after batch, only one thread at a time drives the engine.
// A batch that fails closes all the engine's connections, so that peers still inside the
// operation fail too instead of waiting on this rank (the communicator takes no new
// operations after an error anyway). Making connections (step 2) ends on the same abort,
// revoke and NCCL_TIMEOUT as running does.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/prims.h"
#include "kernels/program.h"
#include "src/core/engine.h"
#include "src/exec/batch_thread.h"
#include "src/exec/call_watch.h"
#include "src/exec/connections.h"
#include "src/plan/planner.h"
#include "src/trace/trace.h"

namespace ringcc {

class WaitPolicy;

class HostEngine final : public CommEngine {
 public:
  explicit HostEngine(ncclComm* comm);
  ~HostEngine() override;

  // At init, collective: checkSharedSettings and connectFirstRing (src/exec/engine_setup.h).
  ncclResult_t checkSettingsAgree();
  ncclResult_t connectRing();

  ncclResult_t enqueue(const EngineBatch& batch, EngineHandle* handle) override;
  ncclResult_t wait(EngineHandle handle) override;
  // On the calling thread, as an inline batch: the engine thread is idle between batches.
  ncclResult_t runLone(const CollArgs& op) override { return runBatch({&op, 1}); }
  void abortOps() override;
  const PlanContext& planContext() const override { return planner_.context(); }
  Memory memory() const override { return Memory{conns_.mappedBytes(), 0}; }
  ncclResult_t releaseMemory() override;

 private:
  // A planned job bound to its connections.
  struct Bound {
    const PlanJob* job = nullptr;
    std::vector<ConnectorView> views;
    std::vector<const Connector*> connectors;
    ProgramRunner runner;
  };
  // A peer that closed or left a connection some lane is blocked on.
  struct GonePeer {
    const Bound* bound = nullptr;
    const Connector* conn = nullptr;
    PeerState state = PeerState::Open;
  };
  // Knobs read once, when the communicator is made (NCCL reads its parameters at init too).
  struct Params {
    int spinCount;
    std::chrono::milliseconds timeout;
    int pollsBeforeYield;  // idle polls before yielding the core (0 with more ranks than cores)
  };
  // The counter a round's first blocked lane waits on, and how many lanes were blocked.
  struct Waited {
    FifoCounter* counter = nullptr;
    uint32_t value = 0;
    int blocked = 0;
  };
  // Where runJobs stands once it has stalled: when the stall began and the peers were last
  // looked at, and a peer found gone (with when), which fails the batch a round later.
  struct Stall {
    std::chrono::steady_clock::time_point lastProgress{}, lastPeerCheck{};
    bool posted = false;  // postStuckCall ran for this stall
    GonePeer gone;
    std::chrono::steady_clock::time_point goneAt{};
  };

  ncclResult_t runBatch(std::span<const CollArgs> ops);
  // RINGCC_TRACE: one record per operation of the batch that just ran.
  void traceBatch(Tracer& tracer, std::span<const CollArgs> ops, uint64_t startUs,
                  ncclResult_t result) const;
  // "#5" for the job's call, "#5-#9" for a batch's grouped send/recv.
  std::string callNumber(const PlanJob& job) const;
  ncclResult_t planAndRun(std::span<const CollArgs> ops);
  ncclResult_t bindJobs();
  // Sorts the bound jobs into per-channel queues (kept while the plan is reused).
  void queueJobs();
  ncclResult_t runJobs();
  // A round of runJobs past the spin (WaitPolicy::spin): answers hang reports, posts our call
  // when the stall starts, every 20 ms looks for gone and mismatched peers, fails at
  // NCCL_TIMEOUT, else naps on `waited`.
  ncclResult_t stalledRound(WaitPolicy& wait, Stall& stall, const Waited& waited);
  // A round after stalledRound found a peer gone and nothing moved since: the error (a
  // mismatch that peer found, else its leaving), or for a network peer a 1 ms wait for the
  // call it may have told, up to kToldCallGrace.
  ncclResult_t gonePeerRound(const Stall& stall);
  // Posts this batch's call on every connection and tells it to network peers (the stall
  // just started), so that peers stuck in another call can name the mismatch.
  void postStuckCall();
  // The NCCL_TIMEOUT error, after logging every waiting lane and asking for a hang report.
  ncclResult_t timedOut() const;
  // The error of a runner that cannot go on: a mismatch between the ranks' calls is the
  // user's (ncclInvalidUsage), an unreadable peer buffer the peer's (ncclRemoteError).
  ncclResult_t runFailed(const Bound& b, RunError e);
  // The first connector a blocked lane (or a draining runner) waits on for which pred(conn)
  // holds, with its job; {} if none.
  struct WaitedOn {
    const Bound* bound = nullptr;
    const Connector* conn = nullptr;
  };
  template <typename Pred>
  WaitedOn findWaitedOn(Pred&& pred) const;
  GonePeer findGonePeer() const;
  // ncclInvalidUsage (named, failReason_ set) if a peer some lane waits on posted this batch
  // number with another call: ranks whose mismatched calls leave them all waiting.
  ncclResult_t findMismatchedPeer();
  // The same for a peer that told its call over the bootstrap (watch_); `tellBack`: tells
  // that peer our call first, so that it stops too if it waits for connection infos.
  ncclResult_t findToldMismatch(bool tellBack);
  // Tells every peer that `keys` has no connection to yet which call this batch is (watch_),
  // before waiting for their connection infos.
  void tellCallBeforeConnecting(const std::vector<PortKey>& keys);
  // Tells the peers of this rank's network connections which call the stuck batch is: a
  // network connection's posted call (postCall) is not in memory the peer sees.
  void tellNetworkPeers();
  // Logs every lane that has not finished and what it waits for; returns the line of the
  // first one waiting on a peer, for the error text.
  std::string reportStuck() const;
  // With network connections: a WARN if the process's proxy, which moves their data, is stuck
  // inside one sweep (a network library's call that blocks), which a lane's wait cannot show.
  void reportStuckProxy() const;
  bool stopRequested() const;
  // The error of an operation stopped by abort or revoke (ncclInvalidUsage), logged.
  ncclResult_t stopped(const char* phase) const;

  ncclComm* comm_;
  const Params params_;
  uint32_t failReason_ = kFailNone;     // FailReason of the failing batch, told to peers at close
  uint64_t batchSeq_ = 0;               // collective batches run so far: alike on every rank
  uint64_t batches_ = 0;                // ... counting those with nothing to move too
  uint64_t lastSeq_ = 0;                // calls run so far (src/trace/call_state.h) ...
  uint64_t firstSeq_ = 0;               // ... and the number of the batch's first
  uint32_t lanesAnswered_ = 0;          // the last hang report that got our lanes logged
  // The current batch's call (batchSig: a lone collective's, else kSigGroup), computed once
  // per batch in runBatch; posted on every connection once the batch gets stuck.
  OpSig batchSig_ = {};
  ConnectionTable conns_;
  CallWatch watch_;  // calls told over the bootstrap, where connections cannot tell them
  Planner planner_;
  // The current batch: its plan and the jobs bound to connections, bound_[0, plan_.nJobs).
  // Kept between batches so that runners and tables are not allocated again.
  Plan plan_;
  std::vector<std::unique_ptr<Bound>> bound_;
  // Scratch of bindJobs and runJobs, kept so that a batch allocates nothing in steady state.
  std::vector<PortKey> keys_;
  std::vector<std::vector<Bound*>> queues_;  // per channel, the jobs in call order
  std::vector<size_t> head_;                 // per channel, the job running now
  std::vector<int> toldPeers_;               // tellCallBeforeConnecting, tellNetworkPeers

  std::atomic<bool> abortOps_{false};
  BatchThread batchThread_;  // last: its thread runs batches on everything above
};

}  // namespace ringcc
