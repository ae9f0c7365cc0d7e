// The planner: turns one batch (a group's operations on one communicator, in call order) into
// plain jobs that any executor runs and the simulator checks. Executor-independent: the host
// engine binds jobs to its connections and drives them with ProgramRunner; the CUDA executor
// will pack the same jobs into kernel arguments; the simulator (tests/support/simulator.h)
// plans every rank with this same code and runs the jobs against in-memory FIFOs.
//
//   CollArgs[] ──► tune (channels, protocol) ──► PlanCache (Program per channel, size-free)
//              ──► PlanJob {channel, Program, buffers, counts, type, op, protocol, slice, chunk}
//
// Per channel, jobs run in the order they appear (they share the channel's connections);
// channels run side by side. Every rank derives the same jobs from matching calls, so the
// connections a job's ports name are needed by both ends in the same batch.
//
// Send/recv. All sends and receives of a batch become grouped point-to-point Programs on
// channel 0, after the collectives, counted in bytes (so that operations of different
// datatypes share one Program). NCCL bounds neither the operations of a group nor those to one
// peer; a Program holds kMaxLanes lanes. So the i-th operation to a given peer and direction
// belongs to round i / perRound, perRound = kMaxLanes / (2 nranks), and whole rounds are
// packed into Programs in order. Every rank computes the rounds alike, so an operation and its
// match are in the same round; a Program starts when the one before it is done, so round k
// never waits for a later round on any rank.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels/prims.h"
#include "kernels/red_op.h"
#include "nccl.h"
#include "src/plan/coll_args.h"
#include "src/plan/plan_cache.h"
#include "src/sched/dbtree.h"
#include "src/tune/tune.h"
#include "transports/transport.h"

namespace ringcc {

struct PlanContext {
  int nranks = 1;
  int rank = 0;
  // The geometry of each connection set, the same on every rank (llSlotBytes 0: no LL).
  ConnGeometry ring{};  // connections of kPortRing ports
  ConnGeometry p2p{};   // connections of kPortP2p ports
  TuneConfig tune;
  LinkFigures links;                    // the cost model's figures (src/tune/cost_model.h)
  std::vector<std::vector<int>> rings;  // per channel ring order; missing or empty: 0..n-1
  // Ring bodies as repeated steps at any rank count (CollDesc::compact), not only where they
  // would not fit written out: for tests of the compact form on few ranks.
  bool compactRings = false;
  // The double binary tree (src/sched/dbtree.h): channel c all-reduces by Tree over
  // trees.tree[c % 2], as NCCL alternates its two trees. Empty: every rank on one host, in rank
  // order (a chain).
  DoubleTree trees;

  const ConnGeometry& geometry(uint8_t kind) const { return kind == kPortP2p ? p2p : ring; }
};

// One Program with everything its runner needs but the connections.
struct PlanJob {
  int channel = 0;
  const char* name = "";
  int32_t opIndex = -1;              // the batch's operation it runs; -1: grouped send/recv
  Algo algo = Algo::Ring;            // of a collective
  const Program* program = nullptr;  // from the plan cache, or one of the plan's own Programs
  ncclDataType_t type = ncclUint8;
  uint32_t elemSize = 1;
  RedOp op = {};
  Protocol protocol = kProtoSimple;
  uint32_t nChannels = 1;
  uint64_t sliceElems = 0;
  uint64_t chunkElems = 0;
  // The call, as every slot is signed with it (RunArgs::sig): callSig of the operation.
  OpSig sig{0, -1, 0, 0, kSigNoOp, 0};
  std::vector<const void*> inputs;  // [program->nBuffers]
  std::vector<void*> outputs;       // [program->nBuffers]
  std::vector<uint64_t> counts;     // [program->nCounts]
  // The channel's ring order (RunArgs::ringRanks): the PlanContext's, valid while the planner
  // lives; null for 0..n-1.
  const int* ringRanks = nullptr;
  uint32_t nRingRanks = 0;

  // The runner's arguments, with `views` (one per port of the Program).
  RunArgs runArgs(const ConnectorView* views) const;
};

// A batch's jobs. Storage is kept from batch to batch, so that planning a repeated operation
// allocates nothing.
struct Plan {
  std::vector<PlanJob> jobs;  // jobs[0, nJobs) are this batch's
  size_t nJobs = 0;
  std::vector<std::unique_ptr<Program>> own;  // grouped send/recv Programs: own[0, nOwn)
  size_t nOwn = 0;

  PlanJob& newJob();
  Program* newProgram();
  void clear() { nJobs = nOwn = 0; }
};

class Planner {
 public:
  explicit Planner(PlanContext context) : ctx_(std::move(context)) {}

  // Plans `ops` (one communicator's, in call order) into *plan, replacing what it held.
  // Count-0 operations are skipped on every rank alike. When the batch is one collective of
  // the same shape (collective, count, datatype, root) as the one this planner last planned
  // into the same *plan, only its buffers and operator are replaced and *reused is set: the
  // jobs need the same connections as before (the common case of a training loop, where
  // planning would otherwise cost as much as moving a small message).
  ncclResult_t plan(std::span<const CollArgs> ops, Plan* plan, bool* reused = nullptr);

  const PlanContext& context() const { return ctx_; }

  // The next batch is planned afresh, never reused: the connections the last plan's jobs were
  // bound to are gone (the engine released its memory, ncclCommSuspend).
  void forgetLast() { lastPlan_ = nullptr; }

 private:
  ncclResult_t planCollective(const CollArgs& a, int opIndex, Plan* plan);
  ncclResult_t planP2p(const std::vector<const CollArgs*>& ops, Plan* plan);
  // Slice and chunk of `protocol` on connections of `kind` for elements of `elemSize`.
  void sizes(uint8_t kind, Protocol protocol, uint32_t elemSize, PlanJob* job) const;

  bool reuse(std::span<const CollArgs> ops, Plan* plan) const;

  // This channel's tree node of this rank.
  const TreeNode& treeNode(int channel);

  PlanContext ctx_;
  PlanCache cache_;
  bool fallbackWarned_ = false;  // TuneChoice::fallback is WARNed once per communicator
  // The last batch planned, when it was a lone collective: what reuse() compares against.
  const Plan* lastPlan_ = nullptr;
  CollArgs last_{};
  std::vector<const CollArgs*> p2pOps_;  // scratch
};

}  // namespace ringcc
