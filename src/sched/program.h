// A Program: one rank's part of one collective on one channel, as plain data (device-clean).
//
// Builders (src/sched/builders.h) make Programs; one interpreter (kernels/prims.h) runs them,
// on host threads and in CUDA kernels alike; the simulator (src/sched/simulator.h) runs every
// rank's Programs together and checks them. A Program never holds pointers: buffers and
// connections are named by small indices that the executor resolves.
//
//   Program
//   ├── ports[nPorts]   port i = (peer rank, send|recv, kind); the executor hands the runner
//   │                   one ConnectorView per port (transports/connector_device.h)
//   ├── lanes[nLanes]   independent sequences; lane = body of steps run nLoops times, each
//   │                   loop shifting positions and offsets by the lane's strides
//   └── steps[nSteps]   all lanes' bodies, lane i owns steps[firstStep, firstStep + nSteps)
//
// A Step moves `count` elements through one reduce-copy:
//   v = op(pre(input[in..]) if kLocal, slot from recvPort if kRecv), post(v) if kPost,
//   written to output[out..] if kOut and into a slot of sendPort if kSend.
// The interpreter cuts every step into slices of at most `sliceElems` elements, one FIFO slot
// each, so a chunk larger than a slot streams through the ring slot by slot (pipelining).
//
// Clamping. A step's logical range is [pos, pos + count) in the lane's coordinate space; in
// loop l it is shifted by l * posStride and clipped to [0, extent). Buffer offsets shift by
// the same number of elements the range shifted. Sender and receiver of one chunk use the same
// (pos, count, extent), so they clip identically and agree on every slice, including empty
// ones (a step clipped to 0 elements moves no slot on either side).
//
// Lanes. The runner advances any lane that can make progress, so a rank that sends to and
// receives from many peers (one lane per peer and direction) never deadlocks on a full FIFO.
// Lanes that share a port must be ordered: a lane starts only after lane `after` finished.
//
// Sizes are bounded by the constants below so a Program is one flat, copyable struct (about
// 24 KB); builders fail cleanly when a collective does not fit.
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"

