#include "src/exec/host_engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "kernels/dtypes.h"
#include "kernels/prims.h"
#include "kernels/red_op.h"
#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "src/sched/builders.h"
#include "src/tune/tune.h"
#include "transports/fifo_host.h"

namespace ringcc {
namespace {

using Clock = std::chrono::steady_clock;

// Idle polls of the runners before the engine starts yielding the core between polls.
constexpr int kPollsBeforeYield = 32;

void wakeWord(void*, uint32_t* word) {
  // `value` is FifoCounter's first member, so the word's address is the counter's.
  wakeCounter(reinterpret_cast<FifoCounter*>(word));
}

}  // namespace

// One Program bound to its buffers and connections.
struct HostEngine::Job {
  int channel = 0;
  const char* name = "";
  const Program* program = nullptr;     // from the plan cache, or ownProgram
  std::unique_ptr<Program> ownProgram;  // grouped send/recv, built for this batch
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  ncclDataType_t type = ncclInt8;
  RedOp op{};
  std::vector<ConnectorView> views;
  std::vector<const Connector*> connectors;
  ProgramRunner runner;
};

namespace {

int64_t positive(const char* name) { return std::max<int64_t>(1, paramInt(name)); }

}  // namespace

HostEngine::HostEngine(ncclComm* comm)
    : comm_(comm),
      params_{static_cast<int>(positive("MAX_NCHANNELS")),
              static_cast<int>(positive("MIN_NCHANNELS")), static_cast<int>(positive("SPIN_COUNT")),
              std::chrono::milliseconds(positive("TIMEOUT"))},
      conns_(comm) {
  thread_ = std::thread([this] { threadMain(); });
}

HostEngine::Job* HostEngine::newJob() {
  if (nJobs_ == jobs_.size()) jobs_.push_back(std::make_unique<Job>());
  Job* job = jobs_[nJobs_++].get();
  job->inputs.clear();
  job->outputs.clear();
  return job;
}

HostEngine::~HostEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_ = true;
  }
  abortOps_.store(true);
  cv_.notify_all();
  thread_.join();
}

ncclResult_t HostEngine::connectRing() {
  if (comm_->nranks == 1) return ncclSuccess;
  int next = (comm_->rank + 1) % comm_->nranks;
  int prev = (comm_->rank + comm_->nranks - 1) % comm_->nranks;
  return conns_.ensure(
      {PortKey{0, kPortRing, prev, kPortRecv}, PortKey{0, kPortRing, next, kPortSend}});
}

ncclResult_t HostEngine::submit(const std::vector<CollArgs>& ops) {
  std::lock_guard<std::mutex> lock(mu_);
  if (hasBatch_) return fail(ncclInternalError, "submit", "a batch is already running");
  batch_ = ops;
  hasBatch_ = true;
  batchDone_ = false;
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t HostEngine::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return batchDone_; });
  hasBatch_ = false;
  batchDone_ = false;
  return result_;
}

ncclResult_t HostEngine::run(std::span<const CollArgs> ops) {
  LogRankScope scope(comm_->rank);
  return runBatch(ops);
}

void HostEngine::abortOps() { abortOps_.store(true); }

bool HostEngine::stopRequested() const {
  return abortOps_.load(std::memory_order_relaxed) ||
         comm_->abortFlag.load(std::memory_order_relaxed);
}

ncclResult_t HostEngine::stopped(const char* phase) const {
  return fail(ncclInvalidUsage, "collective", "stopped while %s: the communicator was %s", phase,
              comm_->revoked.load() ? "revoked" : "aborted");
}

void HostEngine::threadMain() {
  LogRankScope scope(comm_->rank);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return exit_ || (hasBatch_ && !batchDone_); });
    if (exit_) return;
    lock.unlock();
    // batch_ stays untouched until wait() has seen batchDone_: submit() refuses a second batch.
    ncclResult_t r = runBatch(batch_);
    lock.lock();
    result_ = r;
    batchDone_ = true;
    cv_.notify_all();
  }
}

ncclResult_t HostEngine::runBatch(std::span<const CollArgs> ops) {
  ncclResult_t r = planAndRun(ops);
  if (r != ncclSuccess && conns_.size() > 0) {
    // The failed batch left our FIFOs out of step with the peers', so the connections are
    // of no further use (and the communicator refuses new operations). Closing them tells
    // every peer still inside this operation, which would otherwise wait on us until its
    // NCCL_TIMEOUT: a failure spreads around the ring in bounded time.
    LOG_INFO(kLogColl, "closing %zu connections after a failed operation", conns_.size());
    for (size_t j = 0; j < nJobs_; ++j) jobs_[j]->connectors.clear();
    nJobs_ = 0;
    conns_.closeAll();
  }
  return r;
}

