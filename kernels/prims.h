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
// re-checks the counter, so no wake-up is lost. A device policy fences (__threadfence_system)
// before its store and never wakes: host sleepers of GPU connections nap with a timeout.
//
// Protocols (kernels/connector_device.h), per call:
//   Simple  recv: ready when tail is past our head, wrap-aware (tail is re-read only when the
//           cached value is used up; it may lag behind our head right after an LL call, see
//           tryLane); meta[slot].size must equal the slice (mismatched schedules are caught).
//           send: free when our tail - head < nSlots (head re-read only when needed).
//   Direct  as Simple, but a kStepByRef step whose elements lie in a user buffer (its output,
//           or its input when it sends the input as it is) publishes a SlotRef to them instead
//           of copying them, where the receiver declared it can read references
//           (FifoControl::refKind). The receiver reads them through the pointer (kRefPointer)
//           or with process_vm_readv (kRefProcess, host only; kRefMinBytes and up), or maps
//           the sender's buffer and reads it in place (kRefMapped, host only; kRefMinBytes and
//           up, only buffers from the sender's ncclMemAlloc: others are copied), or a
//           network proxy sends them from there (kRefNetwork; kRefMinBytes and up), and its
//           head moving past the slot releases them. Before the runner reports done, the
//           sender waits until every reference it sent was released ("drain"), since the
//           caller may reuse its buffers as soon as the operation returns. Receivers take both
//           kinds of slot under Simple and Direct.
//   LL      recv: ready when every line of the slot carries flag == epoch (slot number + 1);
//           the receiver never reads tail (a blocked lane names it, at the slot number, for
//           the executor to sleep on). send: as Simple; lines are written
//           with their flags in one 8-byte store per {data, flag} pair, so a reader that sees
//           the flag sees the data. Each side still publishes its counter: head frees slots,
//           tail wakes sleepers.
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
#include "kernels/program.h"
#include "kernels/red_op.h"
#include "kernels/reduce_copy.h"
#include "nccl.h"
#if !defined(__CUDA_ARCH__)
#include "kernels/peer_read.h"
#endif