namespace ringcc {

constexpr int kMaxSteps = 256;  // ring all-reduce needs 2n-1: up to 128 ranks
constexpr int kMaxLanes = 256;  // all-to-all needs 2(n-1)+1: up to 128 ranks
constexpr int kMaxPorts = 255;  // all-to-all needs 2(n-1); index 255 is kNoPort
constexpr int kMaxBuffers = 256;

// Step flags.
enum StepFlags : uint8_t {
  kStepRecv = 1 << 0,   // read a slot from recvPort
  kStepLocal = 1 << 1,  // read the local input (the op's pre applies here only)
  kStepOut = 1 << 2,    // write the output buffer
  kStepSend = 1 << 3,   // write a slot of sendPort
  kStepPost = 1 << 4,   // apply the op's post (avg divide) to the result
};

enum PortDir : uint8_t { kPortRecv = 0, kPortSend = 1 };

// Which connection set a port lives in; the executor may keep ring and p2p connections apart.
enum PortKind : uint8_t { kPortRing = 0, kPortP2p = 1 };

constexpr uint8_t kNoPort = 0xff;
static_assert(kMaxPorts <= kNoPort, "a port index must never equal kNoPort");
constexpr int16_t kNoLane = -1;

struct Port {
  int32_t peer;  // the rank at the other end
  uint8_t dir;   // PortDir: this rank sends into it or receives from it
  uint8_t kind;  // PortKind
  uint8_t pad[2];
};

struct Step {
  uint8_t flags;     // StepFlags
  uint8_t recvPort;  // port index when kStepRecv, else kNoPort
  uint8_t sendPort;  // port index when kStepSend, else kNoPort
  uint8_t pad[5];
  uint64_t pos;        // logical start, in elements, in the lane's coordinate space
  uint64_t count;      // elements before clamping to the lane's extent
  uint64_t inOffset;   // element offset into the lane's input buffer (kStepLocal)
  uint64_t outOffset;  // element offset into the lane's output buffer (kStepOut)
};

struct Lane {
  uint16_t firstStep;
  uint16_t nSteps;
  int16_t after;    // lane that must finish before this one starts, or kNoLane
  uint8_t inBuf;    // index into the runner's input pointers
  uint8_t outBuf;   // index into the runner's output pointers
  uint32_t nLoops;  // times the body runs
  uint32_t pad;
  uint64_t extent;     // logical elements; steps are clipped to [0, extent)
  uint64_t posStride;  // per loop, added to every step's pos ...
  uint64_t inStride;   // ... inOffset ...
  uint64_t outStride;  // ... and outOffset
};

struct Program {
  uint32_t elemSize;    // bytes per element
  uint32_t sliceElems;  // elements per slot; every port's slotBytes must hold a slice
  uint32_t minSlots;    // every port's FIFO needs this many slots (a ring step pushes a whole
                        // chunk before it receives; with fewer slots the ring deadlocks)
  uint16_t nSteps, nLanes, nPorts, nBuffers;
  Port ports[kMaxPorts];
  Lane lanes[kMaxLanes];
  Step steps[kMaxSteps];
};

// Elements step `s` of `lane` moves in loop `loop`, after clipping to the lane's extent. The
// one clamping rule; sender and receiver of a chunk evaluate it on identical inputs.
RINGCC_INLINE uint64_t stepCountInLoop(const Lane& lane, const Step& s, uint32_t loop) {
  uint64_t start = s.pos + (uint64_t)loop * lane.posStride;
  if (start >= lane.extent) return 0;
  uint64_t room = lane.extent - start;
  return s.count < room ? s.count : room;
}

RINGCC_INLINE uint64_t stepInOffset(const Lane& lane, const Step& s, uint32_t loop) {
  return s.inOffset + (uint64_t)loop * lane.inStride;
}

RINGCC_INLINE uint64_t stepOutOffset(const Lane& lane, const Step& s, uint32_t loop) {
  return s.outOffset + (uint64_t)loop * lane.outStride;
}

// Checks a Program's internal consistency: indices in range, port directions matching the
// steps that use them, every step with a source and a destination, `after` pointing
// backwards, and lanes sharing a port ordered by `after`. Returns nullptr if fine, else a
// static description of the first problem.
RINGCC_HOST_DEVICE inline const char* checkProgram(const Program& p) {
  if (p.elemSize == 0) return "elemSize is 0";
  if (p.sliceElems == 0) return "sliceElems is 0";
  if (p.minSlots == 0) return "minSlots is 0";
  if (p.nSteps > kMaxSteps || p.nLanes > kMaxLanes || p.nPorts > kMaxPorts ||
      p.nBuffers > kMaxBuffers)
    return "table sizes exceed their bounds";
  for (int i = 0; i < p.nLanes; i++) {
    const Lane& l = p.lanes[i];
    if ((int)l.firstStep + l.nSteps > p.nSteps) return "lane steps out of range";
    if (l.after != kNoLane && (l.after < 0 || l.after >= i)) return "lane.after must be earlier";
    if (l.inBuf >= p.nBuffers || l.outBuf >= p.nBuffers) return "lane buffer out of range";
    for (int k = l.firstStep; k < l.firstStep + l.nSteps; k++) {
      const Step& s = p.steps[k];
      if (!(s.flags & (kStepRecv | kStepLocal))) return "step has no source";
      if (!(s.flags & (kStepOut | kStepSend))) return "step has no destination";
      if (s.flags & kStepRecv) {
        if (s.recvPort >= p.nPorts || p.ports[s.recvPort].dir != kPortRecv)
          return "step receives from a port that is not a receive port";
      }
      if (s.flags & kStepSend) {
        if (s.sendPort >= p.nPorts || p.ports[s.sendPort].dir != kPortSend)
          return "step sends to a port that is not a send port";
      }
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
