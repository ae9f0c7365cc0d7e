// Schedule simulator: plans every rank's operations with the engines' own planner
// (src/plan/planner.h), runs the jobs with the real interpreter (kernels/prims.h) against
// in-memory FIFOs, in one thread, and checks them. What it proves is what the engines run:
// the same tuner choices, plan cache, send/recv rounds, geometry and protocols.
//
// It plans each rank, gives every (channel, kind, sender, receiver) pair one heap FIFO (with
// Simple slots and LL lines), and round-robins the runners (optionally in a shuffled order and
// a few slices per turn, to vary interleavings) until all are done. It reports:
//   - a deadlock: a full round in which no runner progressed, with every stuck rank, channel,
//     lane, step and the peer it waits for;
//   - a step that would touch memory outside its buffer (checked before running);
//   - a runner error (slot sizes that disagree between sender and receiver);
//   - data left in a FIFO at the end (a send no receive matched).
// Otherwise it returns every rank's output buffer, for the tests to compare exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/connector_device.h"
#include "kernels/program.h"
#include "nccl.h"
#include "src/plan/planner.h"
#include "src/sched/builders.h"
#include "src/sched/dbtree.h"

namespace ringcc {

using Bytes = std::vector<uint8_t>;

struct SimSpec {
  Coll coll = Coll::AllReduce;  // any collective but Send/Recv (see simulateP2p)
  ncclDataType_t type = ncclInt32;
  ncclRedOp_t op = ncclSum;
  size_t count = 0;  // NCCL's count argument
  int nranks = 1;
  int root = 0;
  int nChannels = 1;
  bool inPlace = false;              // NCCL's in-place layout (not for all-to-all)
  Protocol protocol = kProtoSimple;  // forced, as NCCL_PROTO would
  // All-reduces of a power of two ranks up to this many bytes use recursive doubling (0: never,
  // ~0: always), the others the ring; unless `algo` forces one (Tree: all-reduce only).
  uint64_t doublingMaxBytes = 2048;
  int algo = -1;  // an Algo, or -1
  // Tree: the hosts the double binary tree is built over (buildDoubleTree), or the trees
  // themselves (`trees`, when its tree 0 is not empty: hand-made trees). Neither: one host.
  std::vector<std::vector<int>> hosts;
  DoubleTree trees;
  size_t sliceElems = 16;  // slot size in elements (LL: data elements per slot)
  size_t chunkElems = 0;   // 0: sliceElems (as NCCL_CHUNKSIZE = 0)
  uint32_t nSlots = 4;
  uint32_t slotBytes = 0;               // 0: sliceElems * element size
  uint32_t counterStart = 0;            // initial FIFO counters (set near 2^32 to test wrap-around)
  uint32_t slicesPerTurn = 1;           // advance() budget per turn; ~0u = as much as possible
  uint32_t seed = 0;                    // non-zero: shuffle the turn order every round
  // Non-zero (a seed): a rank's counter stores reach the other ranks late, after a random
  // number of rounds (in order), as a store does from a thread preempted right before it; the
  // rank's own loads see them at once. Data, sizes and LL lines are seen at once.
  uint32_t lagCounters = 0;
  std::vector<std::vector<int>> rings;  // per channel ring order; missing/empty: 0..n-1
  bool compact = false;  // ring bodies as repeated steps at any rank count (CollDesc::compact)
  // Test hook: change a Program after it was built (to break a schedule on purpose).
  std::function<void(int rank, int channel, Program* program)> mutate;
  // Test hook: change a planned job's run-time arguments (counts, chunk) after planning.
  std::function<void(int rank, PlanJob* job)> mutateJob;
  // Non-zero: run the jobs as the CUDA batch kernel does instead (runBatchBlock with
  // DeviceSync: kernels/cuda/batch_block.h), each rank one launch with a block per channel of
  // this many emulated threads (tests/support/simt.h), all ranks at once. Turn order, slices
  // per turn and counter lag do not apply; a batch must fit one launch (kLaunchMaxJobs jobs,
  // kLaunchWords words).
  uint32_t simtThreads = 0;
};

struct SimResult {
  ncclResult_t result = ncclSuccess;
  std::string error;           // why it failed: deadlock report, leftover data, ...
  std::vector<Bytes> outputs;  // per rank, the output buffer after the run (recvbuff)
  uint64_t rounds = 0;         // round-robin rounds
  uint64_t slices = 0;         // slices moved by all ranks
};

// Elements of rank `rank`'s input (sendbuff) and output (recvbuff) for `spec`, out of place.
size_t simInputElems(const SimSpec& spec, int rank);
size_t simOutputElems(const SimSpec& spec, int rank);

// Runs spec.coll on all ranks. inputs[r] holds simInputElems(spec, r) elements, outputs[r]
// the initial content of rank r's output (simOutputElems elements). In place, the input is
// first copied where NCCL expects it inside the output (or the output is read from inside
// the input for reduce-scatter and scatter), exactly as a user's in-place call would lay out
// memory, and the result's outputs are that region afterwards.
SimResult simulate(const SimSpec& spec, const std::vector<Bytes>& inputs,
                   const std::vector<Bytes>& outputs);

// One collective of a batch: its spec, per-rank inputs and initial outputs; after a
// successful simulateBatch, `outputs` holds the results.
struct SimCase {
  SimSpec spec;
  std::vector<Bytes> inputs;
  std::vector<Bytes> outputs;
};

// Runs several collectives one after another on the same FIFOs, the way an executor runs a
// batch: every Program is bound up front, then on each rank and channel they run in order,
// the next starting as soon as the previous is done there. FIFO geometry (nSlots, counter
// start), turn budget, seed and counter lag come from the first case; slots are as large as the
// largest slice of any case. All cases must have the same nranks.
SimResult simulateBatch(std::vector<SimCase>* cases);

struct SimP2pSpec {
  ncclDataType_t type = ncclInt32;
  int nranks = 1;
  Protocol protocol = kProtoSimple;
  size_t sliceElems = 16;  // slot bytes = sliceElems * element size
  uint32_t nSlots = 4;
  uint32_t counterStart = 0;
  uint32_t slicesPerTurn = 1;
  uint32_t seed = 0;
  uint32_t lagCounters = 0;  // as SimSpec::lagCounters
  uint32_t simtThreads = 0;  // as SimSpec::simtThreads
};

struct SimP2pOp {
  bool send = true;  // send to peer, else receive from peer
  int peer = 0;
  size_t count = 0;  // elements
};

// Runs one group of send/recv per rank: ops[r] are rank r's ops, in posting order; op i uses
// (*buffers)[r][i]. Send buffers are read, receive buffers written. The planner splits large
// groups into rounds exactly as in the engines.
SimResult simulateP2p(const SimP2pSpec& spec, const std::vector<std::vector<SimP2pOp>>& ops,
                      std::vector<std::vector<Bytes>>* buffers);

}  // namespace ringcc
