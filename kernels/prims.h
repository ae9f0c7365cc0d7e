// The one interpreter of Programs (device-clean): ProgramRunner runs one rank's Program on one
// channel against one ConnectorView per port, with the run-time arguments of one call
// (counts, buffers, datatype, op, protocol, slice and chunk sizes).
//
// A slice moves in three phases, so that N workers can share the middle one (the threads of
// a CUDA block; on the host, one thread, or several for large slices):
//
//   acquire(&slice)       one worker: find a lane whose next slice can move now (its receive
//                         slot is filled, its send slot free) and describe it;
//   reduceCopy(slice, w, N)   every worker w of N: its share of the slice's elements;
//   publish(slice)        one worker, after all shares are done: hand the slots on (tail,
//                         head, doorbell) and advance the lane.
//
// advance() chains the three for a single worker. Nothing here waits: acquire says "blocked
// on this counter at this value", and the caller chooses how to wait. Loads and stores of
// counters go through a Sync policy supplied by the executor (the waiting and waking rules
// live with it, not here):
//
//   struct Sync {
//     uint32_t load(const uint32_t* word);        // acquire load of a counter
//     void publish(FifoCounter* c, uint32_t v);   // release store of a counter, then wake
//                                                 // whoever sleeps on it (if anyone can)
//   };
//
// The host's policy (src/exec/host_sync.h) stores with seq_cst and makes a futex wake when
// c->waiters is non-zero; a sleeper increments `waiters` with a seq_cst RMW before it
// re-checks the counter, so no wake-up is lost. The device's (kernels/cuda/device_sync.h)
// loads relaxed, fences once when a slice can move (acquired()), fences before a Simple or
// Direct publish, at GPU scope where the connection stays on one GPU, and never wakes: host
// sleepers of GPU connections nap with a timeout.
//
// Protocols, per call, each in a file of its own (the runner only dispatches):
//   Simple  kernels/prims_simple.h: elements in the slots, size and signature in meta[slot]
//           beside them; recv ready when tail is past our head; meta[slot].size must equal
//           the slice (mismatched schedules are caught).
//   Direct  kernels/prims_direct.h: as Simple, but a kStepByRef step whose elements lie in a
//           user buffer publishes a SlotRef to them instead of copying them, where the
//           receiver can read references; the sender drains them before it is done.
//           Receivers take both kinds of slot under Simple and Direct.
//   LL      kernels/prims_ll.h: recv ready when every line of the slot carries flag == epoch
//           (slot number + 1); the receiver never reads tail (a blocked lane names it, at the
//           slot number, for the executor to sleep on). Each side still publishes its counter:
//           head frees slots, tail wakes sleepers.
// Every protocol's send side is free when our tail - head < nSlots (head re-read only when
// needed).
//
// Signatures: every slot carries the sender's OpSig (Simple and Direct: control->meta[slot]
// .sig, beside its size, written before tail moves; LL: the slot's first kLlSigLines lines, flagged
// like its data), and a receiver compares it with its own call before it reads the data. Ranks that
// made different calls (another collective, count, datatype, op or root) thus stop at their
// first received slot with kRunErrMismatch, and mismatch() tells the engine both calls.
//
// The runner's counters start from the connection's own counters (tail for a send port, head
// for a receive port: each is written only by this side), read at the first acquire, so
// connections persist across collectives with no extra bookkeeping. Runners sharing a
// connection may all be init()ed up front, but must be advanced in order: the next one's first
// acquire only after the previous one is done. nSlots must be a power of two: counters wrap at
// 2^32 and slot = counter % nSlots must stay continuous across the wrap.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/connector_device.h"
#include "kernels/device_clean.h"
#include "kernels/prims_direct.h"
#include "kernels/prims_ll.h"
#include "kernels/prims_simple.h"
#include "kernels/program.h"
#include "kernels/red_op.h"
#include "kernels/reduce_copy.h"
#include "kernels/run_error.h"
#include "nccl.h"

