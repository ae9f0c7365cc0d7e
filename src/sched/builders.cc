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
#include "src/sched/builders.h"

#include <algorithm>
#include <cstring>

#include "src/core/error.h"

namespace ringcc {

namespace {

constexpr const char* kWhere = "sched";

uint64_t divUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t roundUp(uint64_t a, uint64_t b) { return divUp(a, b) * b; }

// Appends ports, lanes and steps to a Program, remembering the first overflow.
class ProgramWriter {
 public:
  ProgramWriter(Program* p, size_t elemSize, size_t sliceElems) : p_(p) {
    std::memset(p, 0, sizeof(*p));
    p->elemSize = (uint32_t)elemSize;
    p->sliceElems = (uint32_t)sliceElems;
    p->minSlots = 1;
    p->nBuffers = 1;
  }

  // A ring step that only sends pushes a whole chunk before its rank receives again; the next
  // step then needs one more free slot to forward anything. Chains and p2p need one slot.
  void ringChunk(uint64_t chunkElems) {
    uint64_t slots = divUp(chunkElems, p_->sliceElems) + 1;
    p_->minSlots = (uint32_t)std::max<uint64_t>(p_->minSlots, slots);
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

  // Starts a lane; its steps are the ones added until the next beginLane. -1 on overflow.
  int beginLane(uint64_t nLoops, uint64_t extent, uint64_t posStride, uint64_t inStride,
                uint64_t outStride, int after = kNoLane, int inBuf = 0, int outBuf = 0) {
    if (p_->nLanes >= kMaxLanes) return overflow("lanes", kMaxLanes);
    if (nLoops > UINT32_MAX) {
      error_ = error_.empty() ? "needs more than 2^32 loops; use larger chunks" : error_;
      return -1;
    }
    Lane& l = p_->lanes[p_->nLanes];
    l.firstStep = p_->nSteps;
    l.nSteps = 0;
    l.after = (int16_t)after;
    l.inBuf = (uint8_t)inBuf;
    l.outBuf = (uint8_t)outBuf;
    l.nLoops = (uint32_t)nLoops;
    l.extent = extent;
    l.posStride = posStride;
    l.inStride = inStride;
    l.outStride = outStride;
    p_->nBuffers = (uint16_t)std::max<int>(p_->nBuffers, std::max(inBuf, outBuf) + 1);
    return p_->nLanes++;
  }

  void step(uint8_t flags, int recvPort, int sendPort, uint64_t pos, uint64_t count,
            uint64_t inOffset, uint64_t outOffset) {
    if (p_->nLanes == 0) return;
    if (p_->nSteps >= kMaxSteps) {
      overflow("steps", kMaxSteps);
      return;
    }
    Step& s = p_->steps[p_->nSteps++];
    s.flags = flags;
    s.recvPort = (flags & kStepRecv) && recvPort >= 0 ? (uint8_t)recvPort : kNoPort;
    s.sendPort = (flags & kStepSend) && sendPort >= 0 ? (uint8_t)sendPort : kNoPort;
    s.pos = pos;
    s.count = count;
    s.inOffset = inOffset;
    s.outOffset = outOffset;
    p_->lanes[p_->nLanes - 1].nSteps++;
  }

  ncclResult_t finish(const char* what) {
    if (!error_.empty())
      return fail(ncclInvalidUsage, kWhere, "%s does not fit a Program: %s", what, error_.c_str());
    if (const char* why = checkProgram(*p_))
      return fail(ncclInternalError, kWhere, "%s built an invalid Program: %s", what, why);
    return ncclSuccess;
  }

 private:
  int overflow(const char* table, int bound) {
    if (error_.empty())
      error_ = std::string("needs more ") + table + " than " + std::to_string(bound);
    return -1;
  }

  Program* p_;
  std::string error_;
};

uint64_t alignElems(size_t elemSize) { return elemSize >= 16 ? 1 : 16 / elemSize; }

struct RingInfo {
  int n;
  int pos;
  int prev;
  int next;
  const std::vector<int>* order;
  int rankAt(int position) const { return (*order)[position]; }
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
  *info = RingInfo{n, pos, (*order)[(pos + n - 1) % n], (*order)[(pos + 1) % n], order};
  return ncclSuccess;
}

// All-reduce: per loop, the channel's part is cut into n chunks (one per ring position).
void ringAllReduce(const CollDesc& d, const RingInfo& r, ElemRange ch, ProgramWriter& w) {
  const int n = r.n;
  uint64_t loops;
  uint64_t k = evenChunk(ch.count, n, d.chunkElems, alignElems(d.elemSize), &loops);
  const uint64_t stride = n * k;
  if (n > 1) w.ringChunk(k);
  if (w.beginLane(loops, ch.count, stride, stride, stride) < 0) return;
  auto add = [&](int s, uint8_t flags) {
    uint64_t pos = (uint64_t)ringOrigin(r.pos, s + 1, n) * k;
    w.step(flags, w.port(r.prev, kPortRecv, kPortRing), w.port(r.next, kPortSend, kPortRing), pos,
           k, ch.begin + pos, ch.begin + pos);
  };
  if (n == 1) {
    w.step(kStepLocal | kStepOut | kStepPost, -1, -1, 0, k, ch.begin, ch.begin);
    return;
  }
  int s = 0;
  add(s++, kStepLocal | kStepSend);
  for (int j = 0; j < n - 2; j++) add(s++, kStepRecv | kStepLocal | kStepSend);
  add(s++, kStepRecv | kStepLocal | kStepOut | kStepSend | kStepPost);
  for (int j = 0; j < n - 2; j++) add(s++, kStepRecv | kStepOut | kStepSend);
  add(s++, kStepRecv | kStepOut);
}

// Reduce-scatter: block b (input at b*count) is reduced along the ring, starting at the rank
// after b's owner and ending at the owner, which applies post and writes its output.
void ringReduceScatter(const CollDesc& d, const RingInfo& r, ElemRange ch, ProgramWriter& w) {
  const int n = r.n;
  uint64_t loops;
  uint64_t k = evenChunk(ch.count, 1, d.chunkElems, alignElems(d.elemSize), &loops);
  if (n > 1) w.ringChunk(k);
  if (w.beginLane(loops, ch.count, k, k, k) < 0) return;
  auto add = [&](int s, uint8_t flags) {
    uint64_t block = (uint64_t)r.rankAt(ringOrigin(r.pos, s + 1, n));
    w.step(flags, w.port(r.prev, kPortRecv, kPortRing), w.port(r.next, kPortSend, kPortRing), 0, k,
           block * d.count + ch.begin, ch.begin);
  };
  if (n == 1) {
    w.step(kStepLocal | kStepOut | kStepPost, -1, -1, 0, k, ch.begin, ch.begin);
    return;
  }
  int s = 0;
  add(s++, kStepLocal | kStepSend);
  for (int j = 0; j < n - 2; j++) add(s++, kStepRecv | kStepLocal | kStepSend);
  add(s++, kStepRecv | kStepLocal | kStepOut | kStepPost);
}

// All-gather: block b (the input of rank b) starts at b and travels n-1 hops.
void ringAllGather(const CollDesc& d, const RingInfo& r, ElemRange ch, ProgramWriter& w) {
  const int n = r.n;
  uint64_t loops;
  uint64_t k = evenChunk(ch.count, 1, d.chunkElems, alignElems(d.elemSize), &loops);
  if (n > 1) w.ringChunk(k);
  if (w.beginLane(loops, ch.count, k, k, k) < 0) return;
  auto add = [&](int s, uint8_t flags) {
    uint64_t block = (uint64_t)r.rankAt(ringOrigin(r.pos, s, n));
    w.step(flags, w.port(r.prev, kPortRecv, kPortRing), w.port(r.next, kPortSend, kPortRing), 0, k,
           ch.begin, block * d.count + ch.begin);
  };
  if (n == 1) {
    w.step(kStepLocal | kStepOut, -1, -1, 0, k, ch.begin, ch.begin);
    return;
  }
  int s = 0;
  add(s++, kStepLocal | kStepOut | kStepSend);
  for (int j = 0; j < n - 2; j++) add(s++, kStepRecv | kStepOut | kStepSend);
  add(s++, kStepRecv | kStepOut);
}

// Broadcast and reduce: a pipelined chain along the ring. Broadcast starts at the root and
// ends just before it; reduce starts just after the root and ends at it. `hop` is this rank's
// place in the chain (0 = first).
void ringChain(const CollDesc& d, const RingInfo& r, ElemRange ch, bool reduce, ProgramWriter& w) {
  const int n = r.n;
  int rootPos = 0;
  for (int i = 0; i < n; i++)
    if (r.rankAt(i) == d.root) rootPos = i;
  const int first = reduce ? (rootPos + 1) % n : rootPos;
  const int hop = ringOrigin(r.pos, first, n);  // (pos - first) mod n
  uint64_t loops;
  uint64_t k = evenChunk(ch.count, 1, d.chunkElems, alignElems(d.elemSize), &loops);
  if (w.beginLane(loops, ch.count, k, k, k) < 0) return;
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
  w.step(flags, rp, sp, 0, k, ch.begin, ch.begin);
}

// One lane moving `part` of a block: a send (from input offset), a receive (to output
// offset), or a local copy. A single step: the runner streams it slot by slot.
void p2pLane(ProgramWriter& w, uint8_t flags, int port, ElemRange part, uint64_t inBase,
             uint64_t outBase, int after, int inBuf, int outBuf) {
  if (w.beginLane(1, part.count, 0, 0, 0, after, inBuf, outBuf) < 0) return;
  w.step(flags, port, port, 0, part.count, inBase + part.begin, outBase + part.begin);
}

// All-to-all, gather and scatter: per-peer lanes over p2p ports. Peers are visited in the
// pairwise order (rank+k for sends, rank-k for receives) so that load spreads evenly.
void blockedExchange(const CollDesc& d, ProgramWriter& w) {
  const int n = d.nranks;
  const int me = d.rank;
  const ElemRange part = channelRange(d.count, d.nChannels, d.channel, alignElems(d.elemSize));
  const uint64_t c = d.count;
  const bool a2a = d.coll == Coll::AllToAll;
  const bool gather = d.coll == Coll::Gather;
  // The local block: all-to-all in block me -> out block me; gather at the root: in ->
  // out block root; scatter at the root: in block root -> out.
  if (a2a) p2pLane(w, kStepLocal | kStepOut, -1, part, me * c, me * c, kNoLane, 0, 0);
  if (!a2a && me == d.root) {
    p2pLane(w, kStepLocal | kStepOut, -1, part, gather ? 0 : me * c, gather ? me * c : 0, kNoLane,
            0, 0);
  }
  for (int k = 1; k < n; k++) {
    const int to = (me + k) % n;
    const int from = (me - k + n) % n;
    // Sends: all-to-all to everyone; gather: non-roots to the root; scatter: root to all.
    bool send = a2a || (gather ? (me != d.root && to == d.root) : me == d.root);
    bool recv = a2a || (gather ? me == d.root : (me != d.root && from == d.root));
    if (send) {
      int port = w.port(to, kPortSend, kPortP2p);
      p2pLane(w, kStepLocal | kStepSend, port, part, gather ? 0 : to * c, 0, kNoLane, 0, 0);
    }
    if (recv) {
      int port = w.port(from, kPortRecv, kPortP2p);
      p2pLane(w, kStepRecv | kStepOut, port, part, 0, a2a || gather ? from * c : 0, kNoLane, 0, 0);
    }
  }
}

ncclResult_t checkCommon(size_t elemSize, int nranks, int rank, int nChannels, int channel,
                         size_t sliceElems) {
  if (elemSize == 0 || elemSize > 16)
    return fail(ncclInvalidArgument, kWhere, "elemSize %zu is not 1..16", elemSize);
  if (nranks < 1) return fail(ncclInvalidArgument, kWhere, "nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, kWhere, "rank %d not in 0..%d", rank, nranks - 1);
  if (nChannels < 1 || channel < 0 || channel >= nChannels)
    return fail(ncclInvalidArgument, kWhere, "channel %d of nChannels %d", channel, nChannels);
  if (sliceElems == 0 || sliceElems * elemSize > UINT32_MAX)
    return fail(ncclInvalidArgument, kWhere, "sliceElems %zu must be 1..2^32/elemSize", sliceElems);
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

bool collReduces(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
}

PortKind collPortKind(Coll coll) {
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

ElemRange channelRange(uint64_t count, int nChannels, int channel, uint64_t align) {
  uint64_t per = roundUp(divUp(count, (uint64_t)nChannels), align);
  uint64_t begin = std::min<uint64_t>(count, per * channel);
  return ElemRange{begin, std::min<uint64_t>(count - begin, per)};
}

uint64_t evenChunk(uint64_t total, uint64_t parts, uint64_t maxChunk, uint64_t align,
                   uint64_t* nLoops) {
  if (total == 0) {
    *nLoops = 0;
    return std::max<uint64_t>(1, std::min(maxChunk, align));
  }
  *nLoops = divUp(total, parts * maxChunk);
  uint64_t chunk = divUp(total, parts * *nLoops);
  return std::min(roundUp(chunk, align), maxChunk);
}

ncclResult_t buildProgram(const CollDesc& in, Program* out) {
  RINGCC_CHECK(
      checkCommon(in.elemSize, in.nranks, in.rank, in.nChannels, in.channel, in.sliceElems));
  CollDesc d = in;
  if (d.chunkElems == 0) d.chunkElems = d.sliceElems;
  const bool rooted = d.coll == Coll::Broadcast || d.coll == Coll::Reduce ||
                      d.coll == Coll::Gather || d.coll == Coll::Scatter || d.coll == Coll::Send ||
                      d.coll == Coll::Recv;
  if (rooted && (d.root < 0 || d.root >= d.nranks))
    return fail(ncclInvalidArgument, kWhere, "%s %s %d not in 0..%d", collName(d.coll),
                d.coll == Coll::Send || d.coll == Coll::Recv ? "peer" : "root", d.root,
                d.nranks - 1);
  if (d.coll == Coll::Send || d.coll == Coll::Recv) {
    P2pDesc p;
    p.ops.push_back(P2pOp{d.coll == Coll::Send, d.root, d.count, 0});
    p.elemSize = d.elemSize;
    p.nranks = d.nranks;
    p.rank = d.rank;
    p.nChannels = d.nChannels;
    p.channel = d.channel;
    p.sliceElems = d.sliceElems;
    if (d.root == d.rank)
      return fail(ncclInvalidArgument, kWhere, "%s to self needs the matching op in one group",
                  collName(d.coll));
    return buildP2p(p, out);
  }
  ProgramWriter w(out, d.elemSize, d.sliceElems);
  if (d.coll == Coll::AllToAll || d.coll == Coll::Gather || d.coll == Coll::Scatter) {
    blockedExchange(d, w);
    return w.finish(collName(d.coll));
  }
  std::vector<int> storage;
  RingInfo r;
  RINGCC_CHECK(ringInfo(d, &storage, &r));
  const ElemRange ch = channelRange(d.count, d.nChannels, d.channel, alignElems(d.elemSize));
  switch (d.coll) {
    case Coll::AllReduce:
      ringAllReduce(d, r, ch, w);
      break;
    case Coll::ReduceScatter:
      ringReduceScatter(d, r, ch, w);
      break;
    case Coll::AllGather:
      ringAllGather(d, r, ch, w);
      break;
    case Coll::Broadcast:
      ringChain(d, r, ch, false, w);
      break;
    case Coll::Reduce:
      ringChain(d, r, ch, true, w);
      break;
    default:
      return fail(ncclInvalidArgument, kWhere, "unknown collective %d", (int)d.coll);
  }
  return w.finish(collName(d.coll));
}

ncclResult_t buildP2p(const P2pDesc& d, Program* out) {
  RINGCC_CHECK(checkCommon(d.elemSize, d.nranks, d.rank, d.nChannels, d.channel, d.sliceElems));
  ProgramWriter w(out, d.elemSize, d.sliceElems);
  const uint64_t align = alignElems(d.elemSize);
  std::vector<const P2pOp*> selfSends, selfRecvs;
  // Last lane on each port, to chain several ops to one peer and direction.
  std::vector<int> lastOnPort(kMaxPorts, kNoLane);
  for (const P2pOp& op : d.ops) {
    if (op.peer < 0 || op.peer >= d.nranks)
      return fail(ncclInvalidArgument, kWhere, "p2p peer %d not in 0..%d", op.peer, d.nranks - 1);
    if (op.buffer < 0 || op.buffer >= kMaxBuffers)
      return fail(ncclInvalidArgument, kWhere, "p2p buffer index %d not in 0..%d", op.buffer,
                  kMaxBuffers - 1);
    if (op.peer == d.rank) {
      (op.send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    const ElemRange part = channelRange(op.count, d.nChannels, d.channel, align);
    int port = w.port(op.peer, op.send ? kPortSend : kPortRecv, kPortP2p);
    if (port < 0) break;
    int lane = w.beginLane(1, part.count, 0, 0, 0, lastOnPort[port], op.buffer, op.buffer);
    if (lane < 0) break;
    w.step(op.send ? kStepLocal | kStepSend : kStepRecv | kStepOut, port, port, 0, part.count,
           part.begin, part.begin);
    lastOnPort[port] = lane;
  }
  if (selfSends.size() != selfRecvs.size())
    return fail(ncclInvalidArgument, kWhere, "rank %d posted %zu sends to self but %zu receives",
                d.rank, selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); i++) {
    if (selfSends[i]->count != selfRecvs[i]->count)
      return fail(ncclInvalidArgument, kWhere,
                  "send to self of %zu elements meets a receive of %zu", selfSends[i]->count,
                  selfRecvs[i]->count);
    const ElemRange part = channelRange(selfSends[i]->count, d.nChannels, d.channel, align);
    p2pLane(w, kStepLocal | kStepOut, -1, part, 0, 0, kNoLane, selfSends[i]->buffer,
            selfRecvs[i]->buffer);
  }
  return w.finish("grouped send/recv");
}

}  // namespace ringcc
