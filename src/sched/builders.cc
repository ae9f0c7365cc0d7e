// Program builders. Every ring collective is written once here as its list of step kinds;
// "which block at which step" comes only from ringOrigin(), never recomputed inline.
//
// Ring all-reduce of one loop on 4 ranks (positions 0..3, chunk c starts at c+1 and is fully
// reduced at c, then travels on as a copy):
//
//   step:     0       1        2          3            4          5        6
//   pos 0:  send c3  rrs c2   rrs c1   rrcs* c0      rcs c3     rcs c2   recv c1
//   pos 1:  send c0  rrs c3   rrs c2   rrcs* c1      rcs c0     rcs c3   recv c2
//   ...     (rrs = recv-reduce-send, rrcs* = recv-reduce-copy-send with post,
//            rcs = recv-copy-send; at step s the rank at pos handles chunk ringOrigin(pos, s+1))
//
// Each run of one step kind (the rrs and the rcs above) is given as a step and a count to
// ProgramWriter::walk(), which writes it out step by step while the body fits kMaxSteps and
// as one repeated step beyond (program.h, Repeated steps): the same body either way.
#include "src/sched/builders.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"

namespace ringcc {

namespace {

constexpr const char* kWhere = "sched";

// Appends ports, lanes and steps to a Program, remembering the first overflow.
class ProgramWriter {
 public:
  explicit ProgramWriter(Program* p) : p_(p) {
    std::memset(p, 0, sizeof(*p));
    p->nBuffers = 1;
    p->nCounts = 1;
  }

  // Index of the port (peer, dir, kind), added if new; -1 on overflow.
  int port(int peer, PortDir dir, PortKind kind) {
    for (int i = 0; i < p_->nPorts; i++) {
      const Port& q = p_->ports[i];
      if (q.peer == peer && q.dir == dir && q.kind == kind) return i;
    }
    if (p_->nPorts >= kMaxPorts) return overflow("ports", kMaxPorts);
    Port& q = p_->ports[p_->nPorts];
    q.peer = peer;
    q.dir = dir;
    q.kind = kind;
    return p_->nPorts++;
  }

  struct LaneSpec {
    uint8_t flags = 0;  // LaneFlags
    int chunksPerLoop = 1;
    int after = kNoLane;
    int inBuf = 0;
    int outBuf = 0;
    int count = 0;
  };

  // Starts a lane; its steps are the ones added until the next beginLane. -1 on overflow.
  int beginLane(const LaneSpec& spec) {
    if (p_->nLanes >= kMaxLanes) return overflow("lanes", kMaxLanes);
    Lane& l = p_->lanes[p_->nLanes];
    l.firstStep = p_->nSteps;
    l.nSteps = 0;
    l.after = (int16_t)spec.after;
    l.inBuf = (uint8_t)spec.inBuf;
    l.outBuf = (uint8_t)spec.outBuf;
    l.count = (uint8_t)spec.count;
    l.flags = spec.flags;
    l.chunksPerLoop = (uint16_t)spec.chunksPerLoop;
    p_->nBuffers = (uint16_t)std::max<int>(p_->nBuffers, std::max(spec.inBuf, spec.outBuf) + 1);
    p_->nCounts = (uint16_t)std::max<int>(p_->nCounts, spec.count + 1);
    return p_->nLanes++;
  }

  void step(uint8_t flags, int recvPort, int sendPort, int chunk, int inBlock, int outBlock) {
    add(makeStep(flags, recvPort, sendPort, chunk, inBlock, outBlock));
  }

  static Step makeStep(uint8_t flags, int recvPort, int sendPort, int chunk, int inBlock,
                       int outBlock, uint8_t walk = 0) {
    Step s{};
    s.flags = flags;
    s.recvPort = (flags & kStepRecv) && recvPort >= 0 ? (uint8_t)recvPort : kNoPort;
    s.sendPort = (flags & kStepSend) && sendPort >= 0 ? (uint8_t)sendPort : kNoPort;
    s.walk = walk;
    s.chunk = (uint16_t)chunk;
    s.inBlock = (uint16_t)inBlock;
    s.outBlock = (uint16_t)outBlock;
    return s;
  }