namespace ringcc {

// What ProgramRunner::reduceCopyBlock needs of the threads that share a slice (a CUDA block;
// the emulated ones of tests/support/simt.h): thread(), threads(), barrier(), and the votes
// barrierAnd(p) / barrierOr(p) (__syncthreads_and / _or: a barrier that also tells every
// thread whether p held on all / on any of them). A Block without the votes must be a single
// thread (the emulated driver's: tests/support/fake_cuda.cc): its vote is its own p.
template <class Block>
RINGCC_INLINE bool blockAll(Block& blk, bool p) {
  if constexpr (requires { blk.barrierAnd(p); }) {
    return blk.barrierAnd(p);
  } else {
    blk.barrier();
    return p;
  }
}

template <class Block>
RINGCC_INLINE bool blockAny(Block& blk, bool p) {
  if constexpr (requires { blk.barrierOr(p); }) {
    return blk.barrierOr(p);
  } else {
    blk.barrier();
    return p;
  }
}

// Optional parts of a Sync policy (the host's have neither; the device's, kernels/cuda/
// device_sync.h, both):
//   void acquired(bool system)   a fence after relaxed counter loads let a slice move: called
//                                once per slice that needed it, never per poll; `system`:
//                                one of the connections is seen from outside this GPU
//   void publish(view, c, v, ordered)   publish with the connection at hand: `ordered` asks
//                                that every earlier store (the slot's data) be seen first,
//                                at the view's scope; LL needs no order (flags ride with data)
template <class Sync>
RINGCC_INLINE void syncAcquired(Sync& sync, bool system) {
  if constexpr (requires { sync.acquired(system); }) sync.acquired(system);
}

template <class Sync>
RINGCC_INLINE void syncPublish(Sync& sync, const ConnectorView& v, FifoCounter* c, uint32_t value,
                               bool ordered) {
  if constexpr (requires { sync.publish(v, c, value, ordered); })
    sync.publish(v, c, value, ordered);
  else
    sync.publish(c, value);
}

// The elements of one LL line (at most 8 bytes) in reduceCopyBlock: the element walk (the
// same arithmetic as every other walk), out of line, so that the unrolled loop over a thread's
// lines carries one call instead of a copy of every datatype and operator per line.
RINGCC_NOINLINE inline void llLineReduceCopy(ncclDataType_t type, const RedOp& op,
                                             const void* local, const void* peer, void* out,
                                             void* send, size_t elems, bool post) {
  reduceCopyStrided(type, op, local, peer, out, send, elems, post, 0, 1);
}

// Data lines of an LL slice each thread polls and keeps at once (ProgramRunner::
// reduceCopyBlock): 512 threads cover a whole slice (1,024 data lines) in one round.
constexpr uint32_t kLlLinesPerThread = 4;

struct RunArgs {
  const Program* program;
  const ConnectorView* ports;  // [program->nPorts], resolved from program->ports
  const void* const* inputs;   // [program->nBuffers]; may alias outputs (in place)
  void* const* outputs;        // [program->nBuffers]
  const uint64_t* counts;      // [program->nCounts]
  ncclDataType_t type;         // element type
  uint32_t elemSize;           // its size in bytes
  RedOp op;                    // for collectives that do not reduce: makeRedOp(ncclSum, ...)
  uint8_t protocol;            // Protocol
  uint32_t nChannels;          // the operation's channel count ...
  uint32_t channel;            // ... and this runner's channel
  uint64_t sliceElems;         // elements per slot of this protocol
  uint64_t chunkElems;         // most elements a ring step moves per loop
  // This call as its peers must have made it too (its count unused: the runner signs each
  // lane's slots with the lane's own count): every slot carries the sender's, every receiver
  // checks it.
  OpSig sig;
  // The channel's ring order (the rank at each position), for Programs whose repeated steps
  // walk ring positions (Program::ringSize > 0; program.h, Repeated steps); null: 0..n-1.
  // Readable by the runner (device memory for a kernel); ignored by other Programs.
  const int* ringRanks;
  uint32_t nRingRanks;
  const PeerMapper* mapper;  // host runners on mapped connections; null elsewhere
  // The block's threads poll a received LL slice's data lines themselves, in
  // reduceCopyBlock (the batch kernel): acquire checks only the signature's lines. 0: acquire
  // checks every line, and reduceCopy unpacks them (the host engine).
  uint8_t llByLines;
};

// One slice between acquire and publish.
struct Slice {
  const void* local;    // input elements, or null
  const void* peer;     // received elements (Simple: the slot; LL: the slot's lines; a
                        // reference: the sender's elements, in its address space), or null
  void* out;            // output elements, or null
  void* send;           // send slot (Simple: data; LL: lines), or null
  const void* sendRef;  // Direct: the elements to publish by reference instead, or null
  void* refSlot;        // ... and the slot that carries the SlotRef
  int32_t peerPid;      // peer is in process peerPid (kRefProcess), or 0
  uint64_t elems;
  uint32_t bytes;
  uint32_t sendEpoch;  // LL flag to write into the sent lines
  uint32_t recvEpoch;  // LL flag the received lines carry once they are there
  uint16_t lane;
  uint8_t recvPort;  // kNoPort if none
  uint8_t sendPort;  // kNoPort if none
  uint8_t post;      // apply the op's post
  uint8_t noPre;     // `local` is a partial result: the op's pre was applied already
  uint8_t llLines;   // LL receive with RunArgs::llByLines: the data lines are still to poll
};

enum RunStatus : uint8_t { kRunReady, kRunBlocked, kRunDone, kRunError };

struct AdvanceResult {
  bool done;            // every lane finished; nothing more to do
  bool progressed;      // this call moved at least one slice or finished a lane
  uint32_t slices;      // slices moved by this call
  RunError error;       // not kRunOk: the program cannot go on; stop
  FifoCounter* waitOn;  // when neither done nor out of budget: a counter a lane waits on ...
  uint32_t waitValue;   // ... it stays blocked while waitOn->value == waitValue
  int nBlocked;         // lanes blocked on counters (> 1: waitOn is one of several)
};

// Why a lane is not moving (for diagnostics of stuck collectives and the simulator).
enum LaneWait : uint8_t {
  kLaneRunning = 0,  // not blocked at the last look
  kLaneWaitRecv,     // receive port empty
  kLaneWaitSend,     // send port full
  kLaneWaitLane,     // waiting for lane `after` to finish
  kLaneDone,
};

struct LaneStatus {
  uint8_t wait;        // LaneWait
  uint8_t port;        // port blocked on (kLaneWaitRecv/Send), else kNoPort
  uint16_t step;       // index into Program::steps of the current step ...
  uint16_t rep;        // ... and its repetition (0..Step::repeat)
  uint64_t loop;       // current loop
  uint64_t stepDone;   // elements of the current step already moved
  uint64_t stepCount;  // elements the current step moves in this loop
  uint32_t counter;    // this side's counter on `port` (next slot number)
};

class ProgramRunner {
 public:
  // Binds a Program to its connections, buffers and counts. kRunOk, or why it cannot run.
  RINGCC_HOST_DEVICE RunError init(const RunArgs& a) {
    args_ = a;
    nDone_ = 0;
    cursor_ = 0;
    started_ = false;
    const Program& g = *a.program;
    if (g.nLanes > kMaxLanes || g.nPorts > kMaxPorts || g.nSteps > kMaxSteps) return kRunErrTables;
    if (a.elemSize == 0 || a.sliceElems == 0 || a.chunkElems == 0 ||
        a.sliceElems * a.elemSize >= kSlotRefBit || a.nChannels == 0 || a.channel >= a.nChannels)
      return kRunErrArgs;
    const uint64_t sliceBytes = a.sliceElems * a.elemSize;
    if (a.protocol == kProtoLL && sliceBytes > kLlMaxSliceBytes) return kRunErrSlotTooSmall;
    bool ring = false;
    for (int i = 0; i < g.nLanes; i++) ring |= (g.lanes[i].flags & kLaneRing) != 0;
    const uint64_t ringSlots = divUp64(a.chunkElems, a.sliceElems) + 1;
    for (int i = 0; i < g.nPorts; i++) {
      const ConnectorView& v = a.ports[i];
      if (!v.control) return kRunErrNoConnection;
      if (v.nSlots == 0 || (v.nSlots & (v.nSlots - 1)) != 0) return kRunErrSlotsNotPow2;
      if (a.protocol == kProtoLL) {
        if (!v.llSlots) return kRunErrNoLl;
        if (llSlotData(v.llSlotBytes) < sliceBytes) return kRunErrSlotTooSmall;
      } else {
        if (!v.slots) return kRunErrNoConnection;
        if (v.slotBytes < sliceBytes) return kRunErrSlotTooSmall;
      }
      if (ring && v.nSlots < ringSlots) return kRunErrTooFewSlots;
    }
    if (g.ringSize > 0 && !ringMatches(a, g)) return kRunErrRing;
    RunShape shape{a.counts, a.elemSize, a.nChannels, a.channel, a.chunkElems};
    for (int i = 0; i < g.nLanes; i++) lanes_[i].geo = laneGeometry(g.lanes[i], shape);
#if !defined(__CUDA_ARCH__)
    fn_ = reduceCopyFunction(a.type);
    if (!fn_) return kRunErrArgs;
#endif
    restart(a.op, a.sig.op);
    return kRunOk;
  }