ncclResult_t HostEngine::planAndRun(std::span<const CollArgs> ops) {
  if (stopRequested()) return fail(ncclInvalidUsage, "collective", "communicator was aborted");
  nJobs_ = 0;
  plans_.beginBatch();
  RINGCC_CHECK(planBatch(ops));
  if (nJobs_ == 0) return ncclSuccess;
  RINGCC_CHECK(bindJobs());
  return runJobs();
}

ncclResult_t HostEngine::planBatch(std::span<const CollArgs> ops) {
  const int nranks = comm_->nranks;
  std::vector<const CollArgs*> p2pOps;  // every send and receive, in posting order
  for (const CollArgs& a : ops) {
    if (a.count == 0) continue;  // nothing moves, on every rank alike
    if (a.kind == Coll::Send || a.kind == Coll::Recv) {
      p2pOps.push_back(&a);
      continue;
    }

    RedOp op;
    if (a.op >= ncclNumOps) {
      UserOp u;
      if (!comm_->userOps.find(a.op, &u))
        return fail(ncclInvalidArgument, collName(a.kind), "op %d was destroyed", a.op);
      op = makePreMulSum(a.datatype, u.residence == ncclScalarDevice ? u.scalarPtr : u.scalar,
                         u.residence == ncclScalarDevice);
    } else {
      op = makeRedOp(a.op, a.datatype, nranks);
    }
    const size_t elemSize = dataTypeSize(a.datatype);
    TuneInput tune{nranks, params_.maxChannels, params_.minChannels};
    const int nch = chooseChannels(tune);
    for (int c = 0; c < nch; ++c) {
      CollDesc d;
      d.coll = a.kind;
      d.count = a.count;
      d.elemSize = elemSize;
      d.nranks = nranks;
      d.rank = comm_->rank;
      d.root = a.root;
      d.nChannels = nch;
      d.channel = c;
      d.sliceElems = conns_.spec(collPortKind(a.kind)).slotBytes / elemSize;
      const Program* program = nullptr;
      RINGCC_CHECK(plans_.get(d, &program));
      Job* job = newJob();
      job->program = program;
      job->channel = c;
      job->name = collName(a.kind);
      job->type = a.datatype;
      job->op = op;
      job->inputs.assign(std::max<int>(1, program->nBuffers), a.sendbuff);
      job->outputs.assign(std::max<int>(1, program->nBuffers), a.recvbuff);
    }
  }
  return planP2p(p2pOps);
}

