#include "src/exec/host_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <type_traits>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "src/exec/engine_setup.h"
#include "src/exec/host_sync.h"
#include "src/exec/wait_policy.h"
#include "src/monitor/hang_watcher.h"
#include "src/plan/op_sig.h"
#include "src/plan/ring_order.h"
#include "src/trace/hang_report.h"
#include "transports/fifo_host.h"
#include "transports/proxy/proxy.h"
#include "transports/shm/mapped_buffers.h"

namespace ringcc {
namespace {

using Clock = std::chrono::steady_clock;

// The runners reach peers' ncclMemAlloc buffers (kRefMapped) through the shm transport's table.
const PeerMapper kShmMapper{&findMappable, &mapPeerRegion};

// How long a rank whose network peer closed mid-operation waits for that peer's call told
// over the bootstrap (src/exec/call_watch.h) before it reports the close: a mismatch found
// by the peer is then named as one, not as a peer that left.
constexpr auto kToldCallGrace = std::chrono::milliseconds(200);
// A proxy sweep that has run this long is stuck (sweeps never wait: transports/proxy/proxy.h).
constexpr long long kStuckSweepMs = 1000;

int64_t positive(const char* name) { return std::max<int64_t>(1, paramInt(name)); }

// Whether every rank of the communicator runs this batch too: it holds a collective that moves
// data (count-0 collectives are skipped on every rank alike).
bool everyRankRuns(std::span<const CollArgs> ops) {
  for (const CollArgs& a : ops)
    if (a.kind != Coll::Send && a.kind != Coll::Recv && a.count > 0) return true;
  return false;
}

}  // namespace

HostEngine::HostEngine(ncclComm* comm)
    : comm_(comm),
      params_{static_cast<int>(positive("SPIN_COUNT")),
              std::chrono::milliseconds(positive("TIMEOUT")), pollsBeforeYield(comm)},
      conns_(comm),
      watch_(*comm->bootstrap),
      planner_(ringcc::planContext(comm, conns_)),
      batchThread_([this](std::span<const CollArgs> ops, cudaStream_t) { return runBatch(ops); },
                   [this](const std::function<void()>& body) {
                     CommScope scope(comm_);
                     body();
                   }) {}

HostEngine::~HostEngine() {
  abortOps_.store(true);
  watch_.stopAll();
  batchThread_.stop();
  // An aborted or revoked communicator drops what it had in flight (ncclCommAbort's promise);
  // a destroyed one lets its last sends reach the peers first.
  conns_.closeAll(/*failed=*/comm_->abortFlag.load() || comm_->revoked.load());
}

ncclResult_t HostEngine::checkSettingsAgree() {
  return checkSharedSettings(comm_, conns_, planner_.context().tune);
}

ncclResult_t HostEngine::connectRing() { return connectFirstRing(comm_, conns_); }

ncclResult_t HostEngine::enqueue(const EngineBatch& batch, EngineHandle* handle) {
  return batchThread_.enqueue(batch, handle);
}

ncclResult_t HostEngine::wait(EngineHandle handle) { return batchThread_.wait(handle); }

void HostEngine::abortOps() {
  abortOps_.store(true);
  watch_.stopAll();
}

ncclResult_t HostEngine::releaseMemory() {
  // Between batches (the API thread waited for the last one), so the engine thread is idle
  // and its state is ours until the next enqueue. Every peer is past its last operation too
  // (the caller's barrier): closing waits on nobody, and nobody waits on us.
  conns_.closeAll();
  // The runners and the reusable plan point into the connections just closed.
  bound_.clear();
  plan_.clear();
  planner_.forgetLast();
  return ncclSuccess;
}

bool HostEngine::stopRequested() const {
  return abortOps_.load(std::memory_order_relaxed) ||
         comm_->abortFlag.load(std::memory_order_relaxed);
}

ncclResult_t HostEngine::stopped(const char* phase) const {
  return fail(ncclInvalidUsage, "collective", "stopped while %s: the communicator was %s", phase,
              comm_->revoked.load() ? "revoked" : "aborted");
}

ncclResult_t HostEngine::runBatch(std::span<const CollArgs> ops) {
  // Numbered and posted for hang reports whether or not anyone traces.
  firstSeq_ = lastSeq_ + 1;
  lastSeq_ += ops.size();
  ++batches_;
  // The batch's call, computed once: hang reports, posted calls and mismatch reports all use it.
  batchSig_ = batchSig(ops);
  comm_->calls.enter(firstSeq_, lastSeq_, batchSig_);
  lanesAnswered_ = comm_->calls.lanesAsked();
  Tracer* tracer = comm_->tracer.get();
  const uint64_t startUs = tracer ? traceNowUs() : 0;
  ncclResult_t r = planAndRun(ops);
  if (tracer) [[unlikely]]
    traceBatch(*tracer, ops, startUs, r);
  comm_->calls.leave();
  if (r != ncclSuccess && conns_.size() > 0) {
    // The failed batch left our FIFOs out of step with the peers', so the connections are
    // of no further use (and the communicator refuses new operations). Closing them tells
    // every peer still inside this operation, which would otherwise wait on us until its
    // NCCL_TIMEOUT: a failure spreads around the ring in bounded time.
    LOG_INFO(kLogColl, "closing %zu connections after a failed operation", conns_.size());
    // Peers that wait on us learn why, so that a mismatch is the user's error on every rank.
    if (failReason_ != kFailNone) conns_.markFailed(failReason_);
    if (failReason_ == kFailMismatch) {
      // A network peer does not see failReason (it stays in this host's memory): it is told
      // our call over the bootstrap instead, and names both calls (the gone-peer path).
      if (batchSig_.coll != kSigGroup) tellNetworkPeers();
    }
    failReason_ = kFailNone;
    for (auto& b : bound_) b->connectors.clear();
    plan_.clear();
    conns_.closeAll(/*failed=*/true);
  }
  return r;
}

void HostEngine::traceBatch(Tracer& tracer, std::span<const CollArgs> ops, uint64_t startUs,
                            ncclResult_t result) const {
  const uint64_t endUs = traceNowUs();
  for (size_t i = 0; i < ops.size(); ++i) {
    const CollArgs& a = ops[i];
    const bool p2p = a.kind == Coll::Send || a.kind == Coll::Recv;
    TraceRecord rec;
    rec.seq = firstSeq_ + i;
    rec.batch = batches_;
    rec.count = a.count;
    rec.callUs = a.callUs ? a.callUs : startUs;
    rec.startUs = startUs;
    rec.endUs = endUs;
    rec.root = a.root;
    rec.coll = static_cast<uint8_t>(a.kind);
    rec.type = static_cast<uint8_t>(a.datatype);
    rec.op = static_cast<uint8_t>(std::min<int>(a.op, ncclNumOps));
    rec.ok = result == ncclSuccess ? 1 : 0;
    // How it ran: from its first job (a failed batch may have none left).
    const int32_t index = p2p ? -1 : static_cast<int32_t>(i);
    for (size_t j = 0; j < plan_.nJobs; ++j) {
      const PlanJob& job = plan_.jobs[j];
      if (job.opIndex != index) continue;
      rec.algo = p2p ? 0xff : static_cast<uint8_t>(job.algo);
      rec.proto = static_cast<uint8_t>(job.protocol);
      rec.nChannels = static_cast<uint8_t>(job.nChannels);
      break;
    }
    tracer.add(rec);
  }
}

std::string HostEngine::callNumber(const PlanJob& job) const {
  if (job.opIndex >= 0) return "#" + std::to_string(firstSeq_ + job.opIndex);
  return "#" + std::to_string(firstSeq_) + "-#" + std::to_string(lastSeq_);
}

ncclResult_t HostEngine::planAndRun(std::span<const CollArgs> ops) {
  if (stopRequested()) return fail(ncclInvalidUsage, "collective", "communicator was aborted");
  bool reused = false;
  RINGCC_CHECK(planner_.plan(ops, &plan_, &reused));
  if (plan_.nJobs == 0) return ncclSuccess;
  // Numbered before its connections are made: a rank waiting for them tells its peers the
  // batch number and call (bindJobs). Only batches that every rank runs are numbered: a batch
  // of sends and receives involves its peers only, and counting it would give the next
  // collective different numbers on different ranks, so that a peer's stale posted call could
  // match this rank's number and be taken for a mismatch. (Such a batch posts kSigGroup under
  // the previous number, which nobody compares.)
  if (everyRankRuns(ops)) ++batchSeq_;
  watch_.rearm();
  if (reused) {
    // Same jobs, counts and connections: the runners start over on the new buffers (the
    // planner wrote them into the tables the runners read).
    for (size_t j = 0; j < plan_.nJobs; ++j)
      bound_[j]->runner.restart(plan_.jobs[j].op, plan_.jobs[j].sig.op);
  } else {
    RINGCC_CHECK(bindJobs());
    queueJobs();
  }
  return runJobs();
}

ncclResult_t HostEngine::bindJobs() {
  std::vector<PortKey>& keys = keys_;
  planPortKeys(plan_, &keys);
  // Making connections waits on the peers like the rest of the operation does: until an
  // abort or revoke, NCCL_TIMEOUT, or a peer that told another call (watch_).
  tellCallBeforeConnecting(keys);
  ncclResult_t connected = conns_.ensure(keys, watch_.stopFlag(), params_.timeout.count());
  if (connected != ncclSuccess) {
    // A peer that found a mismatch told us its call, then left: its leaving can fail the
    // set-up before our bootstrap thread has taken the message (another socket). Wait a
    // moment for it, as runJobs does for a network peer lost mid-operation.
    const auto failedAt = Clock::now();
    while (true) {
      RINGCC_CHECK(findToldMismatch(/*tellBack=*/false));
      if (stopRequested()) return stopped("connecting");
      if (Clock::now() - failedAt >= kToldCallGrace) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  RINGCC_CHECK(connected);
  while (bound_.size() < plan_.nJobs) bound_.push_back(std::make_unique<Bound>());
  for (size_t j = 0; j < plan_.nJobs; ++j) {
    const PlanJob& job = plan_.jobs[j];
    Bound& b = *bound_[j];
    b.job = &job;
    RINGCC_CHECK(bindPorts(conns_, job, &b.views, &b.connectors));
    RunArgs args = job.runArgs(b.views.data());
    args.mapper = &kShmMapper;
    if (RunError e = b.runner.init(args); e != kRunOk)
      return fail(ncclInternalError, job.name, "cannot run the program: %s", runErrorText(e));
  }
  return ncclSuccess;
}

void HostEngine::queueJobs() {
  // Per channel, jobs run in call order; channels run side by side.
  int nChannels = 0;
  for (size_t j = 0; j < plan_.nJobs; ++j)
    nChannels = std::max(nChannels, plan_.jobs[j].channel + 1);
  queues_.resize(nChannels);  // exactly: findGonePeer walks every queue
  for (auto& q : queues_) q.clear();
  for (size_t j = 0; j < plan_.nJobs; ++j)
    queues_[plan_.jobs[j].channel].push_back(bound_[j].get());
  head_.resize(nChannels);
}

// Shaped so that the rounds themselves stay here and nothing else does: advancing the runners
// is the hot path (every round of a small operation, which usually needs no wait at all), so
// it is inline in this loop; what follows a round in which nothing moved is in WaitPolicy
// (spin, yield, nap: src/exec/wait_policy.h) and in stalledRound and gonePeerRound (peer
// checks, mismatches, the deadline), which run only once the loop has gone idle.
ncclResult_t HostEngine::runJobs() {
  std::vector<std::vector<Bound*>>& queues = queues_;
  std::vector<size_t>& head = head_;
  const int nChannels = static_cast<int>(queues.size());
  // (One channel, the small-message case, without the call to memset a loop would become.)
  if (nChannels == 1)
    head[0] = 0;
  else
    std::fill(head.begin(), head.end(), 0);

  WaitPolicy wait(params_.spinCount, params_.pollsBeforeYield);
  Stall stall;  // the clock is read only once the loop has gone idle, not on every round
  HostSync sync;
  while (true) {
    bool allDone = true, progressed = false;
    Waited waited;
    for (int c = 0; c < nChannels; ++c) {
      while (head[c] < queues[c].size()) {
        Bound* b = queues[c][head[c]];
        AdvanceResult r = b->runner.advance(sync);
        if (r.error != kRunOk) return runFailed(*b, r.error);
        progressed |= r.progressed;
        if (!r.done) {
          if (r.waitOn && waited.blocked++ == 0) {
            waited.counter = r.waitOn;
            waited.value = r.waitValue;
          }
          break;
        }
        ++head[c];
        progressed = true;
      }
      allDone &= head[c] == queues[c].size();
    }
    if (allDone) return ncclSuccess;

    if (stopRequested()) return stopped("running");
    if (progressed) {
      wait.progressed();
      stall.gone = GonePeer{};
      continue;
    }
    if (stall.gone.conn) {
      RINGCC_CHECK(gonePeerRound(stall));
      continue;
    }
    if (wait.spin()) continue;
    RINGCC_CHECK(stalledRound(wait, stall, waited));
  }
}

ncclResult_t HostEngine::gonePeerRound(const Stall& stall) {
  const GonePeer& gone = stall.gone;
  if (std::atomic_ref<uint32_t>(gone.conn->view().control->failReason).load() == kFailMismatch)
    return failPeer(ncclInvalidUsage, gone.conn->peerRank(), gone.bound->job->name,
                    "rank %d found that the ranks made different calls (its WARN names both) "
                    "and closed its connections",
                    gone.conn->peerRank());
  if (gone.conn->needsProgress()) {
    // A network peer that found a mismatch told us its call before it closed (runBatch):
    // wait a moment for that message, which takes another socket than the close.
    watch_.expect(batchSeq_, batchSig_);
    RINGCC_CHECK(findToldMismatch(/*tellBack=*/false));
    if (Clock::now() - stall.goneAt < kToldCallGrace) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return ncclSuccess;
    }
  }
  // Still stuck one round after it left: nothing more can come.
  return failPeer(ncclRemoteError, gone.conn->peerRank(), gone.bound->job->name,
                  "channel %d: peer %s its connection mid-operation", gone.bound->job->channel,
                  gone.state == PeerState::Dead ? "died and left" : "closed");
}

ncclResult_t HostEngine::stalledRound(WaitPolicy& wait, Stall& stall, const Waited& waited) {
  // Nobody moved for a while: look at the peers we wait on and the deadline, then nap.
  const auto now = Clock::now();
  if (const uint32_t asked = comm_->calls.lanesAsked(); asked != lanesAnswered_) {
    lanesAnswered_ = asked;  // a hang report (src/trace/hang_report.h) wants our lanes
    reportStuck();
  }
  if (wait.stallStarts()) {
    stall.lastProgress = stall.lastPeerCheck = now;
    stall.posted = false;
  } else if (!stall.posted) {
    // Posted only once a nap has passed without progress: most waits end within the first
    // nap, and a peer reads the posted call only at its first peer check, 20 ms into its own
    // stall (below), so posting at once would cost every short wait for nothing.
    postStuckCall();
    stall.posted = true;
  }
  if (now - stall.lastPeerCheck > std::chrono::milliseconds(20)) {
    stall.lastPeerCheck = now;
    stall.gone = findGonePeer();
    // Look once more before failing: what the peer sent before it left still counts.
    if (stall.gone.conn) {
      stall.goneAt = now;
      return ncclSuccess;
    }
    RINGCC_CHECK(findMismatchedPeer());
    RINGCC_CHECK(findToldMismatch(/*tellBack=*/true));
  }
  if (now - stall.lastProgress > params_.timeout) return timedOut();
  // Sleep on one counter we wait for; with several blocked lanes the nap is shorter, since the
  // one that moves first may be another.
  if (waited.counter) wait.nap(waited.counter, waited.value, waited.blocked > 1 ? 200 : 1000);
  return ncclSuccess;
}

void HostEngine::postStuckCall() {
  // Tell every peer which call we are in, in case mismatched calls leave both sides waiting
  // (findMismatchedPeer). Only once stuck, off the fast path: a peer looks at it only when it
  // is stuck too.
  conns_.forEach([&](const Connector& c) { postCall(c, batchSeq_, batchSig_); });
  // A network connection's posted call stays in this host's memory: its peer is told over the
  // bootstrap instead (src/exec/call_watch.h), and told calls are compared too.
  watch_.expect(batchSeq_, batchSig_);
  if (batchSig_.coll != kSigGroup) tellNetworkPeers();
}

ncclResult_t HostEngine::timedOut() const {
  const std::string first = reportStuck();
  reportStuckProxy();
  reportHangNow(comm_);  // every rank's state, so that the rank everyone waits for is named
  return fail(ncclRemoteError, "collective",
              "no progress for %lld ms (NCCL_TIMEOUT): %s (every waiting lane and a hang "
              "report naming where each rank is are logged, unless NCCL_DEBUG=VERSION)",
              static_cast<long long>(params_.timeout.count()), first.c_str());
}

void HostEngine::reportStuckProxy() const {
  bool network = false;
  conns_.forEach([&](const Connector& c) { network |= c.needsProgress(); });
  if (!network) return;
  const long long ms = Proxy::get().sweepRunningFor().count();
  if (ms >= kStuckSweepMs)
    LOG_REPORT("network proxy: its current sweep has run for %lld ms: it is stuck in a network "
               "transport's call, and no network connection of this process moves meanwhile",
               ms);
}

ncclResult_t HostEngine::findMismatchedPeer() {
  if (batchSig_.coll == kSigGroup) return ncclSuccess;
  PostedCall peer;
  const WaitedOn w = findWaitedOn([&](const Connector& conn) {
    return peerPostedCall(conn, &peer) && peer.seq == batchSeq_ && peer.sig.coll != kSigGroup &&
           !sameSig(peer.sig, batchSig_);
  });
  if (!w.conn) return ncclSuccess;
  failReason_ = kFailMismatch;
  return failPeer(ncclInvalidUsage, w.conn->peerRank(), w.bound->job->name,
                  "the ranks made different calls: rank %d called %s, rank %d called %s (the "
                  "call it posted while waiting, batch %llu)",
                  comm_->rank, describeCall(batchSig_).c_str(), w.conn->peerRank(),
                  describeCall(peer.sig).c_str(), static_cast<unsigned long long>(peer.seq));
}

void HostEngine::tellCallBeforeConnecting(const std::vector<PortKey>& keys) {
  const OpSig& sig = batchSig_;
  if (sig.coll == kSigGroup) return;  // groups are not compared (findMismatchedPeer)
  std::vector<int>& told = toldPeers_;
  told.clear();
  for (const PortKey& k : keys) {
    if (conns_.find(k) || std::find(told.begin(), told.end(), k.peer) != told.end()) continue;
    if (told.empty()) watch_.expect(batchSeq_, sig);
    // Best effort: a peer that cannot be told is found dead by the wait that follows.
    (void)watch_.tell(k.peer, batchSeq_, sig);
    told.push_back(k.peer);
  }
}

void HostEngine::tellNetworkPeers() {
  std::vector<int>& told = toldPeers_;
  told.clear();
  conns_.forEach([&](const Connector& c) {
    if (!c.needsProgress() || c.peerState() != PeerState::Open ||
        std::find(told.begin(), told.end(), c.peerRank()) != told.end())
      return;
    (void)watch_.tell(c.peerRank(), batchSeq_, batchSig_);  // best effort, as above
    told.push_back(c.peerRank());
  });
}

ncclResult_t HostEngine::findToldMismatch(bool tellBack) {
  int peer = -1;
  OpSig theirs{};
  if (!watch_.mismatch(&peer, &theirs)) return ncclSuccess;
  const OpSig& mine = batchSig_;
  if (tellBack) (void)watch_.tell(peer, batchSeq_, mine);
  failReason_ = kFailMismatch;
  return failPeer(ncclInvalidUsage, peer, "collective",
                  "the ranks made different calls: rank %d called %s, rank %d called %s (told "
                  "over the bootstrap)",
                  comm_->rank, describeCall(mine).c_str(), peer, describeCall(theirs).c_str());
}

ncclResult_t HostEngine::runFailed(const Bound& b, RunError e) {
  const PlanJob& job = *b.job;
  switch (e) {
    case kRunErrMismatch: {  // a peer made another call: the user's error, named
      OpSig theirs, mine;
      const uint8_t port = b.runner.mismatch(&theirs, &mine);
      const int peer = port < job.program->nPorts ? job.program->ports[port].peer : -1;
      failReason_ = kFailMismatch;
      return failPeer(ncclInvalidUsage, peer, job.name,
                      "the ranks made different calls: rank %d called %s, rank %d called %s (the "
                      "signature of the slot it sent, channel %d)",
                      comm_->rank, describeCall(mine).c_str(), peer, describeCall(theirs).c_str(),
                      job.channel);
    }
    case kRunErrSliceSize:  // the ranks disagree on what they run
      return fail(ncclInvalidUsage, job.name, "channel %d: %s", job.channel, runErrorText(e));
    case kRunErrRefRead:  // the peer exited, or its buffer went away, while we read it
      return fail(ncclRemoteError, job.name,
                  "channel %d: %s (the sending rank exited or freed its buffer mid-operation)",
                  job.channel, runErrorText(e));
    default:
      return fail(ncclInternalError, job.name, "channel %d: %s", job.channel, runErrorText(e));
  }
}

template <typename Pred>
HostEngine::WaitedOn HostEngine::findWaitedOn(Pred&& pred) const {
  for (size_t c = 0; c < queues_.size(); ++c) {
    if (head_[c] == queues_[c].size()) continue;
    const Bound* b = queues_[c][head_[c]];
    // A runner whose lanes are done may still wait for the release of its references.
    if (uint8_t port = b->runner.drainPort(); port < b->connectors.size())
      if (pred(*b->connectors[port])) return WaitedOn{b, b->connectors[port]};
    for (int l = 0; l < b->job->program->nLanes; ++l) {
      LaneStatus s = b->runner.laneStatus(l);
      if ((s.wait != kLaneWaitRecv && s.wait != kLaneWaitSend) || s.port >= b->connectors.size())
        continue;
      if (pred(*b->connectors[s.port])) return WaitedOn{b, b->connectors[s.port]};
    }
  }
  return WaitedOn{};
}

HostEngine::GonePeer HostEngine::findGonePeer() const {
  // Only the ports some lane is blocked on: a peer that finished its part with us and left
  // (say, a ring neighbour that already has all its data) is no reason to fail.
  PeerState state = PeerState::Open;
  const WaitedOn w = findWaitedOn([&](const Connector& conn) {
    state = conn.peerState();
    return state != PeerState::Open;
  });
  return w.conn ? GonePeer{w.bound, w.conn, state} : GonePeer{};
}

std::string HostEngine::reportStuck() const {
  std::string first;
  for (size_t j = 0; j < plan_.nJobs; ++j) {
    const Bound& b = *bound_[j];
    const PlanJob& job = *b.job;
    if (b.runner.done()) continue;
    if (uint8_t port = b.runner.drainPort(); port != kNoPort) {
      char line[256];
      std::snprintf(line, sizeof(line),
                    "%s %s channel %d: done, but waiting for peer %d to release the buffers it "
                    "reads by reference (protocol Direct)",
                    job.name, callNumber(job).c_str(), job.channel, job.program->ports[port].peer);
      LOG_REPORT("%s", line);
      if (first.empty()) first = line;
    }
    for (int l = 0; l < job.program->nLanes; ++l) {
      LaneStatus st = b.runner.laneStatus(l);
      if (st.wait == kLaneDone) continue;
      char line[256];
      if (st.wait == kLaneWaitLane) {
        std::snprintf(line, sizeof(line), "%s %s channel %d lane %d: waiting for lane %d to finish",
                      job.name, callNumber(job).c_str(), job.channel, l,
                      job.program->lanes[l].after);
      } else {
        const int peer = st.port != kNoPort ? job.program->ports[st.port].peer : -1;
        std::snprintf(
            line, sizeof(line),
            "%s %s channel %d lane %d: waiting to %s peer %d at step %u repetition %u loop "
            "%llu (%llu/%llu bytes of the step done, slot %u, protocol %s)",
            job.name, callNumber(job).c_str(), job.channel, l,
            st.wait == kLaneWaitRecv ? "receive from" : "send to", peer, st.step, st.rep,
            static_cast<unsigned long long>(st.loop),
            static_cast<unsigned long long>(st.stepDone * job.elemSize),
            static_cast<unsigned long long>(st.stepCount * job.elemSize), st.counter,
            protocolName(job.protocol));
      }
      LOG_REPORT("%s", line);
      // The error text names the first lane that waits on a peer, else the first that waits.
      const bool onPeer = st.wait == kLaneWaitRecv || st.wait == kLaneWaitSend;
      if (first.empty() || (onPeer && first.find("waiting to") == std::string::npos)) first = line;
    }
  }
  return first.empty() ? std::string("no lane is waiting") : first;
}

}  // namespace ringcc