  // Starts the bound Program over with operator `op` (signed as sigOp), keeping what init() checked
  // and computed (connections, counts, geometry): for an operation repeated on the same connections
  // with the same counts. The buffer tables are read through the pointers init() was given, so the
  // executor may change their contents in between.
  RINGCC_HOST_DEVICE void restart(const RedOp& op, uint8_t sigOp) {
    args_.op = op;
    args_.sig.op = sigOp;
    // Steps that read a partial result (kStepLocalOut) reduce without pre: PreMulSum (and
    // float Avg, which premultiplies) becomes a plain sum there. Chosen once, not per slice.
    opNoPre_ = op;
    if (opNoPre_.kind == RedOpKind::PreMulSum) opNoPre_.kind = RedOpKind::Sum;
    nDone_ = 0;
    cursor_ = 0;
    started_ = false;
    refs_.reset(args_.program->nPorts);
    refCache_.clear();
    for (int i = 0; i < args_.program->nLanes; i++) {
      LaneState& st = lanes_[i];
      st.sig = args_.sig;
      st.sig.count = st.geo.total;
      st.sig.type = (uint8_t)args_.type;
      st.sig.pad = 0;
      st.loop = 0;
      st.step = 0;
      st.rep = 0;
      st.count = 0;  // (a lane without steps has no step to load: settle finishes it)
      if (args_.program->lanes[i].nSteps > 0) loadStep(st, args_.program->lanes[i]);
      st.done = 0;
      st.wait = kLaneRunning;
      st.port = kNoPort;
      st.stepDone = 0;
      st.waitOn = nullptr;
      st.waitValue = 0;
      settle(i);
    }
  }

  // Every lane finished and every reference sent was released.
  RINGCC_HOST_DEVICE bool done() const { return lanesDone() && !refs_.draining(); }

  // Every lane finished; references may still be out (draining).
  RINGCC_HOST_DEVICE bool lanesDone() const { return nDone_ == args_.program->nLanes; }

  // While draining: the send port whose references are still out, else kNoPort.
  RINGCC_HOST_DEVICE uint8_t drainPort() const { return refs_.drainPort(); }

