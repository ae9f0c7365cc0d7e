// A Program: one rank's part of one collective on one channel, as plain data (device-clean),
// free of the message: it holds no count, no buffer, no datatype and no protocol.
//
// Builders (src/sched/builders.h) make Programs; the planner (src/plan) pairs them with the
// run-time arguments of one call (counts, buffers, datatype, op, protocol, slice and chunk
// sizes); one interpreter (kernels/prims.h) runs them, on host threads and in CUDA kernels
// alike; the simulator (tests/support/simulator.h) runs every rank's planned jobs together
// and checks them. A Program never holds pointers: buffers, counts and connections are named
// by small indices that the executor resolves. So one Program serves every message size of
// its collective, and a cache (src/plan/plan_cache.h) keeps it for the communicator's life.
//
//   Program
//   ├── ports[nPorts]   port i = (peer rank, send|recv, kind); the executor hands the runner
//   │                   one ConnectorView per port (kernels/connector_device.h)
//   ├── lanes[nLanes]   independent sequences; lane = body of steps run once per loop
//   └── steps[nSteps]   all lanes' bodies, lane i owns steps[firstStep, firstStep + nSteps);
//                       a step may run 1 + repeat times in a row (see Repeated steps below)
//
// Geometry, at run time (laneGeometry below, the one place this arithmetic lives). A lane
// moves its channel's part of counts[lane.count] elements:
//
//   total = counts[lane.count]            NCCL's count: the size of one block
//   part  = channelRange(total, nChannels, channel)     [begin, begin + extent)
//   chunk = evenChunk(extent, chunksPerLoop, chunkElems) k elements, nLoops loops
//             (a whole lane, kLaneWhole, is one chunk of the whole part: chunk = extent)
//
//   loop l:  |<-------------- chunksPerLoop * k --------------->|
//            | chunk 0 | chunk 1 | ...                          |   (ring all-reduce: one
//                                                                    chunk per ring position)
//
// Step s in loop l moves elements [pos, pos + k) of the part, clipped to the extent, with
//   pos       = l * chunksPerLoop * k + s.chunk * k
//   input at  s.inBlock  * total + begin + pos    (kStepLocal)
//   output at s.outBlock * total + begin + pos    (kStepOut)
// Sender and receiver of a chunk evaluate this on identical inputs (the same counts, channel
// count and chunk size on every rank), so they agree on every slice, including empty ones (a
// step clipped to 0 elements moves no slot on either side).
//
// A Step moves its elements through one reduce-copy:
//   v = op(pre(input) if kLocal | output if kLocalOut, slot from recvPort if kRecv),
//   post(v) if kPost, written to output if kOut and into a slot of sendPort if kSend.
// The runner cuts every step into slices of at most sliceElems (one FIFO slot each), so a
// chunk larger than a slot streams through the ring slot by slot (pipelining).
//
// Lanes. The runner advances any lane that can make progress, so a rank that sends to and
// receives from many peers (one lane per peer and direction) never deadlocks on a full FIFO.
// Lanes that share a port must be ordered: a lane starts only after lane `after` finished.
//
// Repeated steps. A ring's middle steps are one step kind over every chunk in turn: the
// all-reduce's "recv-reduce-send chunk ringOrigin(pos, hops)" for hops = 2..n-1. Written out
// that is O(n) steps; NCCL's kernels run them as a loop. A step with `repeat` = r runs r + 1
// times in a row (repetitions j = 0..r), and its `walk` flags say which indices move one ring
// position back per repetition, the way a chunk travels one hop forward:
//
//   kWalkChunk  chunk    of repetition j = (chunk - j) mod lane.chunksPerLoop
//   kWalkIn     inBlock  holds a ring position; repetition j reads block ringRank((inBlock - j)
//               mod ringSize), ringRank(p) = the rank at position p of the Program's ring
//   kWalkOut    outBlock likewise
//
// stepRepetition() below is the one place this is resolved into a plain step (walk 0, repeat
// 0), which the geometry then places as usual; runner, bounds checks and builders all use it.
// The ring order itself (up to 65,535 ranks) is not in the Program: it is a run-time table
// (RunArgs::ringRanks, the channel's ring, null for 0..n-1), and the Program keeps its size and
// a hash (ringSize, ringHash) so that a runner given another order refuses to start. Builders
// write ring bodies out step by step while they fit kMaxSteps (the form every Program had
// before), and compact beyond: a ring collective then takes 3 (all-gather, reduce-scatter) or
// 5 (all-reduce) steps at any rank count.
//
// Sizes are bounded by the constants below so a Program is one flat, copyable struct (about
// 8 KB); builders fail cleanly when a collective does not fit.
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"

