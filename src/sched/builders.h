// Builders: pure functions from a collective's description to one rank's Program on one
// channel (kernels/program.h). Same inputs, same Program, on every rank and every run; no
// builder knows the message size: counts, buffers and slice sizes come at run time.
//
// Buffers follow NCCL. The runner gets inputs[0] = sendbuff, outputs[0] = recvbuff and
// counts[0] = NCCL's count:
//   all-reduce      in: count            out: count
//   reduce-scatter  in: nranks * count   out: count       (in place: out == in + rank*count)
//   all-gather      in: count            out: nranks*count (in place: in == out + rank*count)
//   broadcast       in: count (root)     out: count
//   reduce          in: count            out: count (root only; other outputs untouched)
//   all-to-all      in: nranks * count   out: nranks * count (block j goes to / comes from j)
//   gather          in: count            out: nranks * count (root only)
//   scatter         in: nranks * count (root only)          out: count
//   send / recv     in: count / out: count
// Each of a ring collective's steps reads an input element before any step of this rank
// writes the output element at the same address, so the in-place layouts above are safe.
//
// Channels each take one contiguous, 16-byte aligned part of the buffer (of each block, for
// the blocked collectives); within a channel, ring data moves in chunks (program.h,
// laneGeometry). Errors: bad descriptors give ncclInvalidArgument, collectives that do not fit
// a Program's bounds ncclInvalidUsage; both are logged through fail() with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/program.h"
#include "nccl.h"
#include "src/sched/dbtree.h"

namespace ringcc {

enum class Coll : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  Send,
  Recv,
  AllToAll,
  Gather,
  Scatter,
};

const char* collName(Coll coll);

// True for the collectives whose steps reduce (the runner then needs the real RedOp). Inline:
// every call's signature asks (src/plan/op_sig.h).
inline bool collReduces(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
}

// True for the collectives with a root (broadcast, reduce, gather, scatter).
inline bool collRooted(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather ||
         coll == Coll::Scatter;
}

// How a collective moves. Ring: NCCL's ring and chain schedules, for every collective (the
// ports are ring connections). Doubling: recursive-doubling all-reduce for a power of two
// ranks (p2p connections to the partners), log2(n) hops for small messages. Tree: all-reduce
// as a pipelined reduce up one tree of a double binary tree and a broadcast down it (ring
// connections to the tree neighbours), O(log hosts) hops; see builders.cc.
enum class Algo : uint8_t { Ring, Doubling, Tree };

constexpr int kNumAlgos = 3;

const char* algoName(Algo algo);

// The connection set a collective's ports use: ring neighbours (all-reduce, reduce-scatter,
// all-gather, broadcast, reduce by Ring) or per-peer p2p connections (all-to-all, gather,
// scatter, send/recv, and all-reduce by Doubling). An executor whose two sets have different
// slot sizes must take sliceElems from this set's slots (the runner refuses slots smaller
// than a slice).
PortKind collPortKind(Coll coll, Algo algo = Algo::Ring);

struct CollDesc {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  int nranks = 1;
  int rank = 0;
  int root = 0;           // broadcast, reduce, gather, scatter: root; send, recv: peer
  std::vector<int> ring;  // this channel's ring: ring[i] = rank at position i; empty = 0..n-1
  // Ring bodies as repeated steps (program.h) even where they fit written out; beyond 128
  // ranks (all-reduce) or 256 (reduce-scatter, all-gather) they are compact anyway. A
  // compact reduce-scatter or all-gather on a ring other than 0..n-1 needs the ring as the
  // runner's RunArgs::ringRanks.
  bool compact = false;
  TreeNode tree;  // Tree: this rank's parent and children in this channel's tree
};

// One rank's part of `d` on one channel.
ncclResult_t buildProgram(const CollDesc& d, Program* out);

// Grouped point-to-point: every send/recv a rank posted in one group, as one Program whose
// lanes (one per peer and direction, chained in posting order) progress independently.
struct P2pOp {
  bool send = true;  // send to peer, else receive from peer
  int peer = 0;
  int count = 0;   // index into the runner's counts
  int buffer = 0;  // index into the runner's inputs (sends) or outputs (receives)
};

struct P2pDesc {
  std::vector<P2pOp> ops;  // several ops to one peer and direction match in order
  int nranks = 1;
  int rank = 0;
};

// Sends to self are paired in order with receives from self and become local copies (the
// caller checks that their counts agree).
ncclResult_t buildP2p(const P2pDesc& d, Program* out);

// Ring position (0..n-1) whose chunk the rank at `pos` handles after the chunk has made
// `hops` hops forward from where it started: (pos - hops) mod n.
inline int ringOrigin(int pos, int hops, int n) { return ((pos - hops) % n + n) % n; }

}  // namespace ringcc