  // Phase 1 (one worker): the next slice that can move now. kRunReady fills *s; kRunBlocked
  // means every open lane was tried and waits (laneStatus tells on what); kRunDone, or
  // kRunError with *error set.
  template <class Sync>
  RINGCC_HOST_DEVICE RunStatus acquire(Sync& sync, Slice* s, RunError* error) {
    const Program& g = *args_.program;
    if (!started_) start(sync);
    if (lanesDone()) {
      if (refs_.draining()) unfenced_ |= kFenceSystem;  // drain() loads the heads
      if (!refs_.drain(sync, args_.ports, g.nPorts)) return kRunBlocked;
      fenceLoads(sync);  // the receivers are done with our buffers: the next job may write them
      return kRunDone;
    }
    for (int tries = 0; tries < g.nLanes; tries++) {
      const int i = cursor_;
      LaneState& st = lanes_[i];
      if (!st.done) {
        const int16_t after = g.lanes[i].after;
        if (after != kNoLane && !lanes_[after].done) {
          st.wait = kLaneWaitLane;
        } else {
          RunStatus r = tryLane(sync, i, s, error);
          if (r == kRunReady) fenceLoads(sync);
          if (r != kRunBlocked) return r;
        }
      }
      cursor_ = cursor_ + 1 == g.nLanes ? 0 : cursor_ + 1;
    }
    return kRunBlocked;
  }

  // Phase 2 (every worker): worker w of n does its share of the slice. On the host and for
  // LL, shares are contiguous runs of whole 16-byte units (relative to the slice's start), so
  // LL lines and vector loads are never split between workers and each worker unpacks and
  // packs its own LL lines. On the device, Simple slices are dealt out in 16-byte packs
  // instead (pack p to worker p % n, reduceCopyPacked), so that neighbouring threads load
  // neighbouring packs; every element is still computed once, by the same arithmetic.
  // Fails only when a reference into another process cannot be read (kRunErrRefRead).
  RINGCC_HOST_DEVICE RunError reduceCopy(const Slice& s, uint32_t w, uint32_t n) {
#if defined(__CUDA_ARCH__)
    if (args_.protocol != kProtoLL) {
      reduceCopyPacked(args_.type, opOf(s.noPre != 0), s.local, s.peer, s.out, s.send,
                       (size_t)s.elems, s.post != 0, w, n);
      return kRunOk;
    }
#endif
    const uint32_t es = args_.elemSize;
    const uint64_t perUnit = es >= 16 ? 1 : 16 / es;
    uint64_t lo = 0, hi = s.elems;
    if (n > 1) {  // one worker (the host's usual case) takes it all, with no divisions
      const uint64_t units = divUp64(s.elems, perUnit);
      lo = units * w / n * perUnit;
      hi = units * (w + 1) / n * perUnit;
      if (hi > s.elems) hi = s.elems;
    }
    if (lo >= hi) return kRunOk;
    const uint64_t n64 = hi - lo;
    const char* local = s.local ? (const char*)s.local + lo * es : nullptr;
    char* out = s.out ? (char*)s.out + lo * es : nullptr;
    void* send = nullptr;
#if !defined(__CUDA_ARCH__)
    if (s.peerPid != 0) {
      const bool post = s.post != 0, noPre = s.noPre != 0;
      return reduceCopyFromProcess(
          s.peerPid, (uint64_t)(uintptr_t)s.peer + lo * es, es, local, out,
          s.send ? (char*)s.send + lo * es : nullptr, n64, post,
          [&](const void* l, const void* p, void* o, void* snd, uint64_t k) {
            reduceCopyRange(l, p, o, snd, k, post, noPre);
          });
    }
#endif
    const void* peer = nullptr;
    if (args_.protocol == kProtoLL) {
      // A slice that sends its input as it is (nothing received, no output, no pre or post:
      // the first step of most schedules) is packed into the lines straight from the input,
      // without the copy through llOut_. llPack loads 4-byte words: the input must be aligned.
      if (s.send && !s.peer && !out && local && !s.post &&
          opOf(s.noPre != 0).kind != RedOpKind::PreMulSum && ((uintptr_t)local & 3) == 0) {
        llPack((LlLine*)s.send, lo * es, n64 * es, local, s.sendEpoch);
        return kRunOk;
      }
      if (s.peer) {
        llUnpack((const LlLine*)s.peer, lo * es, n64 * es, (char*)llIn_ + lo * es);
        peer = (const char*)llIn_ + lo * es;
      }
      if (s.send) send = (char*)llOut_ + lo * es;
    } else {
      if (s.peer) peer = (const char*)s.peer + lo * es;
      if (s.send) send = (char*)s.send + lo * es;
    }
    reduceCopyRange(local, peer, out, send, n64, s.post != 0, s.noPre != 0);
    if (args_.protocol == kProtoLL && s.send)
      llPack((LlLine*)s.send, lo * es, n64 * es, (const char*)llOut_ + lo * es, s.sendEpoch);
    return kRunOk;
  }

  // Phase 2 as the batch kernel runs it: every thread of `blk` calls it with the same slice.
  // Simple and Direct: 16-byte packs dealt out over the threads (reduceCopyPacked, several in
  // flight per thread). LL: line i of the slice is thread i % n's, which polls it with one
  // 16-byte load until both flags carry the slice's epoch (a slice acquired with
  // RunArgs::llByLines: only its signature was checked), keeps what that load returned, and
  // computes the line's elements from it: the block agrees that every line of a round is there
  // (blockAll) before any thread uses one, since a round stops as a whole. While lines are
  // missing thread 0 calls wait(polls); when it returns true the block gives up (false, with
  // *error kRunOk). Same elements, same arithmetic as reduceCopy. False with *error set: a
  // reference into another process could not be read (host only).
  template <class Block, class Wait>
  RINGCC_HOST_DEVICE bool reduceCopyBlock(Block& blk, const Slice& s, Wait&& wait,
                                          RunError* error) {
    *error = kRunOk;
    const uint32_t t = blk.thread(), n = blk.threads();
    if (args_.protocol == kProtoLL) return llBlock(blk, s, wait);
#if !defined(__CUDA_ARCH__)
    if (s.peerPid != 0) {  // another process's memory (host only): read as reduceCopy does
      const RunError e = reduceCopy(s, t, n);
      if (!blockAny(blk, e != kRunOk)) return true;
      *error = kRunErrRefRead;
      return false;
    }
#endif
    reduceCopyPacked(args_.type, opOf(s.noPre != 0), s.local, s.peer, s.out, s.send,
                     (size_t)s.elems, s.post != 0, t, n);
    return true;
  }

