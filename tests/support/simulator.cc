// Simulator: every rank planned by the real planner, the real ProgramRunner, heap FIFOs, one
// thread.
#include "support/simulator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "kernels/cuda/batch_args.h"
#include "kernels/cuda/batch_block.h"
#include "kernels/dtypes.h"
#include "kernels/prims.h"
#include "src/base/error.h"
#include "src/plan/planner.h"
#include "support/simt.h"

namespace ringcc {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// One connection: slots, LL lines and control block shared by its sender and receiver.
struct SimFifo {
  int channel, kind, src, dst;
  std::vector<char> slots;
  std::unique_ptr<char, FreeDeleter> llSlots;
  std::unique_ptr<FifoControl, FreeDeleter> control;
  ConnectorView view;
};

// One rank's planned job, with its own copy of the Program (tests may break it on purpose).
struct SimJob {
  int rank = 0;
  int caseIndex = 0;  // jobs of one (rank, channel) run in case order
  PlanJob job;        // a copy of the planned job, so that tests may change it
  Program program;
  std::vector<ConnectorView> views;
  std::vector<size_t> inElems, outElems;  // per buffer, for the bounds check
  ProgramRunner runner;
  int channel() const { return job.channel; }
};

// Counter stores of one rank that the others do not see yet (SimSpec::lagCounters), oldest
// first: a store buffer, flushed in order.
using PendingStores = std::vector<std::pair<FifoCounter*, uint32_t>>;

// Plain atomics; nobody sleeps in the simulator, so nobody is woken. With `pending` set (the
// rank now running, under lagCounters), publishes wait there and that rank's loads see them.
struct SimSync {
  PendingStores* pending = nullptr;
  uint32_t load(const uint32_t* word) const {
    if (pending)
      for (auto it = pending->rbegin(); it != pending->rend(); ++it)
        if (&it->first->value == word) return it->second;
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
  }
  void publish(FifoCounter* c, uint32_t v) const {
    if (pending)
      pending->push_back({c, v});
    else
      __atomic_store_n(&c->value, v, __ATOMIC_RELEASE);
  }
};

// Makes the oldest `n` pending stores visible, in order.
void flushStores(PendingStores* p, size_t n) {
  n = std::min(n, p->size());
  for (size_t i = 0; i < n; i++)
    __atomic_store_n(&(*p)[i].first->value, (*p)[i].second, __ATOMIC_RELEASE);
  p->erase(p->begin(), p->begin() + static_cast<std::ptrdiff_t>(n));
}

struct EngineOptions {
  int nranks;
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t llSlotBytes;
  uint32_t counterStart;
  uint32_t slicesPerTurn;
  uint32_t seed;
  uint32_t lagCounters;
  uint32_t simtThreads;
};

std::string stepFlagsText(uint8_t f) {
  std::string s;
  auto add = [&](uint8_t bit, const char* name) {
    if (!(f & bit)) return;
    if (!s.empty()) s += "|";
    s += name;
  };
  add(kStepRecv, "recv");
  add(kStepLocal, "local");
  add(kStepOut, "out");
  add(kStepSend, "send");
  add(kStepPost, "post");
  return s;
}

std::string where(const SimJob& j, int lane) {
  return "rank " + std::to_string(j.rank) + " channel " + std::to_string(j.channel()) + " lane " +
         std::to_string(lane);
}

// Every element a step touches lies inside its buffer, in every loop and every repetition
// (after init: the geometry and the ring order are the runner's own).
bool checkBounds(const SimJob& j, std::string* error) {
  const Program& p = j.program;
  const RunArgs& args = j.runner.args();
  for (int li = 0; li < p.nLanes; li++) {
    const Lane& l = p.lanes[li];
    const LaneGeometry& g = j.runner.laneGeometryOf(li);
    for (uint64_t loop = 0; loop < g.nLoops; loop++) {
      bool any = false;
      for (int k = l.firstStep; k < l.firstStep + l.nSteps; k++) {
        for (uint32_t rep = 0; rep <= p.steps[k].repeat; rep++) {
          const Step s =
              stepRepetition(p.steps[k], l.chunksPerLoop, rep, args.ringRanks, p.ringSize);
          uint64_t n = stepCount(g, s, loop);
          if (n == 0) continue;
          any = true;
          bool inBad = (s.flags & kStepLocal) && stepInOffset(g, s, loop) + n > j.inElems[l.inBuf];
          bool outBad =
              (s.flags & kStepOut) && stepOutOffset(g, s, loop) + n > j.outElems[l.outBuf];
          if (!inBad && !outBad) continue;
          *error = where(j, li) + " loop " + std::to_string(loop) + " step " + std::to_string(k) +
                   (p.steps[k].repeat ? " repetition " + std::to_string(rep) : std::string()) +
                   ": " + (inBad ? "input" : "output") + " range [" +
                   std::to_string(inBad ? stepInOffset(g, s, loop) : stepOutOffset(g, s, loop)) +
                   ", +" + std::to_string(n) + ") exceeds the buffer of " +
                   std::to_string(inBad ? j.inElems[l.inBuf] : j.outElems[l.outBuf]) + " elements";
          return false;
        }
      }
      if (!any) break;  // positions only grow: later loops are empty too
    }
  }
  return true;
}

// The job each (rank, channel) queue is running, in a stable order.
using Queues = std::vector<std::vector<SimJob*>>;

std::string deadlockReport(const Queues& queues, const std::vector<size_t>& head) {
  std::string out = "deadlock: no rank can progress";
  int shown = 0;
  for (size_t q = 0; q < queues.size(); q++) {
    if (head[q] >= queues[q].size()) continue;
    const SimJob& j = *queues[q][head[q]];
    for (int li = 0; li < j.program.nLanes; li++) {
      LaneStatus st = j.runner.laneStatus(li);
      if (st.wait == kLaneDone) continue;
      if (++shown > 16) {
        out += "\n  ...";
        return out;
      }
      const Step& s = j.program.steps[st.step];
      out += "\n  " + where(j, li) + ": ";
      if (j.caseIndex > 0) out += "collective " + std::to_string(j.caseIndex) + " ";
      out += "loop " + std::to_string(st.loop) + " step " + std::to_string(st.step) +
             (s.repeat ? " repetition " + std::to_string(st.rep) : std::string()) + " (" +
             stepFlagsText(s.flags) + ") " + std::to_string(st.stepDone) + "/" +
             std::to_string(st.stepCount) + " elements, ";
      if (st.wait == kLaneWaitRecv || st.wait == kLaneWaitSend) {
        const Port& port = j.program.ports[st.port];
        out += st.wait == kLaneWaitRecv ? "waits for data from rank " : "waits for room at rank ";
        out += std::to_string(port.peer) + " (slot " + std::to_string(st.counter) + ")";
      } else if (st.wait == kLaneWaitLane) {
        out += "waits for lane " + std::to_string(j.program.lanes[li].after);
      } else {
        out += "not blocked";
      }
    }
  }
  return out;
}

// One rank's launch of the batch kernel in the SIMT emulation: its jobs in table order, the
// scratch of every channel, the status words.
struct SimtLaunch {
  BatchArgs args{};
  std::vector<ChannelScratch> scratch;
  std::vector<uint32_t> status;
};

// Runs every rank's jobs as one batch kernel launch per rank (SimSpec::simtThreads), all
// ranks at once. "" or why it failed.
std::string runSimt(const std::vector<std::unique_ptr<SimJob>>& jobs, const EngineOptions& o) {
  std::vector<std::unique_ptr<SimtLaunch>> launches(static_cast<size_t>(o.nranks));
  for (auto& l : launches) l = std::make_unique<SimtLaunch>();
  std::vector<const SimJob*> ordered;
  for (const auto& j : jobs) ordered.push_back(j.get());
  // Per rank in case order (the jobs of one case in the planner's order), as a batch runs.
  std::stable_sort(ordered.begin(), ordered.end(), [](const SimJob* a, const SimJob* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->caseIndex < b->caseIndex;
  });
  for (const SimJob* j : ordered) {
    SimtLaunch& l = *launches[static_cast<size_t>(j->rank)];
    BatchArgs& a = l.args;
    const Program& p = j->program;
    const uint32_t nWords = 2u * p.nBuffers + p.nCounts;
    uint32_t at = 0;
    for (uint32_t k = 0; k < a.nJobs; ++k) at += 2u * a.jobs[k].nBuffers + a.jobs[k].nCounts;
    if (a.nJobs == kLaunchMaxJobs || at + nWords > kLaunchWords)
      return "rank " + std::to_string(j->rank) + ": the batch does not fit one launch";
    DeviceJob& d = a.jobs[a.nJobs++];
    const PlanJob& pj = j->job;
    d.program = &p;
    d.ports = j->views.data();
    d.ringRanks = pj.ringRanks;
    d.op = pj.op;
    d.sliceElems = pj.sliceElems;
    d.chunkElems = pj.chunkElems;
    d.type = pj.type;
    d.elemSize = pj.elemSize;
    d.nChannels = pj.nChannels;
    d.channel = static_cast<uint32_t>(pj.channel);
    d.sigRoot = pj.sig.root;
    d.nRingRanks = pj.nRingRanks;
    d.wordsAt = static_cast<uint16_t>(at);
    d.nBuffers = p.nBuffers;
    d.nCounts = p.nCounts;
    d.protocol = pj.protocol;
    d.sigColl = pj.sig.coll;
    d.sigOp = pj.sig.op;
    for (uint32_t b = 0; b < p.nBuffers; ++b) {
      a.words[at + b] = reinterpret_cast<uintptr_t>(pj.inputs[b]);
      a.words[at + p.nBuffers + b] = reinterpret_cast<uintptr_t>(pj.outputs[b]);
    }
    for (uint32_t c = 0; c < p.nCounts; ++c) a.words[at + 2u * p.nBuffers + c] = pj.counts[c];
    a.nBlocks = std::max(a.nBlocks, d.channel + 1);
  }
  std::vector<simt::Launch> grid;
  for (auto& l : launches) {
    BatchArgs& a = l->args;
    if (a.nBlocks == 0) continue;
    l->scratch.resize(a.nBlocks);
    l->status.assign(a.nBlocks, 0);
    a.scratch = l->scratch.data();
    a.abortFlag = nullptr;
    a.status = l->status.data();
    a.timeoutNs = 60ull * 1000 * 1000 * 1000;  // a hang stops the blocks, with a status
    grid.push_back(simt::Launch{[&a](simt::Thread& t) { runBatchBlock(a, t); }, a.nBlocks,
                                o.simtThreads});
  }
  if (std::string error = simt::runGrid(grid); !error.empty()) return "SIMT: " + error;
  for (size_t r = 0; r < launches.size(); ++r)
    for (size_t b = 0; b < launches[r]->status.size(); ++b)
      if (const uint32_t st = launches[r]->status[b]; st != kBlockOk)
        return "rank " + std::to_string(r) + " block " + std::to_string(b) + " stopped: status " +
               std::to_string(st & 0xff) + " (" +
               ((st & 0xff) == kBlockRunError ? runErrorText(static_cast<RunError>(st >> 8))
                                              : "see BlockStatus") +
               ")";
  return "";
}

using FifoMap = std::map<std::tuple<int, int, int, int>, std::unique_ptr<SimFifo>>;
void runTurns(const EngineOptions& o,
              std::map<std::pair<int, int>, std::vector<SimJob*>>& byRankChannel, SimResult* res);
void checkLeftovers(const FifoMap& fifos, SimResult* res);

// Connects, checks and runs `jobs` to completion or failure.
void runJobs(std::vector<std::unique_ptr<SimJob>>& jobs, const EngineOptions& o, SimResult* res) {
  auto failWith = [&](const std::string& why) {
    res->result = ncclInternalError;
    res->error = why;
  };
  for (const auto& j : jobs)
    if (const char* why = checkProgram(j->program))
      return failWith(where(*j, 0) + ": invalid program: " + why);

  // One FIFO per (channel, kind, sender, receiver) that some port names.
  FifoMap fifos;
  for (auto& j : jobs) {
    const Program& p = j->program;
    j->views.resize(p.nPorts);
    for (int i = 0; i < p.nPorts; i++) {
      const Port& port = p.ports[i];
      if (port.peer < 0 || port.peer >= o.nranks)
        return failWith(where(*j, 0) + ": port " + std::to_string(i) + " names rank " +
                        std::to_string(port.peer));
      bool send = port.dir == kPortSend;
      auto key = std::make_tuple(j->channel(), (int)port.kind, send ? j->rank : port.peer,
                                 send ? port.peer : j->rank);
      auto& f = fifos[key];
      if (!f) {
        f = std::make_unique<SimFifo>();
        std::tie(f->channel, f->kind, f->src, f->dst) = key;
        f->slots.assign((size_t)o.nSlots * o.slotBytes, 0);
        size_t bytes = (fifoControlBytes(o.nSlots) + 63) / 64 * 64;
        f->control.reset(static_cast<FifoControl*>(std::aligned_alloc(64, bytes)));
        std::memset(f->control.get(), 0, bytes);
        f->control->tail.value = f->control->head.value = o.counterStart;
        // Every rank lives in this process: Direct sends references, read through pointers.
        f->control->refKind = kRefPointer;
        // LL memory starts with every flag at the initial counter value, which no slot of the
        // first lap expects (a transport's zero-filled memory with counters at 0 is the same).
        size_t llBytes = (size_t)o.nSlots * o.llSlotBytes;
        // aligned_alloc wants a whole number of alignments.
        const size_t llAlloc = std::max<size_t>(64, (llBytes + 63) / 64 * 64);
        f->llSlots.reset(static_cast<char*>(std::aligned_alloc(64, llAlloc)));
        LlLine* lines = reinterpret_cast<LlLine*>(f->llSlots.get());
        for (size_t i = 0; i < llBytes / sizeof(LlLine); i++)
          lines[i] = LlLine{0, o.counterStart, 0, o.counterStart};
        f->view = ConnectorView{f->slots.data(),  f->control.get(), o.nSlots, o.slotBytes,
                                f->llSlots.get(), o.llSlotBytes,    0,        nullptr, 0};
      }
      j->views[i] = f->view;
    }
  }

  // Bind everything up front, as an executor does; counters are read at the first acquire.
  std::map<std::pair<int, int>, std::vector<SimJob*>> byRankChannel;
  for (auto& j : jobs) {
    RunArgs args = j->job.runArgs(j->views.data());
    args.program = &j->program;
    if (RunError e = j->runner.init(args); e != kRunOk)
      return failWith(where(*j, 0) + ": " + runErrorText(e));
    std::string error;
    if (!checkBounds(*j, &error)) return failWith(error);
    byRankChannel[{j->rank, j->channel()}].push_back(j.get());
  }
  if (o.simtThreads != 0) {
    if (std::string error = runSimt(jobs, o); !error.empty()) return failWith(error);
  } else {
    runTurns(o, byRankChannel, res);
    if (res->result != ncclSuccess) return;
  }
  checkLeftovers(fifos, res);
}

// The one-thread round robin over the bound runners (the default).
void runTurns(const EngineOptions& o,
              std::map<std::pair<int, int>, std::vector<SimJob*>>& byRankChannel, SimResult* res) {
  auto failWith = [&](const std::string& why) {
    res->result = ncclInternalError;
    res->error = why;
  };
  Queues queues;
  for (auto& [key, list] : byRankChannel) {
    std::stable_sort(list.begin(), list.end(),
                     [](const SimJob* a, const SimJob* b) { return a->caseIndex < b->caseIndex; });
    queues.push_back(list);
  }
  std::vector<size_t> head(queues.size(), 0);
  std::vector<size_t> order(queues.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::mt19937 rng(o.seed);
  std::mt19937 lagRng(o.lagCounters);
  std::vector<PendingStores> pending(static_cast<size_t>(o.nranks));
  auto anyPending = [&] {
    for (const PendingStores& p : pending)
      if (!p.empty()) return true;
    return false;
  };
  SimSync sync;
  for (;;) {
    if (o.seed) std::shuffle(order.begin(), order.end(), rng);
    bool progressed = false, allDone = true;
    for (size_t q : order) {
      while (head[q] < queues[q].size()) {
        SimJob& j = *queues[q][head[q]];
        sync.pending = o.lagCounters ? &pending[static_cast<size_t>(j.rank)] : nullptr;
        AdvanceResult r = j.runner.advance(sync, o.slicesPerTurn);
        if (r.error != kRunOk) return failWith(where(j, 0) + ": " + runErrorText(r.error));
        progressed |= r.progressed;
        res->slices += r.slices;
        if (!r.done) break;
        head[q]++;
        progressed = true;
      }
      if (head[q] < queues[q].size()) allDone = false;
    }
    res->rounds++;
    // Lagging stores land a few at a time, in order; all of them before a round without
    // progress counts as a deadlock, and before the end.
    const bool stuck = !progressed || allDone, hadPending = anyPending();
    for (PendingStores& p : pending) flushStores(&p, stuck ? p.size() : lagRng() % (p.size() + 1));
    if (allDone) break;
    if (!progressed && !hadPending) return failWith(deadlockReport(queues, head));
  }
}

// Data no receive took: a send that no receive matched.
void checkLeftovers(const FifoMap& fifos, SimResult* res) {
  auto failWith = [&](const std::string& why) {
    res->result = ncclInternalError;
    res->error = why;
  };
  for (const auto& [key, f] : fifos) {
    uint32_t left = f->control->tail.value - f->control->head.value;
    if (left != 0)
      return failWith("unmatched send: rank " + std::to_string(f->src) + " -> rank " +
                      std::to_string(f->dst) + " channel " + std::to_string(f->channel) + ": " +
                      std::to_string(left) + " slot(s) never received");
  }
}

// Each rank's planner and plan, kept alive while its jobs run.
struct RankPlans {
  std::vector<std::unique_ptr<Planner>> planners;
  std::vector<std::unique_ptr<Plan>> plans;
};

// Plans `ops` for `rank` with `ctx` and appends one SimJob per planned job. False (res set)
// if planning failed.
bool planRank(const PlanContext& ctx, std::span<const CollArgs> ops, int caseIndex,
              const std::function<void(int, int, Program*)>& mutate,
              const std::function<void(int, PlanJob*)>& mutateJob, RankPlans* keep,
              std::vector<std::unique_ptr<SimJob>>* jobs, SimResult* res) {
  keep->planners.push_back(std::make_unique<Planner>(ctx));
  keep->plans.push_back(std::make_unique<Plan>());
  Plan& plan = *keep->plans.back();
  if (ncclResult_t rc = keep->planners.back()->plan(ops, &plan); rc != ncclSuccess) {
    res->result = rc;
    res->error = "planning rank " + std::to_string(ctx.rank) + " failed: " + lastErrorMessage();
    return false;
  }
  for (size_t i = 0; i < plan.nJobs; i++) {
    auto j = std::make_unique<SimJob>();
    j->rank = ctx.rank;
    j->caseIndex = caseIndex;
    j->job = plan.jobs[i];
    j->program = *plan.jobs[i].program;
    if (mutate) mutate(ctx.rank, j->job.channel, &j->program);
    if (mutateJob) mutateJob(ctx.rank, &j->job);
    jobs->push_back(std::move(j));
  }
  return true;
}

PlanContext simContext(int nranks, int rank, Protocol protocol, uint32_t slotBytes,
                       uint32_t llSlotBytes, uint32_t nSlots, int nChannels, uint64_t chunkBytes) {
  PlanContext ctx;
  ctx.nranks = nranks;
  ctx.rank = rank;
  ctx.ring = ConnGeometry{nSlots, slotBytes, llSlotBytes, 0};
  ctx.p2p = ctx.ring;
  ctx.tune.minChannels = ctx.tune.maxChannels = nChannels;
  ctx.tune.protocols = 1u << protocol;
  ctx.tune.chunkBytes = chunkBytes;
  return ctx;
}

// The algorithm `spec` runs: forced, or Doubling for small all-reduces of a power of two ranks
// (up to doublingMaxBytes), else Ring.
uint32_t simAlgos(const SimSpec& spec) {
  if (spec.algo >= 0) return algoBit(static_cast<Algo>(spec.algo));
  const bool pow2 = spec.nranks >= 2 && (spec.nranks & (spec.nranks - 1)) == 0;
  const uint64_t bytes = spec.count * dataTypeSize(spec.type);
  return spec.coll == Coll::AllReduce && pow2 && bytes <= spec.doublingMaxBytes
             ? algoBit(Algo::Doubling)
             : algoBit(Algo::Ring);
}

// The trees of `spec` (hand-made, or built over its hosts); false with res set if invalid.
bool simTrees(const SimSpec& spec, DoubleTree* trees, SimResult* res) {
  if (!spec.trees.tree[0].empty()) {
    *trees = spec.trees;
    return true;
  }
  if (spec.hosts.empty()) return true;  // the planner's default: one host
  if (ncclResult_t rc = buildDoubleTree(spec.hosts, trees); rc != ncclSuccess) {
    res->result = rc;
    res->error = "buildDoubleTree: " + lastErrorMessage();
    return false;
  }
  return true;
}

// LL slot bytes whose data holds `bytes`: two line bytes per data byte, whole lines, after
// the lines of the sender's signature.
uint32_t llSlotBytesFor(uint64_t bytes) {
  return (uint32_t)((bytes + kLlLineData - 1) / kLlLineData * kLlLineBytes +
                    kLlSigLines * kLlLineBytes);
}

// Where the input sits inside the output (in place), or the output inside the input.
enum class InPlace { None, InInsideOut, OutInsideIn };

InPlace inPlaceLayout(const SimSpec& s, int rank, size_t* offsetElems) {
  *offsetElems = 0;
  if (!s.inPlace) return InPlace::None;
  switch (s.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
      return InPlace::InInsideOut;
    case Coll::AllGather:
      *offsetElems = (size_t)rank * s.count;
      return InPlace::InInsideOut;
    case Coll::Gather:
      if (rank != s.root) return InPlace::None;
      *offsetElems = (size_t)rank * s.count;
      return InPlace::InInsideOut;
    case Coll::ReduceScatter:
      *offsetElems = (size_t)rank * s.count;
      return InPlace::OutInsideIn;
    case Coll::Scatter:
      if (rank != s.root) return InPlace::None;
      *offsetElems = (size_t)rank * s.count;
      return InPlace::OutInsideIn;
    default:
      return InPlace::None;
  }
}

}  // namespace

size_t simInputElems(const SimSpec& s, int rank) {
  const size_t n = s.nranks;
  switch (s.coll) {
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return n * s.count;
    case Coll::Scatter:
      return rank == s.root ? n * s.count : 0;
    default:
      return s.count;
  }
}

size_t simOutputElems(const SimSpec& s, int rank) {
  const size_t n = s.nranks;
  switch (s.coll) {
    case Coll::AllGather:
    case Coll::AllToAll:
      return n * s.count;
    case Coll::Gather:
      return rank == s.root ? n * s.count : 0;
    default:
      return s.count;
  }
}

namespace {

// Memory of one case: per rank, the buffers the Programs read and write.
struct CaseMemory {
  std::vector<Bytes> in, out;
  std::vector<char*> inPtr, outPtr;
};

// Lays out one case's memory. Returns false (with res set) on bad input.
bool prepareCase(const SimCase& c, CaseMemory* mem, SimResult* res) {
  const SimSpec& spec = c.spec;
  const size_t es = dataTypeSize(spec.type);
  auto failWith = [&](ncclResult_t code, const std::string& why) {
    res->result = code;
    res->error = why;
    return false;
  };
  if (spec.coll == Coll::Send || spec.coll == Coll::Recv)
    return failWith(ncclInvalidArgument, "use simulateP2p for send/recv");
  if (spec.inPlace && spec.coll == Coll::AllToAll)
    return failWith(ncclInvalidArgument, "all-to-all has no in-place form");
  if ((int)c.inputs.size() != spec.nranks || (int)c.outputs.size() != spec.nranks)
    return failWith(ncclInvalidArgument, "need one input and one output per rank");

  mem->in.resize(spec.nranks);
  mem->out.resize(spec.nranks);
  mem->inPtr.resize(spec.nranks);
  mem->outPtr.resize(spec.nranks);
  for (int r = 0; r < spec.nranks; r++) {
    const size_t inBytes = simInputElems(spec, r) * es, outBytes = simOutputElems(spec, r) * es;
    if (c.inputs[r].size() != inBytes || c.outputs[r].size() != outBytes)
      return failWith(ncclInvalidArgument, "rank " + std::to_string(r) +
                                               ": input/output sizes do not match the collective");
    size_t offElems;
    InPlace layout = inPlaceLayout(spec, r, &offElems);
    const size_t off = offElems * es;
    Bytes& in = mem->in[r];
    Bytes& out = mem->out[r];
    switch (layout) {
      case InPlace::None:
        in = c.inputs[r];
        out = c.outputs[r];
        mem->inPtr[r] = (char*)in.data();
        mem->outPtr[r] = (char*)out.data();
        break;
      case InPlace::InInsideOut:
        out = c.outputs[r];
        if (inBytes > 0) std::memcpy(out.data() + off, c.inputs[r].data(), inBytes);
        mem->outPtr[r] = (char*)out.data();
        mem->inPtr[r] = mem->outPtr[r] + off;
        break;
      case InPlace::OutInsideIn:
        in = c.inputs[r];
        mem->inPtr[r] = (char*)in.data();
        mem->outPtr[r] = mem->inPtr[r] + off;
        break;
    }
  }

  return true;
}

// The operation rank `r` calls for case `c`, on the case's memory.
CollArgs caseArgs(const SimSpec& spec, const CaseMemory& mem, int r) {
  CollArgs a;
  a.kind = spec.coll;
  a.sendbuff = mem.inPtr[r];
  a.recvbuff = mem.outPtr[r];
  a.count = spec.count;
  a.datatype = spec.type;
  a.op = spec.op;
  a.redOp = makeRedOp(collReduces(spec.coll) ? spec.op : ncclSum, spec.type, spec.nranks);
  a.root = spec.root;
  return a;
}

}  // namespace

SimResult simulateBatch(std::vector<SimCase>* cases) {
  SimResult res;
  if (cases->empty()) return res;
  const SimSpec& first = (*cases)[0].spec;
  std::vector<CaseMemory> mem(cases->size());
  uint32_t slotBytes = first.slotBytes;
  uint64_t llData = 0;
  for (size_t i = 0; i < cases->size(); i++) {
    const SimSpec& spec = (*cases)[i].spec;
    if (spec.nranks != first.nranks) {
      res.result = ncclInvalidArgument;
      res.error = "all cases of a batch need the same nranks";
      return res;
    }
    if (!prepareCase((*cases)[i], &mem[i], &res)) return res;
    const uint64_t slice = spec.sliceElems * dataTypeSize(spec.type);
    slotBytes = std::max<uint32_t>(slotBytes, (uint32_t)slice);
    llData = std::max(llData, slice);
  }
  std::vector<std::unique_ptr<SimJob>> jobs;
  RankPlans keep;
  const uint32_t llSlotBytes = llSlotBytesFor(llData);
  for (int r = 0; r < first.nranks; r++) {
    for (size_t i = 0; i < cases->size(); i++) {
      const SimSpec& spec = (*cases)[i].spec;
      PlanContext ctx =
          simContext(first.nranks, r, spec.protocol, slotBytes, llSlotBytes, first.nSlots,
                     spec.nChannels, spec.chunkElems * dataTypeSize(spec.type));
      ctx.rings = spec.rings;
      ctx.compactRings = spec.compact;
      ctx.tune.algos = simAlgos(spec);
      if (!simTrees(spec, &ctx.trees, &res)) return res;
      CollArgs a = caseArgs(spec, mem[i], r);
      if (!planRank(ctx, {&a, 1}, (int)i, spec.mutate, spec.mutateJob, &keep, &jobs, &res))
        return res;
      for (size_t k = jobs.size(); k-- > 0 && jobs[k]->rank == r && jobs[k]->caseIndex == (int)i;) {
        SimJob& j = *jobs[k];
        j.inElems.assign(j.job.inputs.size(), simInputElems(spec, r));
        j.outElems.assign(j.job.outputs.size(), simOutputElems(spec, r));
      }
    }
  }
  EngineOptions o{first.nranks,       first.nSlots,        slotBytes,  llSlotBytes,
                  first.counterStart, first.slicesPerTurn, first.seed, first.lagCounters,
                  first.simtThreads};
  runJobs(jobs, o, &res);
  if (res.result != ncclSuccess) return res;
  for (size_t i = 0; i < cases->size(); i++) {
    SimCase& c = (*cases)[i];
    const size_t es = dataTypeSize(c.spec.type);
    for (int r = 0; r < c.spec.nranks; r++) {
      const uint8_t* at = (const uint8_t*)mem[i].outPtr[r];
      c.outputs[r].assign(at, at + simOutputElems(c.spec, r) * es);
    }
  }
  return res;
}

SimResult simulate(const SimSpec& spec, const std::vector<Bytes>& inputs,
                   const std::vector<Bytes>& outputs) {
  std::vector<SimCase> cases{SimCase{spec, inputs, outputs}};
  SimResult res = simulateBatch(&cases);
  if (res.result == ncclSuccess) res.outputs = std::move(cases[0].outputs);
  return res;
}

SimResult simulateP2p(const SimP2pSpec& spec, const std::vector<std::vector<SimP2pOp>>& ops,
                      std::vector<std::vector<Bytes>>* buffers) {
  SimResult res;
  const size_t es = dataTypeSize(spec.type);
  auto failWith = [&](const std::string& why) {
    res.result = ncclInvalidArgument;
    res.error = why;
    return res;
  };
  if ((int)ops.size() != spec.nranks || (int)buffers->size() != spec.nranks)
    return failWith("need ops and buffers for every rank");
  const uint32_t slotBytes = (uint32_t)(spec.sliceElems * es);
  const uint32_t llSlotBytes = llSlotBytesFor(slotBytes);
  std::vector<std::unique_ptr<SimJob>> jobs;
  RankPlans keep;
  for (int r = 0; r < spec.nranks; r++) {
    auto& bufs = (*buffers)[r];
    if (bufs.size() != ops[r].size())
      return failWith("rank " + std::to_string(r) + ": one buffer per op");
    std::vector<CollArgs> args;
    for (size_t i = 0; i < ops[r].size(); i++) {
      const SimP2pOp& op = ops[r][i];
      if (bufs[i].size() != op.count * es)
        return failWith("rank " + std::to_string(r) + " op " + std::to_string(i) + ": buffer size");
      CollArgs a;
      a.kind = op.send ? Coll::Send : Coll::Recv;
      a.sendbuff = bufs[i].data();
      a.recvbuff = bufs[i].data();
      a.count = op.count;
      a.datatype = spec.type;
      a.redOp = makeRedOp(ncclSum, spec.type, spec.nranks);
      a.root = op.peer;
      args.push_back(a);
    }
    PlanContext ctx =
        simContext(spec.nranks, r, spec.protocol, slotBytes, llSlotBytes, spec.nSlots, 1, 0);
    size_t before = jobs.size();
    if (!planRank(ctx, args, 0, nullptr, nullptr, &keep, &jobs, &res)) return res;
    // Buffer sizes in bytes (send/recv Programs count bytes), per buffer index.
    for (size_t k = before; k < jobs.size(); k++) {
      SimJob& j = *jobs[k];
      j.inElems.assign(j.job.inputs.size(), 0);
      j.outElems.assign(j.job.outputs.size(), 0);
      for (size_t b = 0; b < j.job.inputs.size(); b++)
        for (size_t i = 0; i < bufs.size(); i++) {
          if (j.job.inputs[b] == bufs[i].data()) j.inElems[b] = bufs[i].size();
          if (j.job.outputs[b] == bufs[i].data()) j.outElems[b] = bufs[i].size();
        }
    }
  }
  EngineOptions o{spec.nranks,       spec.nSlots,        slotBytes, llSlotBytes,
                  spec.counterStart, spec.slicesPerTurn, spec.seed, spec.lagCounters,
                  spec.simtThreads};
  runJobs(jobs, o, &res);
  return res;
}

}  // namespace ringcc