// The sends and receives of a batch run as grouped Programs on channel 0, after its
// collectives. They count bytes, so that operations of different datatypes share them.
//
// NCCL bounds neither the operations of a group nor those to one peer; a Program holds
// kMaxLanes lanes and kMaxBuffers buffers. So the i-th operation to a given peer and
// direction belongs to round i / perRound, with perRound = kMaxLanes / (2 nranks) so that a
// round fits one Program, and whole rounds are packed into Programs in order. Every rank
// computes the rounds alike, so an operation and its match on the peer are in the same
// round. A Program starts when the one before it is done, so round k never waits for a
// later round on any rank, whichever rounds each rank packed together: the rounds finish
// one after another everywhere. A group that fits one Program is one Program.
ncclResult_t HostEngine::planP2p(const std::vector<const CollArgs*>& ops) {
  if (ops.empty()) return ncclSuccess;
  const int nranks = comm_->nranks;
  const size_t perRound = std::max(1, kMaxLanes / (2 * nranks));
  std::vector<size_t> posted(2 * static_cast<size_t>(nranks), 0);  // per (peer, direction)
  std::vector<size_t> round(ops.size());
  std::vector<size_t> roundOps;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CollArgs& a = *ops[i];
    size_t& k = posted[2 * static_cast<size_t>(a.root) + (a.kind == Coll::Send ? 1 : 0)];
    round[i] = k++ / perRound;
    if (round[i] >= roundOps.size()) roundOps.resize(round[i] + 1, 0);
    ++roundOps[round[i]];
  }

  for (size_t first = 0; first < roundOps.size();) {
    size_t last = first, total = roundOps[first];
    while (last + 1 < roundOps.size() && total + roundOps[last + 1] <= kMaxLanes)
      total += roundOps[++last];
    Job* job = newJob();
    job->channel = 0;
    job->type = ncclUint8;
    job->op = makeRedOp(ncclSum, ncclUint8, nranks);
    job->name = "send/recv";
    P2pDesc p2p;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (round[i] < first || round[i] > last) continue;
      const CollArgs& a = *ops[i];
      P2pOp p;
      p.send = a.kind == Coll::Send;
      p.peer = a.root;
      p.count = a.count * dataTypeSize(a.datatype);
      if (p.send) {
        p.buffer = static_cast<int>(job->inputs.size());
        job->inputs.push_back(a.sendbuff);
      } else {
        p.buffer = static_cast<int>(job->outputs.size());
        job->outputs.push_back(a.recvbuff);
      }
      p2p.ops.push_back(p);
    }
    p2p.nranks = nranks;
    p2p.rank = comm_->rank;
    p2p.nChannels = 1;
    p2p.channel = 0;
    p2p.elemSize = 1;
    p2p.sliceElems = conns_.spec(kPortP2p).slotBytes;
    if (!job->ownProgram) job->ownProgram = std::make_unique<Program>();
    RINGCC_CHECK(buildP2p(p2p, job->ownProgram.get()));
    job->program = job->ownProgram.get();
    // The runner indexes inputs and outputs by the same buffer number.
    size_t n = std::max<size_t>(
        {job->inputs.size(), job->outputs.size(), static_cast<size_t>(job->program->nBuffers), 1});
    job->inputs.resize(n, nullptr);
    job->outputs.resize(n, nullptr);
    first = last + 1;
  }
  return ncclSuccess;
}

ncclResult_t HostEngine::bindJobs() {
  std::vector<PortKey>& keys = keys_;
  keys.clear();
  for (size_t j = 0; j < nJobs_; ++j) {
    const Job& job = *jobs_[j];
    for (int i = 0; i < job.program->nPorts; ++i) {
      const Port& p = job.program->ports[i];
      keys.push_back(PortKey{job.channel, p.kind, p.peer, p.dir});
    }
  }
  // Making connections waits on the peers like the rest of the operation does: until an
  // abort or revoke, or NCCL_TIMEOUT.
  ncclResult_t connected = conns_.ensure(keys, &abortOps_, params_.timeout.count());
  if (connected != ncclSuccess && stopRequested()) return stopped("connecting");
  RINGCC_CHECK(connected);
  for (size_t j = 0; j < nJobs_; ++j) {
    Job* job = jobs_[j].get();
    const Program& g = *job->program;
    job->views.resize(g.nPorts);
    job->connectors.resize(g.nPorts);
    for (int i = 0; i < g.nPorts; ++i) {
      const Port& p = g.ports[i];
      const Connector* conn = conns_.find(PortKey{job->channel, p.kind, p.peer, p.dir});
      if (conn == nullptr)
        return fail(ncclInternalError, job->name, "no connection for port %d (peer %d)", i, p.peer);
      job->views[i] = conn->view();
      job->connectors[i] = conn;
    }
    ProgramRunner::Params params{};
    params.program = job->program;
    params.ports = job->views.data();
    params.inputs = job->inputs.data();
    params.outputs = job->outputs.data();
    params.type = job->type;
    params.op = job->op;
    params.wake = wakeWord;
    params.wakeCtx = nullptr;
    if (const char* why = job->runner.init(params))
      return fail(ncclInternalError, job->name, "cannot run the program: %s", why);
  }
  return ncclSuccess;
}