  // `times` steps like `s` on the ring `ring` (the rank at each of n positions), repetition j
  // with its walking indices moved j positions back (stepRepetition): written out one by one,
  // or, when `compact`, as one step repeated. A single step is always written out, so that a
  // ring body's first and last steps look the same in both forms.
  void walk(const Step& s, int times, bool compact, const int* ring, int n) {
    if (times <= 0 || p_->nLanes == 0) return;
    const uint32_t perLoop = p_->lanes[p_->nLanes - 1].chunksPerLoop;
    if (!compact || times == 1) {
      for (int j = 0; j < times; j++)
        add(stepRepetition(s, perLoop, (uint32_t)j, ring, (uint32_t)n));
      return;
    }
    if (s.walk & (kWalkIn | kWalkOut)) {
      p_->ringSize = (uint16_t)n;
      p_->ringHash = ringOrderHash(ring, (uint32_t)n);
    }
    Step r = s;
    r.repeat = (uint16_t)(times - 1);
    add(r);
  }

  ncclResult_t finish(const char* what) {
    if (!error_.empty())
      return fail(ncclInvalidUsage, kWhere, "%s does not fit a Program: %s", what, error_.c_str());
    if (const char* why = checkProgram(*p_))
      return fail(ncclInternalError, kWhere, "%s built an invalid Program: %s", what, why);
    return ncclSuccess;
  }

 private:
  void add(const Step& s) {
    if (p_->nLanes == 0) return;
    if (p_->nSteps >= kMaxSteps) {
      overflow("steps", kMaxSteps);
      return;
    }
    p_->steps[p_->nSteps++] = s;
    p_->lanes[p_->nLanes - 1].nSteps++;
  }

  int overflow(const char* table, int bound) {
    if (error_.empty())
      error_ = std::string("needs more ") + table + " than " + std::to_string(bound);
    return -1;
  }