namespace ringcc {

// Why a Program cannot run; decoded by runErrorText.
enum RunError : uint8_t {
  kRunOk = 0,
  kRunErrTables,        // program tables exceed their bounds
  kRunErrArgs,          // element size, slice or chunk of 0, or a slice of 2^31 bytes or more
  kRunErrNoConnection,  // a port has no connection
  kRunErrSlotsNotPow2,  // nSlots is not a power of two
  kRunErrSlotTooSmall,  // the protocol's slots are smaller than a slice
  kRunErrTooFewSlots,   // a ring chunk needs more slots than the connection has
  kRunErrNoLl,          // LL asked for, but the connection has no LL memory
  kRunErrSliceSize,     // a received Simple slot's size differs from the slice (mismatched calls)
  kRunErrRefKind,       // a slot holds a reference this side cannot read
  kRunErrRefRead,       // reading a reference from the peer's process failed
  kRunErrMismatch,      // the sender of a slot made another call than this rank (mismatch())
  kRunErrRing,          // the ring order table (RunArgs::ringRanks) is not the Program's
};

RINGCC_HOST_DEVICE inline const char* runErrorText(RunError e) {
  switch (e) {
    case kRunOk:
      return "no error";
    case kRunErrTables:
      return "program tables exceed their bounds";
    case kRunErrArgs:
      return "element, slice or chunk size is 0 or too large";
    case kRunErrNoConnection:
      return "a port has no connection";
    case kRunErrSlotsNotPow2:
      return "connection nSlots is not a power of two";
    case kRunErrSlotTooSmall:
      return "connection slots are smaller than a slice";
    case kRunErrTooFewSlots:
      return "connection has fewer slots than a ring chunk needs";
    case kRunErrNoLl:
      return "the LL protocol was chosen but the connection has no LL memory";
    case kRunErrSliceSize:
      return "received slot size differs from the step's slice (mismatched calls on the ranks)";
    case kRunErrRefKind:
      return "received a reference to the sender's memory that this side cannot read";
    case kRunErrRefRead:
      return "reading the sender's memory (process_vm_readv, or mapping its buffer) failed";
    case kRunErrMismatch:
      return "the ranks made different calls (collective, count, datatype, op or root)";
    case kRunErrRing:
      return "the ring order given to the runner is not the one its Program was built for";
  }
  return "unknown runner error";
}

// LL: data bytes a slot of `llSlotBytes` carries.
RINGCC_INLINE uint32_t llSlotData(uint32_t llSlotBytes) {
  const uint32_t lines = llSlotBytes / kLlLineBytes;
  return lines > kLlSigLines ? (lines - kLlSigLines) * kLlLineData : 0;
}

// Most data bytes of one LL slice. Bounds the runner's LL staging buffers.
constexpr uint32_t kLlMaxSliceBytes = 8192;

// Smallest slice sent by reference to another process: below it, a system call per slice
// costs more than the copy it saves (docs/benchmarks.md). References within one process
// have no such cost and no floor. The same floor for the network (kRefNetwork): a small
// slice's copy costs little, and a reference holds the operation until the proxy's send of it
// has completed.
constexpr uint32_t kRefMinBytes = 16384;

// How a host runner reaches a peer's shareable buffers (kRefMapped): supplied by the executor
// that owns the mappings (the host engine hands in the shm transport's), so that kernels/ names
// no transport. Null where references are never mapped (kernels, the simulator): a Mapped
// reference is then copied by the sender, and refused by a receiver (kRunErrRefKind).
struct PeerMapper {
  // Whether [p, p + bytes) lies in one of this process's shareable buffers; its region if so.
  bool (*findMappable)(const void* p, uint64_t bytes, RefRegion* region);
  // Where the sender `pid`'s region is mapped in this process (mapped on first use); null if
  // it cannot be.
  const char* (*mapPeerRegion)(int pid, const RefRegion& region);
};

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
  // This call as its peers must have made it too (OpSig without the count, which the runner
  // takes from each lane): every slot carries the sender's, every receiver checks it.
  uint8_t sigColl;
  uint8_t sigOp;
  int32_t sigRoot;
  // The channel's ring order (the rank at each position), for Programs whose repeated steps
  // walk ring positions (Program::ringSize > 0; program.h, Repeated steps); null: 0..n-1.
  // Readable by the runner (device memory for a kernel); ignored by other Programs.
  const int* ringRanks;
  uint32_t nRingRanks;
  const PeerMapper* mapper;  // host runners on mapped connections; null elsewhere
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
  uint16_t lane;
  uint8_t recvPort;  // kNoPort if none
  uint8_t sendPort;  // kNoPort if none
  uint8_t post;      // apply the op's post
  uint8_t noPre;     // `local` is a partial result: the op's pre was applied already
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
    restart(a.op, a.sigOp);
    return kRunOk;
  }

  // Starts the bound Program over with operator `op` (signed as sigOp), keeping what init() checked
  // and computed (connections, counts, geometry): for an operation repeated on the same connections
  // with the same counts. The buffer tables are read through the pointers init() was given, so the
  // executor may change their contents in between.
  RINGCC_HOST_DEVICE void restart(const RedOp& op, uint8_t sigOp) {
    args_.op = op;
    args_.sigOp = sigOp;
    // Steps that read a partial result (kStepLocalOut) reduce without pre: PreMulSum (and
    // float Avg, which premultiplies) becomes a plain sum there. Chosen once, not per slice.
    opNoPre_ = op;
    if (opNoPre_.kind == RedOpKind::PreMulSum) opNoPre_.kind = RedOpKind::Sum;
    nDone_ = 0;
    cursor_ = 0;
    started_ = false;
    draining_ = false;
    drainPort_ = kNoPort;
    for (int i = 0; i < args_.program->nPorts; i++) refOut_[i] = 0;
    for (int i = 0; i < args_.program->nLanes; i++) {
      LaneState& st = lanes_[i];
      st.sig.count = st.geo.total;
      st.sig.root = args_.sigRoot;
      st.sig.coll = args_.sigColl;
      st.sig.type = (uint8_t)args_.type;
      st.sig.op = sigOp;
      st.sig.pad = 0;
      st.loop = 0;
      st.step = 0;
      st.rep = 0;
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
  RINGCC_HOST_DEVICE bool done() const { return lanesDone() && !draining_; }

  // Every lane finished; references may still be out (draining).
  RINGCC_HOST_DEVICE bool lanesDone() const { return nDone_ == args_.program->nLanes; }

  // While draining: the send port whose references are still out, else kNoPort.
  RINGCC_HOST_DEVICE uint8_t drainPort() const { return draining_ ? drainPort_ : kNoPort; }

  // Phase 1 (one worker): the next slice that can move now. kRunReady fills *s; kRunBlocked
  // means every open lane was tried and waits (laneStatus tells on what); kRunDone, or
  // kRunError with *error set.
  template <class Sync>
  RINGCC_HOST_DEVICE RunStatus acquire(Sync& sync, Slice* s, RunError* error) {
    const Program& g = *args_.program;
    if (!started_) start(sync);
    if (lanesDone()) return drain(sync) ? kRunDone : kRunBlocked;
    for (int tries = 0; tries < g.nLanes; tries++) {
      const int i = cursor_;
      LaneState& st = lanes_[i];
      if (!st.done) {
        const int16_t after = g.lanes[i].after;
        if (after != kNoLane && !lanes_[after].done) {
          st.wait = kLaneWaitLane;
        } else {
          RunStatus r = tryLane(sync, i, s, error);
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
      send = s.send ? (char*)s.send + lo * es : nullptr;
      return reduceCopyFromProcess(s, (uint64_t)(uintptr_t)s.peer + lo * es, local, out,
                                   (char*)send, n64);
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
        refOut_[s.sendPort] = 1;
        refEnd_[s.sendPort] = c + 1;
        draining_ = true;
      }
      const uint32_t slot = c & (v.nSlots - 1);
      const OpSig& sig = laneSig(s.lane);
      if (args_.protocol == kProtoLL) {
        llPack((LlLine*)(v.llSlots + (size_t)slot * v.llSlotBytes), 0, sizeof(OpSig),
               (const char*)&sig, c + 1);
      } else {
        SlotMeta& meta = v.control->meta[slot];
        meta.size = size;
        meta.sig = sig;
      }
      counter_[s.sendPort] = c + 1;
      sync.publish(&v.control->tail, c + 1);
      if (v.doorbell) sync.publish(v.doorbell, c + 1);
    }
    if (s.recvPort != kNoPort) {
      const ConnectorView& v = args_.ports[s.recvPort];
      uint32_t c = counter_[s.recvPort] + 1;
      counter_[s.recvPort] = c;
      sync.publish(&v.control->head, c);
      if (v.doorbell) sync.publish(v.doorbell, c);
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
      r.waitOn = drainWaitOn_;
      r.waitValue = drainWaitValue_;
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
    s.stepCount = st.done ? 0 : stepCount(st.geo, st.cur, st.loop);
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
    Step cur;       // the current step, this repetition's (loadStep)
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

  // Resolves the lane's current (step, repetition) into st.cur.
  RINGCC_HOST_DEVICE void loadStep(LaneState& st, const Lane& l) const {
    const Program& g = *args_.program;
    st.cur = stepRepetition(g.steps[l.firstStep + st.step], l.chunksPerLoop, st.rep,
                            args_.ringRanks, g.ringSize);
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
      if (st.stepDone < stepCount(st.geo, st.cur, st.loop)) return;
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
    const Program& g = *args_.program;
    const Lane& l = g.lanes[i];
    const Step& s = st.cur;
    const uint64_t n = stepCount(st.geo, s, st.loop);
    uint64_t elems = n - st.stepDone;
    if (elems > args_.sliceElems) elems = args_.sliceElems;
    const uint32_t es = args_.elemSize;
    const uint32_t bytes = (uint32_t)(elems * es);
    const bool ll = args_.protocol == kProtoLL;
    uint32_t sendKind = kRefNone;  // the send port's RefKind, read for Direct's references

    Slice& w = *out;
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
      const uint32_t slot = c & (v.nSlots - 1);
      if (ll) {
        const LlLine* lines = (const LlLine*)(v.llSlots + (size_t)slot * v.llSlotBytes);
        const uint32_t withSig = bytes + (uint32_t)sizeof(OpSig);
        // Not there yet: blocked on tail at c, the value it keeps until this slot is
        // published. Tail itself is not read while polling: the sender's store to it (a full
        // barrier on the host) would wait for this poll's copy of its cache line on every
        // message. A tail already past c while the lines stay unready (a mismatched call
        // wrote fewer) is the waiting executor's to notice (src/exec/wait_policy.cc).
        if (!llReady(lines, withSig, c + 1))
          return block(st, kLaneWaitRecv, s.recvPort, &v.control->tail, c);
        OpSig sig;
        llUnpack(lines, 0, sizeof(OpSig), (char*)&sig);
        if (!checkSig(i, sig, s.recvPort, error)) return kRunError;
        w.peer = lines + kLlSigLines;
      } else {
        // Filled only if tail is past c, not merely different from it: tail may lag behind
        // our head. An LL receive takes a slot by its lines' flags, so a receiver can finish
        // an LL call (head c) before the sender's store of tail c reaches it (a sender
        // preempted between its lines and that store, say); a Simple or Direct call right
        // after on the same connection then reads tail c - 1, and taking "tail != head" for a
        // filled slot read slot c's stale size and signature (a rare mismatch under TSan, or
        // stale data had the old signature been this call's).
        if (!counterReached(seen_[s.recvPort], c + 1)) {
          seen_[s.recvPort] = sync.load(&v.control->tail.value);
          if (!counterReached(seen_[s.recvPort], c + 1))
            return block(st, kLaneWaitRecv, s.recvPort, &v.control->tail, seen_[s.recvPort]);
        }
        const SlotMeta& meta = v.control->meta[slot];
        if (!checkSig(i, meta.sig, s.recvPort, error)) return kRunError;
        const uint32_t size = meta.size;
        if ((size & ~kSlotRefBit) != bytes) {
          *error = kRunErrSliceSize;
          return kRunError;
        }
        char* data = v.slots + (size_t)slot * v.slotBytes;
        w.peer = data;
        if (size & kSlotRefBit) {
          *error = takeRef(v, (const SlotRef*)data, &w);
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
        if (c - seen_[s.sendPort] >= v.nSlots)
          return block(st, kLaneWaitSend, s.sendPort, &v.control->head, seen_[s.sendPort]);
      }
      const uint32_t slot = c & (v.nSlots - 1);
      w.send = ll ? v.llSlots + (size_t)slot * v.llSlotBytes + kLlSigLines * kLlLineBytes
                  : v.slots + (size_t)slot * v.slotBytes;
      w.sendEpoch = c + 1;
      w.sendPort = s.sendPort;
      if (args_.protocol == kProtoDirect && (s.flags & kStepByRef)) {
        sendKind = sync.load(&v.control->refKind);
        if (sendKind == kRefPointer ||
            ((sendKind == kRefProcess || sendKind == kRefNetwork || sendKind == kRefMapped) &&
             bytes >= kRefMinBytes))
          w.refSlot = w.send;  // decided below, once the buffers are known
      }
    }
    const uint64_t at = st.stepDone * es;
    w.local = (s.flags & kStepLocal)
                  ? (const char*)args_.inputs[l.inBuf] + stepInOffset(st.geo, s, st.loop) * es + at
              : (s.flags & kStepLocalOut) ? (const char*)args_.outputs[l.outBuf] +
                                                stepOutOffset(st.geo, s, st.loop) * es + at
                                          : nullptr;
    w.noPre = (s.flags & kStepLocalOut) != 0;
    w.out = (s.flags & kStepOut)
                ? (char*)args_.outputs[l.outBuf] + stepOutOffset(st.geo, s, st.loop) * es + at
                : nullptr;
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
          !(args_.mapper &&
            args_.mapper->findMappable(w.sendRef, bytes, &((SlotRef*)w.refSlot)->region)))
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

  // A received SlotRef: where the sender's elements are, and how to read them.
  RINGCC_HOST_DEVICE RunError takeRef(const ConnectorView& v, const SlotRef* ref, Slice* w) {
    w->peer = (const void*)(uintptr_t)ref->addr;
    const uint32_t kind = v.control->refKind;  // this side's own word
    if (kind == kRefPointer) return kRunOk;
#if !defined(__CUDA_ARCH__)
    if (kind == kRefProcess && v.refPid > 0) {
      w->peerPid = v.refPid;
      return kRunOk;
    }
    if (kind == kRefMapped && v.refPid > 0 && args_.mapper) {
      const char* base = args_.mapper->mapPeerRegion(v.refPid, ref->region);
      if (!base || ref->addr < ref->region.base) return kRunErrRefRead;
      w->peer = base + (ref->addr - ref->region.base);
      return kRunOk;
    }
#endif
    return kRunErrRefKind;
  }

  // True once every reference this runner sent was released (the receiver's head passed it);
  // else remembers the first counter still waited on.
  template <class Sync>
  RINGCC_HOST_DEVICE bool drain(Sync& sync) {
    if (!draining_) return true;
    const Program& g = *args_.program;
    for (int i = 0; i < g.nPorts; i++) {
      if (!refOut_[i]) continue;
      FifoCounter* head = &args_.ports[i].control->head;
      const uint32_t h = sync.load(&head->value);
      if (!counterReached(h, refEnd_[i])) {
        drainPort_ = (uint8_t)i;
        drainWaitOn_ = head;
        drainWaitValue_ = h;
        return false;
      }
      refOut_[i] = 0;
    }
    draining_ = false;
    drainPort_ = kNoPort;
    return true;
  }

#if !defined(__CUDA_ARCH__)
  // A share of a slice whose received elements lie in another process (kRefProcess): a copy
  // reads them straight into the output; anything else stages them through a small buffer
  // that stays in cache, so they cross memory once.
  RunError reduceCopyFromProcess(const Slice& s, uint64_t from, const char* local, char* out,
                                 char* send, uint64_t n) {
    const uint32_t es = args_.elemSize;
    if (!local && !send && out && !s.post)
      return peerRead(s.peerPid, from, out, n * es) ? kRunOk : kRunErrRefRead;
    char* stage = peerReadStage();
    if (!stage) return kRunErrRefRead;
    const uint64_t per = kPeerReadStageBytes / es;
    for (uint64_t at = 0; at < n; at += per) {
      const uint64_t k = n - at < per ? n - at : per;
      if (!peerRead(s.peerPid, from + at * es, stage, k * es)) return kRunErrRefRead;
      reduceCopyRange(local ? local + at * es : nullptr, stage, out ? out + at * es : nullptr,
                      send ? send + at * es : nullptr, k, s.post != 0, s.noPre != 0);
    }
    return kRunOk;
  }
#endif

  RINGCC_INLINE RunStatus block(LaneState& st, uint8_t wait, uint8_t port, FifoCounter* c,
                                uint32_t seen) {
    st.wait = wait;
    st.port = port;
    st.waitOn = c;
    st.waitValue = seen;
    return kRunBlocked;
  }

  RINGCC_HOST_DEVICE const RedOp& opOf(bool noPre) const { return noPre ? opNoPre_ : args_.op; }

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

  // ---- LL lines: 8 data bytes per 16-byte line, a flag beside each 4 ------------------------

  RINGCC_INLINE static uint64_t loadHalf(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
    return *(const volatile uint64_t*)p;
#else
    return __atomic_load_n((const uint64_t*)p, __ATOMIC_RELAXED);
#endif
  }

  RINGCC_INLINE static void storeHalf(uint32_t* p, uint32_t data, uint32_t flag) {
    uint64_t v = (uint64_t)data | ((uint64_t)flag << 32);
#if defined(__CUDA_ARCH__)
    *(volatile uint64_t*)p = v;
#else
    __atomic_store_n((uint64_t*)p, v, __ATOMIC_RELAXED);
#endif
  }

  // Every line holding one of `bytes` data bytes carries `epoch` in both flags.
  RINGCC_HOST_DEVICE static bool llReady(const LlLine* lines, uint32_t bytes, uint32_t epoch) {
    const uint32_t n = (bytes + kLlLineData - 1) / kLlLineData;
    for (uint32_t i = 0; i < n; i++) {
      if ((uint32_t)(loadHalf(&lines[i].data0) >> 32) != epoch) return false;
      if ((uint32_t)(loadHalf(&lines[i].data1) >> 32) != epoch) return false;
    }
    return true;
  }

  // Data bytes [from, from + bytes) of a slot's lines into dst (from is a multiple of 8; dst
  // 4-byte aligned): whole lines as two 4-byte words, a partial last line byte by byte.
  RINGCC_HOST_DEVICE static void llUnpack(const LlLine* lines, uint64_t from, uint64_t bytes,
                                          char* dst) {
    const LlLine* l = &lines[from / kLlLineData];
    uint32_t* d = (uint32_t*)dst;
    const uint64_t whole = bytes / kLlLineData;
    for (uint64_t i = 0; i < whole; i++) {
      d[2 * i] = (uint32_t)loadHalf(&l[i].data0);
      d[2 * i + 1] = (uint32_t)loadHalf(&l[i].data1);
    }
    if (uint64_t rest = bytes - whole * kLlLineData) {
      uint32_t buf[2] = {(uint32_t)loadHalf(&l[whole].data0), (uint32_t)loadHalf(&l[whole].data1)};
      __builtin_memcpy(dst + whole * kLlLineData, buf, rest);
    }
  }

  RINGCC_HOST_DEVICE static void llPack(LlLine* lines, uint64_t from, uint64_t bytes,
                                        const char* src, uint32_t epoch) {
    LlLine* l = &lines[from / kLlLineData];
    const uint32_t* s = (const uint32_t*)src;
    const uint64_t whole = bytes / kLlLineData;
    for (uint64_t i = 0; i < whole; i++) {
      storeHalf(&l[i].data0, s[2 * i], epoch);
      storeHalf(&l[i].data1, s[2 * i + 1], epoch);
    }
    if (uint64_t rest = bytes - whole * kLlLineData) {
      uint32_t buf[2] = {0, 0};
      __builtin_memcpy(buf, src + whole * kLlLineData, rest);
      storeHalf(&l[whole].data0, buf[0], epoch);
      storeHalf(&l[whole].data1, buf[1], epoch);
    }
  }

  RunArgs args_ = {};
  RedOp opNoPre_ = {};  // args_.op without pre (restart)
#if !defined(__CUDA_ARCH__)
  ReduceCopyFn fn_ = nullptr;  // the datatype's reduce-copy, chosen once per operation
#endif
  int nDone_ = 0;
  int cursor_ = 0;  // the lane acquire tries first: the last one that moved
  bool started_ = false;
  OpSig mismatchGot_ = {};  // kRunErrMismatch: the sender's call ...
  uint16_t mismatchLane_ = 0;
  uint8_t mismatchPort_ = kNoPort;  // ... and where it came from
  bool draining_ = false;           // references are out: wait for their release before done
  uint8_t drainPort_ = kNoPort;
  FifoCounter* drainWaitOn_ = nullptr;
  uint32_t drainWaitValue_ = 0;
  uint8_t refOut_[kMaxPorts];    // a reference was sent on this port in this run ...
  uint32_t refEnd_[kMaxPorts];   // ... and the head value that releases the last one
  uint32_t counter_[kMaxPorts];  // next slot number: tail of a send port, head of a recv port
  uint32_t seen_[kMaxPorts];     // the peer's counter as last read: head (send), tail (recv)
  LaneState lanes_[kMaxLanes];
  // LL staging: a received slice unpacked, a slice to send before it is packed.
  alignas(16) uint64_t llIn_[kLlMaxSliceBytes / 8];
  alignas(16) uint64_t llOut_[kLlMaxSliceBytes / 8];
};

}  // namespace ringcc