ncclResult_t HostEngine::runJobs() {
  // Per channel, jobs run in call order; channels run side by side.
  int nChannels = 0;
  for (size_t j = 0; j < nJobs_; ++j) nChannels = std::max(nChannels, jobs_[j]->channel + 1);
  std::vector<std::vector<Job*>>& queues = queues_;
  std::vector<size_t>& head = head_;
  queues.resize(nChannels);  // exactly: findGonePeer walks every queue
  for (auto& q : queues) q.clear();
  for (size_t j = 0; j < nJobs_; ++j) queues[jobs_[j]->channel].push_back(jobs_[j].get());
  head.assign(nChannels, 0);

  // The clock is read only once the loop has gone idle, not on every round.
  Clock::time_point lastProgress{}, lastPeerCheck{};
  int idleRounds = 0;
  GonePeer gone;

  while (true) {
    bool allDone = true, progressed = false;
    FifoCounter* waitOn = nullptr;
    uint32_t waitValue = 0;
    int blocked = 0;
    for (int c = 0; c < nChannels; ++c) {
      while (head[c] < queues[c].size()) {
        Job* job = queues[c][head[c]];
        AdvanceResult r = job->runner.advance();
        if (r.error) return fail(ncclInternalError, job->name, "channel %d: %s", c, r.error);
        progressed |= r.progressed;
        if (!r.done) {
          if (r.waitOn && blocked++ == 0) {
            waitOn = r.waitOn;
            waitValue = r.waitValue;
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
      idleRounds = 0;
      gone = GonePeer{};
      continue;
    }
    if (gone.conn)  // still stuck one round after it left: nothing more can come
      return failPeer(ncclRemoteError, gone.conn->peerRank(), gone.job->name,
                      "channel %d: peer %s its connection mid-operation", gone.job->channel,
                      gone.state == PeerState::Dead ? "died and left" : "closed");
    if (++idleRounds < params_.spinCount) {
      // Give the core away between polls: on a machine with more ranks than cores the peer
      // we wait for may need it; on an idle core sched_yield returns at once.
      if (idleRounds > kPollsBeforeYield) sched_yield();
      continue;
    }

    // Nobody moved for a while: look at the peers we wait on and the deadline, then nap.
    auto now = Clock::now();
    if (idleRounds == params_.spinCount) lastProgress = lastPeerCheck = now;
    if (now - lastPeerCheck > std::chrono::milliseconds(20)) {
      lastPeerCheck = now;
      gone = findGonePeer(queues, head);
      // Look once more before failing: what the peer sent before it left still counts.
      if (gone.conn) continue;
    }
    if (now - lastProgress > params_.timeout) {
      reportStuck();
      return fail(ncclRemoteError, "collective",
                  "no progress for %lld ms (NCCL_TIMEOUT); see the WARN lines above for where "
                  "each channel waits",
                  static_cast<long long>(params_.timeout.count()));
    }
    // Sleep on one counter we wait for; with several blocked lanes the nap is shorter,
    // since the one that moves first may be another.
    if (waitOn) napOnCounter(waitOn, waitValue, blocked > 1 ? 200 : 1000);
  }
}

HostEngine::GonePeer HostEngine::findGonePeer(const std::vector<std::vector<Job*>>& queues,
                                              const std::vector<size_t>& head) const {
  // Only the ports some lane is blocked on: a peer that finished its part with us and left
  // (say, a ring neighbour that already has all its data) is no reason to fail.
  for (size_t c = 0; c < queues.size(); ++c) {
    if (head[c] == queues[c].size()) continue;
    const Job* job = queues[c][head[c]];
    for (int l = 0; l < job->program->nLanes; ++l) {
      LaneStatus s = job->runner.laneStatus(l);
      if ((s.wait != kLaneWaitRecv && s.wait != kLaneWaitSend) || s.port >= job->connectors.size())
        continue;
      const Connector* conn = job->connectors[s.port];
      PeerState state = conn->peerState();
      if (state != PeerState::Open) return GonePeer{job, conn, state};
    }
  }
  return GonePeer{};
}

void HostEngine::reportStuck() const {
  for (size_t j = 0; j < nJobs_; ++j) {
    const Job& job = *jobs_[j];
    if (job.runner.done()) continue;
    for (int l = 0; l < job.program->nLanes; ++l) {
      LaneStatus st = job.runner.laneStatus(l);
      if (st.wait == kLaneDone) continue;
      int peer = st.port != kNoPort ? job.program->ports[st.port].peer : -1;
      const char* what = st.wait == kLaneWaitRecv   ? "receive from"
                         : st.wait == kLaneWaitSend ? "send to"
                                                    : "start after lane";
      LOG_WARN(
          "%s channel %d lane %d: waiting to %s peer %d at step %u loop %u (%llu/%llu "
          "elements of the step done, slot %u)",
          job.name, job.channel, l, what, peer, st.step, st.loop,
          static_cast<unsigned long long>(st.stepDone),
          static_cast<unsigned long long>(st.stepCount), st.counter);
    }
  }
}

}  // namespace ringcc