  Program* p_;
  std::string error_;
};

struct RingInfo {
  int n;
  int pos;
  int prev;
  int next;
  const std::vector<int>* order;
  bool compact;  // CollDesc::compact: repeated steps even where the body fits written out
  int rankAt(int position) const { return (*order)[position]; }
  // Compact when asked or when `steps` written out would not fit a Program.
  bool compactFor(int steps) const { return compact || steps > kMaxSteps; }
};

ncclResult_t ringInfo(const CollDesc& d, std::vector<int>* storage, RingInfo* info) {
  const std::vector<int>* order = &d.ring;
  if (d.ring.empty()) {
    storage->resize(d.nranks);
    for (int i = 0; i < d.nranks; i++) (*storage)[i] = i;
    order = storage;
  }
  if ((int)order->size() != d.nranks)
    return fail(ncclInvalidArgument, kWhere, "ring has %zu ranks, nranks is %d", order->size(),
                d.nranks);
  std::vector<bool> seen(d.nranks, false);
  int pos = -1;
  for (int i = 0; i < d.nranks; i++) {
    int r = (*order)[i];
    if (r < 0 || r >= d.nranks || seen[r])
      return fail(ncclInvalidArgument, kWhere, "ring is not a permutation of 0..%d", d.nranks - 1);
    seen[r] = true;
    if (r == d.rank) pos = i;
  }
  int n = d.nranks;
  *info = RingInfo{n, pos, (*order)[(pos + n - 1) % n], (*order)[(pos + 1) % n], order, d.compact};
  return ncclSuccess;
}

using LaneSpec = ProgramWriter::LaneSpec;

// Sends of the ring, chain and exchange schedules may go by reference (Direct protocol): what
// a rank sends there is either its input, which no step of the collective writes before every
// rank has read what it needs (the result reaches a rank only through the ranks that read its
// sends), or output it wrote once and never writes again. Recursive doubling is the exception:
// a round overwrites the partial result it has just sent.
uint8_t withByRef(uint8_t flags) {
  return flags & kStepSend ? static_cast<uint8_t>(flags | kStepByRef) : flags;
}

// A ring lane of one loop body; ring collectives have exactly one.
LaneSpec ringLane(int chunksPerLoop, int n) {
  LaneSpec l;
  l.flags = n > 1 ? kLaneRing : 0;
  l.chunksPerLoop = chunksPerLoop;
  return l;
}

// All-reduce: per loop, the channel's part is cut into n chunks (one per ring position).
void ringAllReduce(const RingInfo& r, ProgramWriter& w) {
  const int n = r.n;
  if (w.beginLane(ringLane(n, n)) < 0) return;
  if (n == 1) {
    w.step(kStepLocal | kStepOut | kStepPost, -1, -1, 0, 0, 0);
    return;
  }
  const int recv = w.port(r.prev, kPortRecv, kPortRing);
  const int send = w.port(r.next, kPortSend, kPortRing);
  const bool compact = r.compactFor(2 * n - 1);
  // Steps s .. s+times-1: chunk ringOrigin(pos, s+1) first, one position back per step.
  auto add = [&](int s, int times, uint8_t flags) {
    w.walk(ProgramWriter::makeStep(withByRef(flags), recv, send, ringOrigin(r.pos, s + 1, n), 0, 0,
                                   kWalkChunk),
           times, compact, r.order->data(), n);
  };
  add(0, 1, kStepLocal | kStepSend);
  add(1, n - 2, kStepRecv | kStepLocal | kStepSend);
  add(n - 1, 1, kStepRecv | kStepLocal | kStepOut | kStepSend | kStepPost);
  add(n, n - 2, kStepRecv | kStepOut | kStepSend);
  add(2 * n - 2, 1, kStepRecv | kStepOut);
}

// Recursive-doubling all-reduce (nranks a power of two): in round k every rank swaps its
// partial result with partner rank ^ 2^k and combines the two. log2(n) hops instead of the
// ring's 2(n-1), each moving the whole message; for small messages.
//
//   4 ranks:  round 0   0<->1  2<->3      s01 = a0+a1 on 0 and 1, s23 on 2 and 3
//             round 1   0<->2  1<->3      s01+s23 on 0 and 1, s23+s01 on 2 and 3
//
// Partners combine the same two values in opposite order, and every op is commutative bit for
// bit (max/min order -0 below +0), so all ranks end with the same bits, as with a ring's
// single reduction. Pre applies once per input (round 0 reads the input); later rounds read
// the partial result from the output (kStepLocalOut, no pre); post applies in the last round.
// Per loop one chunk; a round sends it before it receives, and a chunk fits the FIFO
// (kLaneRing), so partners never wait on each other's room.
void doublingAllReduce(const CollDesc& d, ProgramWriter& w) {
  if (w.beginLane(ringLane(1, d.nranks)) < 0) return;
  for (int bit = 1; bit < d.nranks; bit <<= 1) {
    const int partner = d.rank ^ bit;
    const int recv = w.port(partner, kPortRecv, kPortP2p);
    const int send = w.port(partner, kPortSend, kPortP2p);
    const uint8_t local = bit == 1 ? kStepLocal : kStepLocalOut;
    const uint8_t post = bit << 1 == d.nranks ? kStepPost : 0;
    w.step(local | kStepSend, recv, send, 0, 0, 0);
    w.step(kStepRecv | local | kStepOut | post, recv, send, 0, 0, 0);
  }
}

// Tree all-reduce: per chunk, a reduce up this channel's tree (every rank adds its children's
// partial results to its input and sends the sum to its parent) and a broadcast down it (the
// root's result, copied from parent to children), pipelined chunk by chunk. A step receives
// from one port, so a rank with k children reduces in k steps, the first k-1 keeping the
// partial result in its output (kStepLocalOut reads it back without pre):
//
//         p            non-root with children c0, c1 and parent p, two lanes:
//         |              up:   recv c0 + input -> out         down: recv p -> out, send c0
//         r                    recv c1 + out   -> send p            out    -> send c1
//        / \           leaf (no children):
//      c0   c1           up:   input -> send p                down: recv p -> out
//                      root (no parent), one lane: the up steps, the last one writing the
//                      result with post and sending it to c0, then out -> send c1, c2
//
// Up and down are separate lanes so that a rank passes chunk c+1 up while chunk c is still on
// its way down: the runner moves whichever lane can move. They share no port (up receives from
// the children and sends to the parent, down the other way), so they need no ordering. The
// down lane writes a chunk's output only after the parent sent it, which is after this rank's
// up lane passed that chunk, so the partial results never overwrite the result, and in place
// the input of a chunk is read before its output is written. The root's down sends read the
// result its own up steps wrote, so they follow them in the same lane.
//
// By reference (Direct): a leaf's send is its input as it is, which stays unchanged until its
// parent has read it (this rank's output, in place the same memory, is written only once the
// result comes back down, after every rank read its inputs); a down send is the output this
// rank has just written with the result, never written again. Partial sums are copies.
void treeAllReduce(const CollDesc& d, ProgramWriter& w) {
  const TreeNode& t = d.tree;
  int kids = 0;
  while (kids < 3 && t.down[kids] >= 0) kids++;
  const bool root = t.up < 0;
  LaneSpec up;
  if (w.beginLane(up) < 0) return;
  if (root && kids == 0) {
    w.step(kStepLocal | kStepOut | kStepPost, -1, -1, 0, 0, 0);
    return;
  }
  const int parentRecv = root ? -1 : w.port(t.up, kPortRecv, kPortRing);
  const int parentSend = root ? -1 : w.port(t.up, kPortSend, kPortRing);
  int childRecv[3], childSend[3];
  for (int i = 0; i < kids; i++) {
    childRecv[i] = w.port(t.down[i], kPortRecv, kPortRing);
    childSend[i] = w.port(t.down[i], kPortSend, kPortRing);
  }
  // Up: each child's partial result in turn; the input joins at the first step.
  if (kids == 0) w.step(withByRef(kStepLocal | kStepSend), -1, parentSend, 0, 0, 0);
  for (int i = 0; i < kids; i++) {
    const uint8_t local = i == 0 ? kStepLocal : kStepLocalOut;
    const bool last = i == kids - 1;
    if (!last)
      w.step(kStepRecv | local | kStepOut, childRecv[i], -1, 0, 0, 0);
    else if (!root)
      w.step(kStepRecv | local | kStepSend, childRecv[i], parentSend, 0, 0, 0);
    else
      w.step(withByRef(kStepRecv | local | kStepOut | kStepPost | kStepSend), childRecv[i],
             childSend[0], 0, 0, 0);
  }
  // Down: the result to every child (the root's first child got it with the last up step).
  if (!root) {
    if (w.beginLane(LaneSpec{}) < 0) return;
    const uint8_t toChild = kids > 0 ? kStepSend : 0;
    w.step(withByRef(kStepRecv | kStepOut | toChild), parentRecv, kids > 0 ? childSend[0] : -1, 0,
           0, 0);
  }
  for (int i = 1; i < kids; i++) w.step(kStepLocalOut | kStepSend, -1, childSend[i], 0, 0, 0);
}

// Checks that `d.tree` could be this rank's node: ranks in range, no self, no repeats, children
// filled from down[0].
ncclResult_t checkTreeNode(const CollDesc& d) {
  const TreeNode& t = d.tree;
  auto bad = [&](const char* why) {
    return fail(ncclInvalidArgument, kWhere, "rank %d's tree node (up %d, down %d/%d/%d): %s",
                d.rank, t.up, t.down[0], t.down[1], t.down[2], why);
  };
  if (t.up < -1 || t.up >= d.nranks || t.up == d.rank) return bad("parent out of range or self");
  bool gap = false;
  for (int i = 0; i < 3; i++) {
    const int c = t.down[i];
    if (c < 0) {
      gap = true;
      continue;
    }
    if (gap) return bad("children must fill down[] from down[0]");
    if (c >= d.nranks || c == d.rank || c == t.up) return bad("child out of range, self or parent");
    for (int j = 0; j < i; j++)
      if (t.down[j] == c) return bad("a child is listed twice");
  }
  if (d.nranks > 1 && t.up < 0 && t.down[0] < 0) return bad("a root without children");
  return ncclSuccess;
}

// Reduce-scatter: block b (input block b) is reduced along the ring, starting at the rank
// after b's owner and ending at the owner, which applies post and writes its output.
void ringReduceScatter(const RingInfo& r, ProgramWriter& w) {
  const int n = r.n;
  if (w.beginLane(ringLane(1, n)) < 0) return;
  if (n == 1) {
    w.step(kStepLocal | kStepOut | kStepPost, -1, -1, 0, 0, 0);
    return;
  }
  const int recv = w.port(r.prev, kPortRecv, kPortRing);
  const int send = w.port(r.next, kPortSend, kPortRing);
  const bool compact = r.compactFor(n);
  // Steps s .. s+times-1: the input block of the rank at ringOrigin(pos, s+1) first.
  auto add = [&](int s, int times, uint8_t flags) {
    w.walk(ProgramWriter::makeStep(withByRef(flags), recv, send, 0, ringOrigin(r.pos, s + 1, n), 0,
                                   kWalkIn),
           times, compact, r.order->data(), n);
  };
  add(0, 1, kStepLocal | kStepSend);
  add(1, n - 2, kStepRecv | kStepLocal | kStepSend);
  add(n - 1, 1, kStepRecv | kStepLocal | kStepOut | kStepPost);
}

// All-gather: block b (the input of rank b) starts at b and travels n-1 hops.
void ringAllGather(const RingInfo& r, ProgramWriter& w) {
  const int n = r.n;
  if (w.beginLane(ringLane(1, n)) < 0) return;
  if (n == 1) {
    w.step(kStepLocal | kStepOut, -1, -1, 0, 0, 0);
    return;
  }
  const int recv = w.port(r.prev, kPortRecv, kPortRing);
  const int send = w.port(r.next, kPortSend, kPortRing);
  const bool compact = r.compactFor(n);
  // Steps s .. s+times-1: the output block of the rank at ringOrigin(pos, s) first.
  auto add = [&](int s, int times, uint8_t flags) {
    w.walk(ProgramWriter::makeStep(withByRef(flags), recv, send, 0, 0, ringOrigin(r.pos, s, n),
                                   kWalkOut),
           times, compact, r.order->data(), n);
  };
  add(0, 1, kStepLocal | kStepOut | kStepSend);
  add(1, n - 2, kStepRecv | kStepOut | kStepSend);
  add(n - 1, 1, kStepRecv | kStepOut);
}

// Broadcast and reduce: a pipelined chain along the ring. Broadcast starts at the root and
// ends just before it; reduce starts just after the root and ends at it. `hop` is this rank's
// place in the chain (0 = first). A chain step forwards each slot as it arrives, so one slot
// of room is enough: no kLaneRing.
void ringChain(const CollDesc& d, const RingInfo& r, bool reduce, ProgramWriter& w) {
  const int n = r.n;
  int rootPos = 0;
  for (int i = 0; i < n; i++)
    if (r.rankAt(i) == d.root) rootPos = i;
  const int first = reduce ? (rootPos + 1) % n : rootPos;
  const int hop = ringOrigin(r.pos, first, n);  // (pos - first) mod n
  if (w.beginLane(LaneSpec{}) < 0) return;
  uint8_t flags;
  const uint8_t local = reduce || hop == 0 ? kStepLocal : 0;
  if (n == 1) {
    flags = kStepLocal | kStepOut | (reduce ? kStepPost : 0);
  } else if (hop == 0) {
    flags = kStepLocal | kStepSend | (reduce ? 0 : kStepOut);
  } else if (hop < n - 1) {
    flags = kStepRecv | kStepSend | local | (reduce ? 0 : kStepOut);
  } else {
    flags = kStepRecv | kStepOut | local | (reduce ? kStepPost : 0);
  }
  int rp = flags & kStepRecv ? w.port(r.prev, kPortRecv, kPortRing) : -1;
  int sp = flags & kStepSend ? w.port(r.next, kPortSend, kPortRing) : -1;
  w.step(withByRef(flags), rp, sp, 0, 0, 0);
}

// One whole lane moving a block: a send (from input block inBlock), a receive (to output
// block outBlock), or a local copy. A single step: the runner streams it slot by slot.
void p2pLane(ProgramWriter& w, uint8_t flags, int port, int inBlock, int outBlock,
             LaneSpec spec = {}) {
  spec.flags = kLaneWhole;
  if (w.beginLane(spec) < 0) return;
  w.step(withByRef(flags), port, port, 0, inBlock, outBlock);
}

// All-to-all, gather and scatter: per-peer lanes over p2p ports. Peers are visited in the
// pairwise order (rank+k for sends, rank-k for receives) so that load spreads evenly.
void blockedExchange(const CollDesc& d, ProgramWriter& w) {
  const int n = d.nranks;
  const int me = d.rank;
  const bool a2a = d.coll == Coll::AllToAll;
  const bool gather = d.coll == Coll::Gather;
  // The local block: all-to-all in block me -> out block me; gather at the root: in ->
  // out block root; scatter at the root: in block root -> out.
  if (a2a) p2pLane(w, kStepLocal | kStepOut, -1, me, me);
  if (!a2a && me == d.root) p2pLane(w, kStepLocal | kStepOut, -1, gather ? 0 : me, gather ? me : 0);
  for (int k = 1; k < n; k++) {
    const int to = (me + k) % n;
    const int from = (me - k + n) % n;
    // Sends: all-to-all to everyone; gather: non-roots to the root; scatter: root to all.
    bool send = a2a || (gather ? (me != d.root && to == d.root) : me == d.root);
    bool recv = a2a || (gather ? me == d.root : (me != d.root && from == d.root));
    if (send)
      p2pLane(w, kStepLocal | kStepSend, w.port(to, kPortSend, kPortP2p), gather ? 0 : to, 0);
    if (recv)
      p2pLane(w, kStepRecv | kStepOut, w.port(from, kPortRecv, kPortP2p), 0,
              a2a || gather ? from : 0);
  }
}

ncclResult_t checkRanks(int nranks, int rank) {
  if (nranks < 1) return fail(ncclInvalidArgument, kWhere, "nranks %d < 1", nranks);
  if (nranks > 0xffff) return fail(ncclInvalidUsage, kWhere, "nranks %d > 65535", nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, kWhere, "rank %d not in 0..%d", rank, nranks - 1);
  return ncclSuccess;
}

}  // namespace

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce:
      return "AllReduce";
    case Coll::ReduceScatter:
      return "ReduceScatter";
    case Coll::AllGather:
      return "AllGather";
    case Coll::Broadcast:
      return "Broadcast";
    case Coll::Reduce:
      return "Reduce";
    case Coll::Send:
      return "Send";
    case Coll::Recv:
      return "Recv";
    case Coll::AllToAll:
      return "AllToAll";
    case Coll::Gather:
      return "Gather";
    case Coll::Scatter:
      return "Scatter";
  }
  return "?";
}