  // Phase 3 (one worker, after every share of the slice is done): hands the slots on.
  template <class Sync>
  RINGCC_HOST_DEVICE void publish(Sync& sync, const Slice& s) {
    if (s.sendPort != kNoPort) {
      const ConnectorView& v = args_.ports[s.sendPort];
      uint32_t c = counter_[s.sendPort];
      uint32_t size = s.bytes;
      if (s.sendRef) {
        ((SlotRef*)s.refSlot)->addr = (uint64_t)(uintptr_t)s.sendRef;
        size |= kSlotRefBit;
        refs_.sent(s.sendPort, c);
      }
      if (args_.protocol == kProtoLL)
        llSign(v, c, laneSig(s.lane));
      else
        simpleSign(v, c, size, laneSig(s.lane));
      counter_[s.sendPort] = c + 1;
      // Simple and Direct: the slot's data and meta before tail. LL lines carry their flags.
      syncPublish(sync, v, &v.control->tail, c + 1, args_.protocol != kProtoLL);
      if (v.doorbell) syncPublish(sync, v, v.doorbell, c + 1, true);
    }
    if (s.recvPort != kNoPort) {
      const ConnectorView& v = args_.ports[s.recvPort];
      uint32_t c = counter_[s.recvPort] + 1;
      counter_[s.recvPort] = c;
      // Our reads of the slot before head, which lets the sender overwrite it. LL: every read
      // of its lines returned (their data is used) before the block's barrier that precedes
      // this publish.
      syncPublish(sync, v, &v.control->head, c, args_.protocol != kProtoLL);
      if (v.doorbell) syncPublish(sync, v, v.doorbell, c, true);
    }
    LaneState& st = lanes_[s.lane];
    st.stepDone += s.elems;
    st.wait = kLaneRunning;
    st.port = kNoPort;
    settle(s.lane);
  }

  // The three phases on one worker: every slice that can move now, at most maxSlices.
  template <class Sync>
  RINGCC_HOST_DEVICE AdvanceResult advance(Sync& sync, uint32_t maxSlices = 0xffffffffu) {
    AdvanceResult r = {};
    Slice s;
    const int doneBefore = nDone_;
    RunStatus st = kRunBlocked;
    while (r.slices < maxSlices) {
      st = acquire(sync, &s, &r.error);
      if (st != kRunReady) break;
      r.error = reduceCopy(s, 0, 1);
      if (r.error != kRunOk) return r;
      publish(sync, s);
      r.slices++;
    }
    if (st == kRunError) return r;
    r.done = done();
    r.progressed = r.slices > 0 || nDone_ != doneBefore;
    if (st == kRunBlocked && lanesDone()) {  // draining: waits for a reference's release
      r.waitOn = refs_.waitOn();
      r.waitValue = refs_.waitValue();
      r.nBlocked = 1;
    } else if (st == kRunBlocked) {  // every open lane was tried: the waits are current
      const Program& g = *args_.program;
      for (int i = 0; i < g.nLanes; i++) {
        const LaneState& l = lanes_[i];
        if (l.done || (l.wait != kLaneWaitRecv && l.wait != kLaneWaitSend)) continue;
        if (r.nBlocked++ == 0) {
          r.waitOn = l.waitOn;
          r.waitValue = l.waitValue;
        }
      }
    }
    return r;
  }

  RINGCC_HOST_DEVICE LaneStatus laneStatus(int lane) const {
    const LaneState& st = lanes_[lane];
    const Lane& l = args_.program->lanes[lane];
    LaneStatus s = {};
    s.wait = st.done ? (uint8_t)kLaneDone : st.wait;
    s.port = st.done ? kNoPort : st.port;
    s.step = (uint16_t)(l.firstStep + st.step);
    s.rep = st.rep;
    s.loop = st.loop;
    s.stepDone = st.stepDone;
    s.stepCount = st.done ? 0 : st.count;
    s.counter = s.port != kNoPort ? counter_[s.port] : 0;
    return s;
  }

  // After kRunErrMismatch: the port it came from, the peer's call (*theirs) and ours (*mine).
  RINGCC_HOST_DEVICE uint8_t mismatch(OpSig* theirs, OpSig* mine) const {
    *theirs = mismatchGot_;
    *mine = laneSig(mismatchLane_);
    return mismatchPort_;
  }

  // The geometry lane `lane` runs with (for bounds checks in the simulator).
  RINGCC_HOST_DEVICE const LaneGeometry& laneGeometryOf(int lane) const { return lanes_[lane].geo; }

  const RunArgs& args() const { return args_; }