namespace ringcc {

constexpr int kMaxSteps = 256;  // ring bodies written out while they fit, repeated beyond
constexpr int kMaxLanes = 256;  // all-to-all needs 2(n-1)+1: up to 128 ranks
constexpr int kMaxPorts = 255;  // all-to-all needs 2(n-1); index 255 is kNoPort
constexpr int kMaxBuffers = 256;
constexpr int kMaxCounts = 256;  // grouped send/recv: one count per operation

// Step flags.
enum StepFlags : uint8_t {
  kStepRecv = 1 << 0,      // read a slot from recvPort
  kStepLocal = 1 << 1,     // read the local input (the op's pre applies here only)
  kStepOut = 1 << 2,       // write the output buffer
  kStepSend = 1 << 3,      // write a slot of sendPort
  kStepPost = 1 << 4,      // apply the op's post (avg divide) to the result
  kStepLocalOut = 1 << 5,  // read the local source from the output buffer at the output offset:
                           // a partial result this rank made earlier, so no pre is applied
  kStepByRef = 1 << 6,     // what this step sends may go by reference (Direct protocol): the
                           // elements stay in this rank's buffer, unchanged, until the receiver
                           // has read them (the schedule's data flow guarantees it), so the
                           // receiver may read them there instead of from a copy
};

// Step walk flags: the indices that move one ring position back per repetition (see Repeated
// steps above). 0 for a step that is not repeated or repeats identically.
enum StepWalk : uint8_t {
  kWalkChunk = 1 << 0,  // chunk, modulo the lane's chunksPerLoop
  kWalkIn = 1 << 1,     // inBlock is a ring position, mapped to its rank
  kWalkOut = 1 << 2,    // outBlock is a ring position, mapped to its rank
};

enum PortDir : uint8_t { kPortRecv = 0, kPortSend = 1 };

// Which connection set a port lives in; the executor may keep ring and p2p connections apart.
enum PortKind : uint8_t { kPortRing = 0, kPortP2p = 1 };

constexpr uint8_t kNoPort = 0xff;
static_assert(kMaxPorts <= kNoPort, "a port index must never equal kNoPort");
constexpr int16_t kNoLane = -1;

// Lane flags.
enum LaneFlags : uint8_t {
  kLaneWhole = 1 << 0,  // the lane's part is one chunk, one loop (point-to-point lanes)
  kLaneRing = 1 << 1,   // a ring lane: a step pushes a whole chunk before the rank receives
                        // again, so its ports need room for a chunk plus one slot
};

struct Port {
  int32_t peer;  // the rank at the other end
  uint8_t dir;   // PortDir: this rank sends into it or receives from it
  uint8_t kind;  // PortKind
  uint8_t pad[2];
};

struct Step {
  uint8_t flags;      // StepFlags
  uint8_t recvPort;   // port index when kStepRecv, else kNoPort
  uint8_t sendPort;   // port index when kStepSend, else kNoPort
  uint8_t walk;       // StepWalk: which indices advance per repetition
  uint16_t chunk;     // which chunk of the loop (see Geometry above)
  uint16_t inBlock;   // input block (kStepLocal); a ring position under kWalkIn
  uint16_t outBlock;  // output block (kStepOut); a ring position under kWalkOut
  uint16_t repeat;    // the step runs 1 + repeat times in a row
};

struct Lane {
  uint16_t firstStep;
  uint16_t nSteps;
  int16_t after;           // lane that must finish before this one starts, or kNoLane
  uint8_t inBuf;           // index into the runner's input pointers
  uint8_t outBuf;          // index into the runner's output pointers
  uint8_t count;           // index into the runner's counts
  uint8_t flags;           // LaneFlags
  uint16_t chunksPerLoop;  // chunks of one loop (ring all-reduce: nranks)
};

struct Program {
  uint16_t nSteps, nLanes, nPorts, nBuffers, nCounts;
  uint16_t ringSize;  // ranks of the ring that kWalkIn/kWalkOut steps walk; 0 if none does
  uint32_t ringHash;  // ringOrderHash() of that ring's order (the runner checks its table)
  Port ports[kMaxPorts];
  Lane lanes[kMaxLanes];
  Step steps[kMaxSteps];
};

// The format's size is part of its contract: a Program is copied per channel and uploaded to
// GPU memory once, so rank counts must not grow it (repeated steps, not longer tables).
static_assert(sizeof(Step) == 12, "Step is 12 bytes");
static_assert(sizeof(Program) <= 8256, "a Program stays about 8 KB");

// FNV-1a over a ring order (the rank at each position), so that a runner can tell that the
// table it was given is the order its Program was built for. `ranks` null: 0..n-1.
RINGCC_INLINE uint32_t ringOrderHash(const int* ranks, uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = ranks ? (uint32_t)ranks[i] : i;
    for (int b = 0; b < 4; b++) h = (h ^ ((r >> (8 * b)) & 0xffu)) * 16777619u;
  }
  return h;
}