const char* algoName(Algo algo) {
  switch (algo) {
    case Algo::Doubling:
      return "Doubling";
    case Algo::Tree:
      return "Tree";
    default:
      return "Ring";
  }
}

PortKind collPortKind(Coll coll, Algo algo) {
  if (algo == Algo::Doubling) return kPortP2p;
  switch (coll) {
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter:
    case Coll::Send:
    case Coll::Recv:
      return kPortP2p;
    default:
      return kPortRing;
  }
}

ncclResult_t buildProgram(const CollDesc& d, Program* out) {
  RINGCC_CHECK(checkRanks(d.nranks, d.rank));
  const bool rooted = collRooted(d.coll) || d.coll == Coll::Send || d.coll == Coll::Recv;
  if (rooted && (d.root < 0 || d.root >= d.nranks))
    return fail(ncclInvalidArgument, kWhere, "%s %s %d not in 0..%d", collName(d.coll),
                d.coll == Coll::Send || d.coll == Coll::Recv ? "peer" : "root", d.root,
                d.nranks - 1);
  if (d.coll == Coll::Send || d.coll == Coll::Recv) {
    if (d.root == d.rank)
      return fail(ncclInvalidArgument, kWhere, "%s to self needs the matching op in one group",
                  collName(d.coll));
    P2pDesc p;
    p.ops.push_back(P2pOp{d.coll == Coll::Send, d.root, 0, 0});
    p.nranks = d.nranks;
    p.rank = d.rank;
    return buildP2p(p, out);
  }
  ProgramWriter w(out);
  if (d.coll == Coll::AllToAll || d.coll == Coll::Gather || d.coll == Coll::Scatter) {
    blockedExchange(d, w);
    return w.finish(collName(d.coll));
  }
  std::vector<int> storage;
  RingInfo r;
  RINGCC_CHECK(ringInfo(d, &storage, &r));
  if (d.algo != Algo::Ring && d.coll != Coll::AllReduce)
    return fail(ncclInvalidArgument, kWhere, "%s builds all-reduce only, not %s", algoName(d.algo),
                collName(d.coll));
  switch (d.coll) {
    case Coll::AllReduce:
      if (d.algo == Algo::Doubling) {
        if (d.nranks < 2 || (d.nranks & (d.nranks - 1)) != 0)
          return fail(ncclInvalidArgument, kWhere,
                      "recursive doubling needs a power of two ranks, not %d", d.nranks);
        doublingAllReduce(d, w);
      } else if (d.algo == Algo::Tree) {
        RINGCC_CHECK(checkTreeNode(d));
        treeAllReduce(d, w);
      } else {
        ringAllReduce(r, w);
      }
      break;
    case Coll::ReduceScatter:
      ringReduceScatter(r, w);
      break;
    case Coll::AllGather:
      ringAllGather(r, w);
      break;
    case Coll::Broadcast:
      ringChain(d, r, false, w);
      break;
    case Coll::Reduce:
      ringChain(d, r, true, w);
      break;
    default:
      return fail(ncclInvalidArgument, kWhere, "unknown collective %d", (int)d.coll);
  }
  return w.finish(collName(d.coll));
}