 private:
  struct LaneState {
    LaneGeometry geo;
    OpSig sig;  // what the lane's slots are signed with
    uint64_t loop;
    uint64_t stepDone;
    FifoCounter* waitOn;
    uint32_t waitValue;
    Step cur;       // the current step, this repetition's (loadStep) ...
    // ... resolved once per step, not per slice: the elements it moves in this loop, and
    // where its local input and its output start (null where the step has none).
    uint64_t count;
    const char* local;
    char* out;
    uint16_t step;  // within the lane's body ...
    uint16_t rep;   // ... and its repetition
    uint8_t done;
    uint8_t wait;  // LaneWait of the last attempt
    uint8_t port;  // port of that wait
  };

  // This side's counters, read only at the first acquire: an executor may bind several
  // Programs on one connection up front and run them one after the other.
  template <class Sync>
  RINGCC_HOST_DEVICE void start(Sync& sync) {
    const Program& g = *args_.program;
    for (int i = 0; i < g.nPorts; i++) {
      FifoControl* c = args_.ports[i].control;
      if (g.ports[i].dir == kPortSend) {
        counter_[i] = sync.load(&c->tail.value);
        seen_[i] = sync.load(&c->head.value);
      } else {
        counter_[i] = sync.load(&c->head.value);
        seen_[i] = counter_[i];  // no filled slot known yet
      }
      markLoad(args_.ports[i]);
    }
    started_ = true;
  }

  // The ring order table matches the Program's ring: the right size, ranks in range, and the
  // hash the builder computed over the order it was built for.
  RINGCC_HOST_DEVICE static bool ringMatches(const RunArgs& a, const Program& g) {
    if (a.ringRanks) {
      if (a.nRingRanks != g.ringSize) return false;
      for (uint32_t i = 0; i < a.nRingRanks; i++)
        if (a.ringRanks[i] < 0 || a.ringRanks[i] >= (int)g.ringSize) return false;
    }
    return ringOrderHash(a.ringRanks, g.ringSize) == g.ringHash;
  }

  // Resolves the lane's current (step, repetition, loop) into st.cur and what follows from it
  // (st.count, st.local, st.out). The buffer tables stay as they are while a run lasts.
  RINGCC_HOST_DEVICE void loadStep(LaneState& st, const Lane& l) const {
    const Program& g = *args_.program;
    st.cur = stepRepetition(g.steps[l.firstStep + st.step], l.chunksPerLoop, st.rep,
                            args_.ringRanks, g.ringSize);
    const Step& s = st.cur;
    const uint32_t es = args_.elemSize;
    st.count = stepCount(st.geo, s, st.loop);
    const uint64_t in = stepInOffset(st.geo, s, st.loop) * es;
    const uint64_t out = stepOutOffset(st.geo, s, st.loop) * es;
    st.local = (s.flags & kStepLocal)      ? (const char*)args_.inputs[l.inBuf] + in
               : (s.flags & kStepLocalOut) ? (const char*)args_.outputs[l.outBuf] + out
                                           : nullptr;
    st.out = (s.flags & kStepOut) ? (char*)args_.outputs[l.outBuf] + out : nullptr;
  }

  // Skips steps that are empty in this loop and finishes the lane at its end.
  RINGCC_HOST_DEVICE void settle(int i) {
    LaneState& st = lanes_[i];
    const Lane& l = args_.program->lanes[i];
    if (st.done) return;
    for (;;) {
      if (st.loop >= st.geo.nLoops || l.nSteps == 0) {
        st.done = 1;
        st.wait = kLaneDone;
        nDone_++;
        return;
      }
      if (st.stepDone < st.count) return;
      st.stepDone = 0;
      if (st.rep < args_.program->steps[l.firstStep + st.step].repeat) {
        st.rep++;
      } else {
        st.rep = 0;
        if (++st.step >= l.nSteps) {
          st.step = 0;
          // The lane's last loop ended: finish above, without resolving a step never run.
          if (++st.loop >= st.geo.nLoops) continue;
        }
      }
      loadStep(st, l);
    }
  }

