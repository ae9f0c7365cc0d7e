// Simulator: all ranks' Programs, the real ProgramRunner, heap FIFOs, one thread.
#include "src/sched/simulator.h"

#include "kernels/dtypes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "kernels/dtypes.h"
#include "kernels/prims.h"
#include "src/core/error.h"

namespace ringcc {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// One connection: slots and control block shared by its sender and receiver.
struct SimFifo {
  int channel, kind, src, dst;
  std::vector<char> slots;
  std::unique_ptr<FifoControl, FreeDeleter> control;
  ConnectorView view;
};

// One rank's Program on one channel, with its buffers and runner.
struct SimJob {
  int rank = 0;
  int channel = 0;
  int caseIndex = 0;  // jobs of one (rank, channel) run in case order
  ncclDataType_t type = ncclInt8;
  ncclRedOp_t op = ncclSum;
  Program program;
  std::vector<ConnectorView> views;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<size_t> inElems, outElems;  // per buffer, for the bounds check
  ProgramRunner runner;
};

struct EngineOptions {
  int nranks;
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t counterStart;
  uint32_t slicesPerTurn;
  uint32_t seed;
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
  return "rank " + std::to_string(j.rank) + " channel " + std::to_string(j.channel) + " lane " +
         std::to_string(lane);
}

// Every element a step touches lies inside its buffer, in every loop.
bool checkBounds(const SimJob& j, std::string* error) {
  const Program& p = j.program;
  for (int li = 0; li < p.nLanes; li++) {
    const Lane& l = p.lanes[li];
    for (uint32_t loop = 0; loop < l.nLoops; loop++) {
      bool any = false;
      for (int k = l.firstStep; k < l.firstStep + l.nSteps; k++) {
        const Step& s = p.steps[k];
        uint64_t n = stepCountInLoop(l, s, loop);
        if (n == 0) continue;
        any = true;
        bool inBad = (s.flags & kStepLocal) && stepInOffset(l, s, loop) + n > j.inElems[l.inBuf];
        bool outBad = (s.flags & kStepOut) && stepOutOffset(l, s, loop) + n > j.outElems[l.outBuf];
        if (inBad || outBad) {
          *error = where(j, li) + " loop " + std::to_string(loop) + " step " + std::to_string(k) +
                   ": " + (inBad ? "input" : "output") + " range [" +
                   std::to_string(inBad ? stepInOffset(l, s, loop) : stepOutOffset(l, s, loop)) +
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
      out += "loop " + std::to_string(st.loop) + " step " + std::to_string(st.step) + " (" +
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

// Connects, checks and runs `jobs` to completion or failure.
void runJobs(std::vector<std::unique_ptr<SimJob>>& jobs, const EngineOptions& o, SimResult* res) {
  auto failWith = [&](const std::string& why) {
    res->result = ncclInternalError;
    res->error = why;
  };
  for (const auto& j : jobs) {
    if (const char* why = checkProgram(j->program))
      return failWith(where(*j, 0) + ": invalid program: " + why);
    std::string error;
    if (!checkBounds(*j, &error)) return failWith(error);
  }

  // One FIFO per (channel, kind, sender, receiver) that some port names.
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<SimFifo>> fifos;
  for (auto& j : jobs) {
    const Program& p = j->program;
    j->views.resize(p.nPorts);
    for (int i = 0; i < p.nPorts; i++) {
      const Port& port = p.ports[i];
      if (port.peer < 0 || port.peer >= o.nranks)
        return failWith(where(*j, 0) + ": port " + std::to_string(i) + " names rank " +
                        std::to_string(port.peer));
      bool send = port.dir == kPortSend;
      auto key = std::make_tuple(j->channel, (int)port.kind, send ? j->rank : port.peer,
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
        f->view = ConnectorView{f->slots.data(), f->control.get(), o.nSlots, o.slotBytes, nullptr, 0, 0, nullptr};
      }
      j->views[i] = f->view;
    }
  }

  // Bind everything up front, as an executor does; counters are read at the first advance.
  std::map<std::pair<int, int>, std::vector<SimJob*>> byRankChannel;
  for (auto& j : jobs) {
    ProgramRunner::Params rp = {&j->program,      j->views.data(),
                                j->inputs.data(), j->outputs.data(),
                                j->type,          makeRedOp(j->op, j->type, o.nranks),
                                nullptr,          nullptr};
    if (const char* why = j->runner.init(rp)) return failWith(where(*j, 0) + ": " + why);
    byRankChannel[{j->rank, j->channel}].push_back(j.get());
  }
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
  for (;;) {
    if (o.seed) std::shuffle(order.begin(), order.end(), rng);
    bool progressed = false, allDone = true;
    for (size_t q : order) {
      while (head[q] < queues[q].size()) {
        SimJob& j = *queues[q][head[q]];
        AdvanceResult r = j.runner.advance(o.slicesPerTurn);
        if (r.error) return failWith(where(j, 0) + ": " + r.error);
        progressed |= r.progressed;
        res->slices += r.slices;
        if (!r.done) break;
        head[q]++;
        progressed = true;
      }
      if (head[q] < queues[q].size()) allDone = false;
    }
    res->rounds++;
    if (allDone) break;
    if (!progressed) return failWith(deadlockReport(queues, head));
  }

  for (const auto& [key, f] : fifos) {
    uint32_t left = f->control->tail.value - f->control->head.value;
    if (left != 0)
      return failWith("unmatched send: rank " + std::to_string(f->src) + " -> rank " +
                      std::to_string(f->dst) + " channel " + std::to_string(f->channel) + ": " +
                      std::to_string(left) + " slot(s) never received");
  }
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

// Lays out one case's memory and builds its jobs. Returns false (with res set) on bad input.
bool prepareCase(const SimCase& c, int caseIndex, CaseMemory* mem,
                 std::vector<std::unique_ptr<SimJob>>* jobs, SimResult* res) {
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
        std::memcpy(out.data() + off, c.inputs[r].data(), inBytes);
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

  for (int r = 0; r < spec.nranks; r++) {
    for (int ch = 0; ch < spec.nChannels; ch++) {
      auto j = std::make_unique<SimJob>();
      j->rank = r;
      j->channel = ch;
      j->caseIndex = caseIndex;
      j->type = spec.type;
      j->op = collReduces(spec.coll) ? spec.op : ncclSum;
      CollDesc d;
      d.coll = spec.coll;
      d.count = spec.count;
      d.elemSize = es;
      d.nranks = spec.nranks;
      d.rank = r;
      d.root = spec.root;
      if (ch < (int)spec.rings.size()) d.ring = spec.rings[ch];
      d.nChannels = spec.nChannels;
      d.channel = ch;
      d.sliceElems = spec.sliceElems;
      d.chunkElems = spec.chunkElems;
      if (ncclResult_t rc = buildProgram(d, &j->program); rc != ncclSuccess)
        return failWith(rc, "building rank " + std::to_string(r) + " channel " +
                                std::to_string(ch) + " failed: " + lastErrorMessage());
      if (spec.mutate) spec.mutate(r, ch, &j->program);
      j->inputs.assign(std::max<int>(1, j->program.nBuffers), mem->inPtr[r]);
      j->outputs.assign(std::max<int>(1, j->program.nBuffers), mem->outPtr[r]);
      j->inElems.assign(j->inputs.size(), simInputElems(spec, r));
      j->outElems.assign(j->outputs.size(), simOutputElems(spec, r));
      jobs->push_back(std::move(j));
    }
  }
  return true;
}

}  // namespace

SimResult simulateBatch(std::vector<SimCase>* cases) {
  SimResult res;
  if (cases->empty()) return res;
  const SimSpec& first = (*cases)[0].spec;
  std::vector<CaseMemory> mem(cases->size());
  std::vector<std::unique_ptr<SimJob>> jobs;
  uint32_t slotBytes = first.slotBytes;
  for (size_t i = 0; i < cases->size(); i++) {
    const SimSpec& spec = (*cases)[i].spec;
    if (spec.nranks != first.nranks) {
      res.result = ncclInvalidArgument;
      res.error = "all cases of a batch need the same nranks";
      return res;
    }
    if (!prepareCase((*cases)[i], (int)i, &mem[i], &jobs, &res)) return res;
    slotBytes =
        std::max<uint32_t>(slotBytes, (uint32_t)(spec.sliceElems * dataTypeSize(spec.type)));
  }
  EngineOptions o{first.nranks,       first.nSlots,        slotBytes,
                  first.counterStart, first.slicesPerTurn, first.seed};
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

SimResult simulateP2p(const SimP2pSpec& spec, const std::vector<std::vector<P2pOp>>& ops,
                      std::vector<std::vector<Bytes>>* buffers) {
  SimResult res;
  const size_t es = dataTypeSize(spec.type);
  if ((int)ops.size() != spec.nranks || (int)buffers->size() != spec.nranks) {
    res.result = ncclInvalidArgument;
    res.error = "need ops and buffers for every rank";
    return res;
  }
  std::vector<std::unique_ptr<SimJob>> jobs;
  for (int r = 0; r < spec.nranks; r++) {
    auto& bufs = (*buffers)[r];
    if (bufs.size() != ops[r].size()) {
      res.result = ncclInvalidArgument;
      res.error = "rank " + std::to_string(r) + ": one buffer per op";
      return res;
    }
    for (int c = 0; c < spec.nChannels; c++) {
      auto j = std::make_unique<SimJob>();
      j->rank = r;
      j->channel = c;
      j->type = spec.type;
      P2pDesc d;
      d.ops = ops[r];
      for (size_t i = 0; i < d.ops.size(); i++) d.ops[i].buffer = (int)i;
      d.elemSize = es;
      d.nranks = spec.nranks;
      d.rank = r;
      d.nChannels = spec.nChannels;
      d.channel = c;
      d.sliceElems = spec.sliceElems;
      if (ncclResult_t rc = buildP2p(d, &j->program); rc != ncclSuccess) {
        res.result = rc;
        res.error = "building rank " + std::to_string(r) + " failed: " + lastErrorMessage();
        return res;
      }
      for (size_t i = 0; i < bufs.size(); i++) {
        size_t need = ops[r][i].count * es;
        if (bufs[i].size() != need) {
          res.result = ncclInvalidArgument;
          res.error = "rank " + std::to_string(r) + " op " + std::to_string(i) + ": buffer size";
          return res;
        }
        j->inputs.push_back(bufs[i].data());
        j->outputs.push_back(bufs[i].data());
        j->inElems.push_back(ops[r][i].count);
        j->outElems.push_back(ops[r][i].count);
      }
      if (j->inputs.empty()) {
        j->inputs.push_back(nullptr);
        j->outputs.push_back(nullptr);
        j->inElems.push_back(0);
        j->outElems.push_back(0);
      }
      jobs.push_back(std::move(j));
    }
  }
  EngineOptions o{spec.nranks,       spec.nSlots,        (uint32_t)(spec.sliceElems * es),
                  spec.counterStart, spec.slicesPerTurn, spec.seed};
  runJobs(jobs, o, &res);
  return res;
}

}  // namespace ringcc