ncclResult_t buildP2p(const P2pDesc& d, Program* out) {
  RINGCC_CHECK(checkRanks(d.nranks, d.rank));
  ProgramWriter w(out);
  std::vector<const P2pOp*> selfSends, selfRecvs;
  // Last lane on each port, to chain several ops to one peer and direction.
  std::vector<int> lastOnPort(kMaxPorts, kNoLane);
  for (const P2pOp& op : d.ops) {
    if (op.peer < 0 || op.peer >= d.nranks)
      return fail(ncclInvalidArgument, kWhere, "p2p peer %d not in 0..%d", op.peer, d.nranks - 1);
    if (op.buffer < 0 || op.buffer >= kMaxBuffers)
      return fail(ncclInvalidArgument, kWhere, "p2p buffer index %d not in 0..%d", op.buffer,
                  kMaxBuffers - 1);
    if (op.count < 0 || op.count >= kMaxCounts)
      return fail(ncclInvalidArgument, kWhere, "p2p count index %d not in 0..%d", op.count,
                  kMaxCounts - 1);
    if (op.peer == d.rank) {
      (op.send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    int port = w.port(op.peer, op.send ? kPortSend : kPortRecv, kPortP2p);
    if (port < 0) break;
    LaneSpec spec;
    spec.flags = kLaneWhole;
    spec.after = lastOnPort[port];
    spec.inBuf = spec.outBuf = op.buffer;
    spec.count = op.count;
    const int lane = w.beginLane(spec);
    if (lane < 0) break;
    w.step(op.send ? kStepLocal | kStepSend | kStepByRef : kStepRecv | kStepOut, port, port, 0, 0,
           0);
    lastOnPort[port] = lane;
  }
  if (selfSends.size() != selfRecvs.size())
    return fail(ncclInvalidArgument, kWhere, "rank %d posted %zu sends to self but %zu receives",
                d.rank, selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); i++) {
    LaneSpec spec;
    spec.inBuf = selfSends[i]->buffer;
    spec.outBuf = selfRecvs[i]->buffer;
    spec.count = selfSends[i]->count;
    p2pLane(w, kStepLocal | kStepOut, -1, 0, 0, spec);
  }
  return w.finish("grouped send/recv");
}

}  // namespace ringcc