  template <class Sync>
  RINGCC_HOST_DEVICE RunStatus tryLane(Sync& sync, int i, Slice* out, RunError* error) {
    LaneState& st = lanes_[i];
    const Step& s = st.cur;
    uint64_t elems = st.count - st.stepDone;
    if (elems > args_.sliceElems) elems = args_.sliceElems;
    const uint32_t es = args_.elemSize;
    const uint32_t bytes = (uint32_t)(elems * es);
    const bool ll = args_.protocol == kProtoLL;
    uint32_t sendKind = kRefNone;  // the send port's RefKind, read for Direct's references

    Slice& w = *out;
    w.llLines = 0;
    w.peer = nullptr;
    w.send = nullptr;
    w.sendRef = nullptr;
    w.refSlot = nullptr;
    w.peerPid = 0;
    w.recvPort = kNoPort;
    w.sendPort = kNoPort;
    if (s.flags & kStepRecv) {
      const ConnectorView& v = args_.ports[s.recvPort];
      const uint32_t c = counter_[s.recvPort];
      if (ll) {
        // Not there yet: blocked on tail at c, the value it keeps until this slot is
        // published. Tail itself is not read while polling: the sender's store to it (a full
        // barrier on the host) would wait for this poll's copy of its cache line on every
        // message. A tail already past c while the lines stay unready (a mismatched call
        // wrote fewer) is the waiting executor's to notice (src/exec/wait_policy.cc).
        OpSig sig;
        const LlLine* data;
        if (args_.llByLines) {  // the data lines are the block's to poll (reduceCopyBlock)
          if (!llSigReady(v, c, &sig))
            return block(st, kLaneWaitRecv, s.recvPort, &v.control->tail, c);
          data = llSlotLines(v, c) + kLlSigLines;
        } else {
          data = llReceive(v, c, bytes, &sig);
          if (!data) return block(st, kLaneWaitRecv, s.recvPort, &v.control->tail, c);
        }
        if (!checkSig(i, sig, s.recvPort, error)) return kRunError;
        w.peer = data;
        w.recvEpoch = c + 1;
        w.llLines = args_.llByLines;
      } else {
        if (!counterReached(seen_[s.recvPort], c + 1)) markLoad(v);  // simpleFilled loads tail
        if (!simpleFilled(sync, v, c, &seen_[s.recvPort]))
          return block(st, kLaneWaitRecv, s.recvPort, &v.control->tail, seen_[s.recvPort]);
        fenceLoads(sync);  // before the meta and data that tail announced are read
        const SlotMeta& meta = simpleMeta(v, c);
        if (!checkSig(i, meta.sig, s.recvPort, error)) return kRunError;
        const uint32_t size = meta.size;
        if ((size & ~kSlotRefBit) != bytes) {
          *error = kRunErrSliceSize;
          return kRunError;
        }
        char* data = simpleSlot(v, c);
        w.peer = data;
        if (size & kSlotRefBit) {
          *error = takeRef(v, (const SlotRef*)data, args_.mapper, refCache_, &w.peer, &w.peerPid);
          if (*error != kRunOk) return kRunError;
        }
      }
      w.recvPort = s.recvPort;
    }
    if (s.flags & kStepSend) {
      const ConnectorView& v = args_.ports[s.sendPort];
      const uint32_t c = counter_[s.sendPort];
      if (c - seen_[s.sendPort] >= v.nSlots) {
        seen_[s.sendPort] = sync.load(&v.control->head.value);
        // Simple and Direct overwrite the slot with plain stores once head says it is free;
        // LL's volatile line stores follow the load they depend on (as NCCL's LL relies on).
        if (!ll) markLoad(v);
        if (c - seen_[s.sendPort] >= v.nSlots)
          return block(st, kLaneWaitSend, s.sendPort, &v.control->head, seen_[s.sendPort]);
      }
      w.send = ll ? (void*)llSendData(v, c) : (void*)simpleSlot(v, c);
      w.sendEpoch = c + 1;
      w.sendPort = s.sendPort;
      if (args_.protocol == kProtoDirect && (s.flags & kStepByRef)) {
        sendKind = sync.load(&v.control->refKind);
        if (refWorthIt(sendKind, bytes)) w.refSlot = w.send;  // decided below, once the buffers are known
      }
    }
    const uint64_t at = st.stepDone * es;
    w.local = st.local ? st.local + at : nullptr;
    w.noPre = (s.flags & kStepLocalOut) != 0;
    w.out = st.out ? st.out + at : nullptr;
    if (w.refSlot) {
      // By reference: the output this step writes, or the input it sends as it is (no
      // received data, no pre, no post). Anything else is a new value: copy it.
      if (w.out)
        w.sendRef = w.out;
      else if ((s.flags & (kStepLocal | kStepRecv | kStepPost)) == kStepLocal &&
               args_.op.kind != RedOpKind::PreMulSum)
        w.sendRef = w.local;
#if !defined(__CUDA_ARCH__)
      // Mapped references reach only the sender's shareable buffers (ncclMemAlloc); the
      // receiver gets the region with the address, to map it.
      if (w.sendRef && sendKind == kRefMapped &&
          !refCache_.find(args_.mapper, w.sendRef, bytes, &((SlotRef*)w.refSlot)->region))
        w.sendRef = nullptr;
#endif
      if (w.sendRef)
        w.send = nullptr;
      else
        w.refSlot = nullptr;
    }
    w.elems = elems;
    w.bytes = bytes;
    w.lane = (uint16_t)i;
    w.post = (s.flags & kStepPost) != 0;
    return kRunReady;
  }

  // This rank's call, as lane `lane` signs its slots (set once per run by restart()).
  RINGCC_HOST_DEVICE const OpSig& laneSig(int lane) const { return lanes_[lane].sig; }

  // False (and kRunErrMismatch, remembered for mismatch()) unless `got` is this lane's call.
  RINGCC_HOST_DEVICE bool checkSig(int lane, const OpSig& got, uint8_t port, RunError* error) {
    if (sameSig(got, laneSig(lane))) return true;
    mismatchGot_ = got;
    mismatchLane_ = (uint16_t)lane;
    mismatchPort_ = port;
    *error = kRunErrMismatch;
    return false;
  }

  RINGCC_INLINE RunStatus block(LaneState& st, uint8_t wait, uint8_t port, FifoCounter* c,
                                uint32_t seen) {
    st.wait = wait;
    st.port = port;
    st.waitOn = c;
    st.waitValue = seen;
    return kRunBlocked;
  }

  RINGCC_HOST_DEVICE const RedOp& opOf(bool noPre) const { return noPre ? opNoPre_ : args_.op; }