// (base - j) mod m, for base < m.
RINGCC_INLINE uint32_t walkBack(uint32_t base, uint32_t j, uint32_t m) {
  const uint32_t k = j % m;
  return base >= k ? base - k : base + m - k;
}

// Step `s` of a lane with `chunksPerLoop` chunks as it runs in repetition `rep` (0..s.repeat):
// a plain step (walk and repeat 0) with its indices resolved. `ring` is the rank at each of
// the ringSize positions (null: 0..ringSize-1). The one place repeated steps are expanded.
RINGCC_INLINE Step stepRepetition(const Step& s, uint32_t chunksPerLoop, uint32_t rep,
                                  const int* ring, uint32_t ringSize) {
  Step r = s;
  r.walk = 0;
  r.repeat = 0;
  if (s.walk & kWalkChunk)
    r.chunk = (uint16_t)walkBack(s.chunk, rep, chunksPerLoop > 0 ? chunksPerLoop : 1);
  if (ringSize > 0) {
    if (s.walk & kWalkIn) {
      const uint32_t p = walkBack(s.inBlock, rep, ringSize);
      r.inBlock = (uint16_t)(ring ? ring[p] : (int)p);
    }
    if (s.walk & kWalkOut) {
      const uint32_t p = walkBack(s.outBlock, rep, ringSize);
      r.outBlock = (uint16_t)(ring ? ring[p] : (int)p);
    }
  }
  return r;
}

// ---- geometry: the one place where counts become element ranges ----------------------------

struct ElemRange {
  uint64_t begin;
  uint64_t count;
};

