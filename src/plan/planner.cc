#include "src/plan/planner.h"

#include <algorithm>

#include "kernels/dtypes.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/plan/op_sig.h"

namespace ringcc {

RunArgs PlanJob::runArgs(const ConnectorView* views) const {
  RunArgs a{};
  a.program = program;
  a.ports = views;
  a.inputs = inputs.data();
  a.outputs = outputs.data();
  a.counts = counts.data();
  a.type = type;
  a.elemSize = elemSize;
  a.op = op;
  a.protocol = protocol;
  a.nChannels = nChannels;
  a.channel = static_cast<uint32_t>(channel);
  a.sliceElems = sliceElems;
  a.chunkElems = chunkElems;
  a.sig = sig;
  a.ringRanks = ringRanks;
  a.nRingRanks = nRingRanks;
  return a;
}

PlanJob& Plan::newJob() {
  if (nJobs == jobs.size()) jobs.emplace_back();
  PlanJob& job = jobs[nJobs++];
  job.inputs.clear();
  job.outputs.clear();
  job.counts.clear();
  job.ringRanks = nullptr;
  job.nRingRanks = 0;
  return job;
}

Program* Plan::newProgram() {
  if (nOwn == own.size()) own.push_back(std::make_unique<Program>());
  return own[nOwn++].get();
}

void Planner::sizes(uint8_t kind, Protocol protocol, uint32_t elemSize, PlanJob* job) const {
  // The context's protocols are those the connections run (src/exec/engine_setup.h), so LL
  // comes here only with LL memory; the runner refuses it otherwise (kRunErrNoLl).
  const ConnGeometry& g = ctx_.geometry(kind);
  job->protocol = protocol;
  const uint64_t sliceBytes =
      protocol == kProtoLL ? std::min(llSlotData(g.llSlotBytes), kLlMaxSliceBytes) : g.slotBytes;
  job->sliceElems = std::max<uint64_t>(1, sliceBytes / elemSize);
  // A ring chunk of c slices needs c + 1 slots (prims.h), so chunks stay below nSlots slices.
  uint64_t chunkSlices = 1;
  if (ctx_.tune.chunkBytes > 0)
    chunkSlices = std::clamp<uint64_t>(ctx_.tune.chunkBytes / (job->sliceElems * elemSize), 1,
                                       std::max<uint32_t>(1, g.nSlots - 1));
  job->chunkElems = chunkSlices * job->sliceElems;
}

bool Planner::reuse(std::span<const CollArgs> ops, Plan* plan) const {
  if (ops.size() != 1 || plan != lastPlan_ || plan->nJobs == 0) return false;
  const CollArgs& a = ops[0];
  if (a.kind != last_.kind || a.count != last_.count || a.datatype != last_.datatype ||
      a.root != last_.root)
    return false;
  for (size_t j = 0; j < plan->nJobs; ++j) {
    PlanJob& job = plan->jobs[j];
    std::fill(job.inputs.begin(), job.inputs.end(), a.sendbuff);
    std::fill(job.outputs.begin(), job.outputs.end(), a.recvbuff);
    job.op = a.redOp;
    job.sig = callSig(a);  // the runner puts each lane's count in
  }
  LOG_INFO(kLogTuning, "%s: %zu elements, %d ranks: protocol %s, %zu channels (plan reused)",
           collName(a.kind), a.count, ctx_.nranks, protocolName(plan->jobs[0].protocol),
           plan->nJobs);
  return true;
}

ncclResult_t Planner::plan(std::span<const CollArgs> ops, Plan* plan, bool* reused) {
  if (reused) *reused = false;
  if (reuse(ops, plan)) {
    if (reused) *reused = true;
    return ncclSuccess;
  }
  lastPlan_ = nullptr;
  plan->clear();
  cache_.beginBatch();
  p2pOps_.clear();
  for (const CollArgs& a : ops) {
    if (a.count == 0) continue;  // nothing moves, on every rank alike
    if (a.kind == Coll::Send || a.kind == Coll::Recv) {
      p2pOps_.push_back(&a);
      continue;
    }
    RINGCC_CHECK(planCollective(a, static_cast<int>(&a - ops.data()), plan));
  }
  RINGCC_CHECK(planP2p(p2pOps_, plan));
  if (ops.size() == 1 && p2pOps_.empty() && plan->nJobs > 0) {
    lastPlan_ = plan;
    last_ = ops[0];
  }
  return ncclSuccess;
}

ncclResult_t Planner::planCollective(const CollArgs& a, int opIndex, Plan* plan) {
  const uint32_t elemSize = static_cast<uint32_t>(dataTypeSize(a.datatype));
  const uint64_t bytes = static_cast<uint64_t>(a.count) * elemSize;
  const TuneChoice t = chooseTune(ctx_.tune, ctx_.links, a.kind, bytes, ctx_.nranks);
  if (t.fallback && !fallbackWarned_) {
    LOG_WARN("NCCL_ALGO: %s: %s (warned once per communicator)", collName(a.kind), t.fallback);
    fallbackWarned_ = true;
  }
  LOG_INFO(kLogTuning,
           "%s: %zu x %u bytes, %d ranks: algorithm %s, protocol %s, %d channels (model: %.1f us)",
           collName(a.kind), a.count, elemSize, ctx_.nranks, algoName(t.algo),
           protocolName(t.protocol), t.nChannels, t.micros);
  CollDesc d;
  d.coll = a.kind;
  d.algo = t.algo;
  d.nranks = ctx_.nranks;
  d.rank = ctx_.rank;
  d.root = a.root;
  d.compact = ctx_.compactRings;
  for (int c = 0; c < t.nChannels; ++c) {
    const std::vector<int>* ring = c < static_cast<int>(ctx_.rings.size()) && !ctx_.rings[c].empty()
                                       ? &ctx_.rings[c]
                                       : nullptr;
    if (ring)
      d.ring = *ring;
    else
      d.ring.clear();
    if (t.algo == Algo::Tree) d.tree = treeNode(c);
    const Program* program = nullptr;
    RINGCC_CHECK(cache_.get(d, c, &program));
    PlanJob& job = plan->newJob();
    job.channel = c;
    job.name = collName(a.kind);
    job.opIndex = opIndex;
    job.algo = t.algo;
    job.program = program;
    job.type = a.datatype;
    job.elemSize = elemSize;
    job.op = a.redOp;
    job.nChannels = static_cast<uint32_t>(t.nChannels);
    job.sig = callSig(a);  // the runner puts each lane's count in
    sizes(collPortKind(a.kind, t.algo), t.protocol, elemSize, &job);
    job.inputs.assign(program->nBuffers, a.sendbuff);
    job.outputs.assign(program->nBuffers, a.recvbuff);
    job.counts.assign(program->nCounts, a.count);
    job.ringRanks = ring ? ring->data() : nullptr;
    job.nRingRanks = ring ? static_cast<uint32_t>(ring->size()) : 0;
  }
  return ncclSuccess;
}

const TreeNode& Planner::treeNode(int channel) {
  if (ctx_.trees.tree[0].empty()) {
    // No host layout given: one host, a chain in rank order (always a valid tree).
    std::vector<std::vector<int>> hosts(1);
    for (int r = 0; r < ctx_.nranks; ++r) hosts[0].push_back(r);
    if (buildDoubleTree(hosts, &ctx_.trees) != ncclSuccess) ctx_.trees = DoubleTree{};
  }
  static const TreeNode kNone;
  const std::vector<TreeNode>& tree = ctx_.trees.tree[channel % 2];
  return static_cast<int>(tree.size()) == ctx_.nranks ? tree[static_cast<size_t>(ctx_.rank)]
                                                      : kNone;
}

ncclResult_t Planner::planP2p(const std::vector<const CollArgs*>& ops, Plan* plan) {
  if (ops.empty()) return ncclSuccess;
  const int nranks = ctx_.nranks;
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
    PlanJob& job = plan->newJob();
    job.channel = 0;
    job.name = "send/recv";
    job.opIndex = -1;
    job.type = ncclUint8;
    // Each lane signs with its own byte count; send and receive sign alike.
    job.sig = OpSig{0, -1, static_cast<uint8_t>(Coll::Send), ncclUint8, kSigNoOp, 0};
    job.elemSize = 1;
    job.op = makeRedOp(ncclSum, ncclUint8, nranks);
    job.nChannels = 1;
    P2pDesc p2p;
    p2p.nranks = nranks;
    p2p.rank = ctx_.rank;
    std::vector<uint64_t> selfSends, selfRecvs;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (round[i] < first || round[i] > last) continue;
      const CollArgs& a = *ops[i];
      P2pOp p;
      p.send = a.kind == Coll::Send;
      p.peer = a.root;
      p.count = static_cast<int>(job.counts.size());
      const uint64_t bytes = static_cast<uint64_t>(a.count) * dataTypeSize(a.datatype);
      job.counts.push_back(bytes);
      if (p.peer == ctx_.rank) (p.send ? selfSends : selfRecvs).push_back(bytes);
      if (p.send) {
        p.buffer = static_cast<int>(job.inputs.size());
        job.inputs.push_back(a.sendbuff);
      } else {
        p.buffer = static_cast<int>(job.outputs.size());
        job.outputs.push_back(a.recvbuff);
      }
      p2p.ops.push_back(p);
    }
    for (size_t i = 0; i < std::min(selfSends.size(), selfRecvs.size()); ++i)
      if (selfSends[i] != selfRecvs[i])
        return fail(ncclInvalidArgument, "send/recv",
                    "send to self of %llu bytes meets a receive of %llu bytes",
                    static_cast<unsigned long long>(selfSends[i]),
                    static_cast<unsigned long long>(selfRecvs[i]));
    Program* program = plan->newProgram();
    RINGCC_CHECK(buildP2p(p2p, program));
    job.program = program;
    // Both ends of a connection must use one protocol, and a rank's group of sends and
    // receives differs from its peers' groups, so no per-group size is the same on both ends:
    // grouped send/recv use Direct (or Simple: their slots are the same, so ends may differ),
    // unless NCCL_PROTO leaves only LL (then every rank does).
    const uint32_t allowed = ctx_.tune.protocols;
    sizes(kPortP2p,
          allowed & (1u << kProtoDirect)   ? kProtoDirect
          : allowed & (1u << kProtoSimple) ? kProtoSimple
                                           : kProtoLL,
          1, &job);
    // The runner indexes inputs and outputs by the same buffer number.
    size_t n = std::max<size_t>({job.inputs.size(), job.outputs.size(), program->nBuffers, 1});
    job.inputs.resize(n, nullptr);
    job.outputs.resize(n, nullptr);
    job.counts.resize(std::max<size_t>(job.counts.size(), program->nCounts), 0);
    first = last + 1;
  }
  return ncclSuccess;
}

}  // namespace ringcc