  // Counter loads not yet followed by a fence (kFence* bits): a relaxed load (the device's)
  // orders nothing by itself, so the first slice that moves after such loads fences once, at
  // the widest scope among their connections.
  static constexpr uint8_t kFenceGpu = 1, kFenceSystem = 2;
  RINGCC_INLINE void markLoad(const ConnectorView& v) {
    unfenced_ |= v.oneGpu ? kFenceGpu : kFenceSystem;
  }
  template <class Sync>
  RINGCC_INLINE void fenceLoads(Sync& sync) {
    if (unfenced_ == 0) return;
    syncAcquired(sync, (unfenced_ & kFenceSystem) != 0);
    unfenced_ = 0;
  }

  // reduceCopyBlock's LL slices: rounds of kLlLinesPerThread lines per thread, thread t's
  // lines of a round at t, t + n, ... (neighbouring threads, neighbouring lines). A line's
  // 8 data bytes are whole elements (elemSize divides 8); a short last line has the rest.
  template <class Block, class Wait>
  RINGCC_HOST_DEVICE bool llBlock(Block& blk, const Slice& s, Wait& wait) {
    constexpr uint32_t kU = kLlLinesPerThread;
    const uint32_t t = blk.thread(), n = blk.threads();
    const uint32_t nLines = (s.bytes + kLlLineData - 1) / kLlLineData;
    const LlLine* peer = static_cast<const LlLine*>(s.peer);
    LlLine* send = static_cast<LlLine*>(s.send);
    const char* local = static_cast<const char*>(s.local);
    char* out = static_cast<char*>(s.out);
    const RedOp& op = opOf(s.noPre != 0);
    for (uint32_t round = 0; round < nLines; round += n * kU) {
      Word4 line[kU] = {};
      if (peer) {
        bool have[kU];
        RINGCC_UNROLL
        for (uint32_t u = 0; u < kU; ++u) have[u] = round + u * n + t >= nLines;
        for (unsigned polls = 0;; ++polls) {
          bool mine = true;
          RINGCC_UNROLL
          for (uint32_t u = 0; u < kU; ++u) {
            if (have[u]) continue;
            line[u] = ldVolatile16(&peer[round + u * n + t]);
            have[u] = !s.llLines || llLineReady(line[u], s.recvEpoch);
            mine = mine && have[u];
          }
          if (blockAll(blk, mine)) break;
          if (blockAny(blk, t == 0 && wait(polls))) return false;
        }
      }
      RINGCC_UNROLL
      for (uint32_t u = 0; u < kU; ++u) {
        const uint32_t i = round + u * n + t;
        if (i >= nLines) continue;
        const uint32_t at = i * kLlLineData;
        const uint32_t bytes = s.bytes - at < kLlLineData ? s.bytes - at : kLlLineData;
        // 8-byte aligned: the widest element loads from here as from memory.
        alignas(8) uint32_t in[2] = {line[u].x, line[u].z};
        alignas(8) uint32_t res[2] = {0, 0};
        llLineReduceCopy(args_.type, op, local ? local + at : nullptr, peer ? in : nullptr,
                         out ? out + at : nullptr, send ? res : nullptr, bytes / args_.elemSize,
                         s.post != 0);
        if (send) stVolatile16(&send[i], Word4{res[0], s.sendEpoch, res[1], s.sendEpoch});
      }
    }
    return true;
  }

  // One worker's contiguous share. The device walks it in 16-byte packs (one worker of one:
  // the share is this thread's alone).
  RINGCC_HOST_DEVICE void reduceCopyRange(const void* local, const void* peer, void* out,
                                          void* send, uint64_t n, bool post, bool noPre) {
#if defined(__CUDA_ARCH__)
    reduceCopyPacked(args_.type, opOf(noPre), local, peer, out, send, (size_t)n, post, 0, 1);
#else
    fn_(opOf(noPre), local, peer, out, send, 0, 1, (size_t)n, post);
#endif
  }

  RunArgs args_ = {};
  RedOp opNoPre_ = {};  // args_.op without pre (restart)
#if !defined(__CUDA_ARCH__)
  ReduceCopyFn fn_ = nullptr;  // the datatype's reduce-copy, chosen once per operation
#endif
  int nDone_ = 0;
  int cursor_ = 0;  // the lane acquire tries first: the last one that moved
  bool started_ = false;
  uint8_t unfenced_ = 0;  // kFence* bits: counter loads since the last fence
  OpSig mismatchGot_ = {};  // kRunErrMismatch: the sender's call ...
  uint16_t mismatchLane_ = 0;
  uint8_t mismatchPort_ = kNoPort;  // ... and where it came from
  RefTracker refs_;           // Direct: references sent and not yet released
  MappedRefCache refCache_;  // Direct: the mapper's last answers, for this operation
  uint32_t counter_[kMaxPorts];  // next slot number: tail of a send port, head of a recv port
  uint32_t seen_[kMaxPorts];     // the peer's counter as last read: head (send), tail (recv)
  LaneState lanes_[kMaxLanes];
  // LL staging: a received slice unpacked, a slice to send before it is packed.
  alignas(16) uint64_t llIn_[kLlMaxSliceBytes / 8];
  alignas(16) uint64_t llOut_[kLlMaxSliceBytes / 8];
};

}  // namespace ringcc