RINGCC_INLINE uint64_t divUp64(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
RINGCC_INLINE uint64_t roundUp64(uint64_t a, uint64_t b) { return divUp64(a, b) * b; }

// Elements a channel's part starts on: 16 bytes, so that parts stay vector-aligned.
RINGCC_INLINE uint64_t alignElems(uint32_t elemSize) { return elemSize >= 16 ? 1 : 16 / elemSize; }

// Channel `channel`'s contiguous part of `count` elements, parts rounded up to `align`.
RINGCC_INLINE ElemRange channelRange(uint64_t count, int nChannels, int channel, uint64_t align) {
  uint64_t per = roundUp64(divUp64(count, (uint64_t)nChannels), align);
  uint64_t begin = per * (uint64_t)channel < count ? per * (uint64_t)channel : count;
  uint64_t rest = count - begin;
  return ElemRange{begin, rest < per ? rest : per};
}

// Even chunking of `total` elements into `parts` chunks per loop, chunks at most `maxChunk`
// (and aligned to `align` where that keeps them under maxChunk). Returns the chunk size and
// sets *nLoops; parts * nLoops * chunk >= total.
RINGCC_INLINE uint64_t evenChunk(uint64_t total, uint64_t parts, uint64_t maxChunk, uint64_t align,
                                 uint64_t* nLoops) {
  if (total == 0) {
    *nLoops = 0;
    uint64_t c = maxChunk < align ? maxChunk : align;
    return c > 0 ? c : 1;
  }
  *nLoops = divUp64(total, parts * maxChunk);
  uint64_t chunk = roundUp64(divUp64(total, parts * *nLoops), align);
  return chunk < maxChunk ? chunk : maxChunk;
}

// What the runner needs, besides the Program, to place a lane's steps.
struct RunShape {
  const uint64_t* counts;  // [program.nCounts]
  uint32_t elemSize;       // bytes per element
  uint32_t nChannels;      // channels the operation is split over ...
  uint32_t channel;        // ... and this one
  uint64_t chunkElems;     // most elements a ring step moves per loop (>= 1)
};

// A lane's geometry for one run.
struct LaneGeometry {
  uint64_t total;   // counts[lane.count]: the block size
  uint64_t begin;   // this channel's part of a block ...
  uint64_t extent;  // ... and its length
  uint64_t chunk;   // elements per chunk (k)
  uint64_t stride;  // chunksPerLoop * k: how far a loop moves
  uint64_t nLoops;
};

RINGCC_INLINE LaneGeometry laneGeometry(const Lane& lane, const RunShape& shape) {
  LaneGeometry g;
  g.total = shape.counts[lane.count];
  ElemRange part =
      channelRange(g.total, (int)shape.nChannels, (int)shape.channel, alignElems(shape.elemSize));
  g.begin = part.begin;
  g.extent = part.count;
  if (lane.flags & kLaneWhole) {
    g.chunk = g.extent > 0 ? g.extent : 1;
    g.nLoops = g.extent > 0 ? 1 : 0;
  } else {
    uint64_t parts = lane.chunksPerLoop > 0 ? lane.chunksPerLoop : 1;
    g.chunk = evenChunk(g.extent, parts, shape.chunkElems, alignElems(shape.elemSize), &g.nLoops);
  }
  g.stride = g.chunk * (lane.chunksPerLoop > 0 ? lane.chunksPerLoop : 1);
  return g;
}

// Where step `s` starts in loop `loop` (relative to the part) and how many elements it moves,
// after clipping to the part. The one clamping rule; sender and receiver of a chunk evaluate
// it on identical inputs.
RINGCC_INLINE uint64_t stepPos(const LaneGeometry& g, const Step& s, uint64_t loop) {
  return loop * g.stride + (uint64_t)s.chunk * g.chunk;
}

RINGCC_INLINE uint64_t stepCount(const LaneGeometry& g, const Step& s, uint64_t loop) {
  uint64_t start = stepPos(g, s, loop);
  if (start >= g.extent) return 0;
  uint64_t room = g.extent - start;
  return g.chunk < room ? g.chunk : room;
}

RINGCC_INLINE uint64_t stepInOffset(const LaneGeometry& g, const Step& s, uint64_t loop) {
  return (uint64_t)s.inBlock * g.total + g.begin + stepPos(g, s, loop);
}

RINGCC_INLINE uint64_t stepOutOffset(const LaneGeometry& g, const Step& s, uint64_t loop) {
  return (uint64_t)s.outBlock * g.total + g.begin + stepPos(g, s, loop);
}

// Checks a Program's internal consistency: indices in range, port directions matching the
// steps that use them, every step with a source and a destination, `after` pointing
// backwards, and lanes sharing a port ordered by `after`. Returns nullptr if fine, else a
// static description of the first problem.
RINGCC_HOST_DEVICE inline const char* checkProgram(const Program& p) {
  if (p.nSteps > kMaxSteps || p.nLanes > kMaxLanes || p.nPorts > kMaxPorts ||
      p.nBuffers > kMaxBuffers || p.nCounts > kMaxCounts)
    return "table sizes exceed their bounds";
  for (int i = 0; i < p.nLanes; i++) {
    const Lane& l = p.lanes[i];
    if ((int)l.firstStep + l.nSteps > p.nSteps) return "lane steps out of range";
    if (l.after != kNoLane && (l.after < 0 || l.after >= i)) return "lane.after must be earlier";
    if (l.inBuf >= p.nBuffers || l.outBuf >= p.nBuffers) return "lane buffer out of range";
    if (l.count >= p.nCounts) return "lane count out of range";
    for (int k = l.firstStep; k < l.firstStep + l.nSteps; k++) {
      const Step& s = p.steps[k];
      if (!(s.flags & (kStepRecv | kStepLocal | kStepLocalOut))) return "step has no source";
      if ((s.flags & kStepLocal) && (s.flags & kStepLocalOut))
        return "step reads the input and the output as its local source";
      if (!(s.flags & (kStepOut | kStepSend))) return "step has no destination";
      if (s.flags & kStepRecv) {
        if (s.recvPort >= p.nPorts || p.ports[s.recvPort].dir != kPortRecv)
          return "step receives from a port that is not a receive port";
      }
      if (s.flags & kStepSend) {
        if (s.sendPort >= p.nPorts || p.ports[s.sendPort].dir != kPortSend)
          return "step sends to a port that is not a send port";
      }
      if (s.walk & ~(kWalkChunk | kWalkIn | kWalkOut)) return "step has unknown walk flags";
      if ((s.walk & kWalkChunk) && s.chunk >= l.chunksPerLoop)
        return "walking step's chunk is not below the lane's chunksPerLoop";
      if ((s.walk & (kWalkIn | kWalkOut)) && p.ringSize == 0)
        return "step walks ring positions but the Program has no ring";
      if (((s.walk & kWalkIn) && s.inBlock >= p.ringSize) ||
          ((s.walk & kWalkOut) && s.outBlock >= p.ringSize))
        return "walking step's ring position is not below ringSize";
    }
  }
  // Two lanes touching one port must be ordered, else their slots would interleave.
  for (int b = 0; b < p.nLanes; b++) {
    for (int a = 0; a < b; a++) {
      bool shared = false;
      const Lane& la = p.lanes[a];
      const Lane& lb = p.lanes[b];
      for (int i = la.firstStep; i < la.firstStep + la.nSteps && !shared; i++) {
        for (int j = lb.firstStep; j < lb.firstStep + lb.nSteps && !shared; j++) {
          const Step& x = p.steps[i];
          const Step& y = p.steps[j];
          if ((x.flags & kStepRecv) && (y.flags & kStepRecv) && x.recvPort == y.recvPort)
            shared = true;
          if ((x.flags & kStepSend) && (y.flags & kStepSend) && x.sendPort == y.sendPort)
            shared = true;
        }
      }
      if (!shared) continue;
      int k = b;
      while (k != kNoLane && k > a) k = p.lanes[k].after;
      if (k != a) return "lanes sharing a port are not ordered by 'after'";
    }
  }
  return nullptr;
}

}  // namespace ringcc
