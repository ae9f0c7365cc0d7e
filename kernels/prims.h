// The one interpreter of Programs (device-clean): ProgramRunner runs one rank's Program on one
// channel against one ConnectorView per port, the user's buffers, a datatype and a RedOp.
//
// It never waits. advance() does every slice that can be done now (or up to a budget) and
// says what happened: done, progressed, or blocked on which counter at which value. Callers
// choose how to wait:
//   - the simulator round-robins all ranks in one thread; a round where nobody progressed is
//     a deadlock;
//   - the host executor spins a little, then sleeps on the counter it is blocked on
//     (futex on waitOn->value while it equals waitValue, after bumping waitOn->waiters);
//   - a CUDA block spins (one thread drives, the block shares the reduce-copy; see below).
//
// Per slice (protocol of transports/connector_device.h):
//   recv:  acquire-load tail; ready if tail != head. Read sizes[slot], must equal the slice.
//   send:  acquire-load head; ready if tail - head < nSlots.
//   then reduceCopy(local input, recv slot) -> output, send slot;
//   send:  sizes[slot] = bytes, publish tail + 1;  recv: publish head + 1 (after reading).
// Publishing is a sequentially consistent store followed by a load of `waiters`; if someone
// sleeps there, the caller's wake hook is called (host executor: futex wake). A sleeper must
// increment `waiters` with a sequentially consistent RMW before re-checking the counter.
//
// The runner's counters start from the connection's own counters (tail for a send port, head
// for a receive port: each is written only by this side), read at the first advance(), so
// connections persist across collectives with no extra bookkeeping. Programs sharing a
// connection may all be init()ed up front, but must be advanced in order: the next one's first
// advance() only after the previous one is done. nSlots must be a power of two: counters wrap
// at 2^32 and slot = counter % nSlots must stay continuous across the wrap.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/device_clean.h"
#include "nccl.h"
#include "src/sched/program.h"
#include "transports/connector_device.h"

#include "kernels/red_op.h"
#include "kernels/reduce_copy.h"

namespace ringcc {

// Called after a counter was published while `waiters` was non-zero.
typedef void (*WakeFn)(void* ctx, uint32_t* word);

struct AdvanceResult {
  bool done;            // every lane finished; nothing more to do
  bool progressed;      // this call moved at least one slice or finished a lane
  uint32_t slices;      // slices moved by this call
  const char* error;    // non-null: the program cannot go on (bad sizes, bad views); stop
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
  uint16_t step;       // index into Program::steps of the current step
  uint32_t loop;       // current loop
  uint64_t stepDone;   // elements of the current step already moved
  uint64_t stepCount;  // elements the current step moves in this loop
  uint32_t counter;    // this side's counter on `port` (next slot number)
};

class ProgramRunner {
 public:
  struct Params {
    const Program* program;
    const ConnectorView* ports;  // [program->nPorts], resolved from program->ports
    const void* const* inputs;   // [program->nBuffers]; may alias outputs (in place)
    void* const* outputs;        // [program->nBuffers]
    ncclDataType_t type;         // element type; program->elemSize must match it
    RedOp op;                    // for collectives that do not reduce: makeRedOp(ncclSum, ...)
    WakeFn wake;                 // may be null (nobody ever sleeps)
    void* wakeCtx;
  };

  // Binds a Program to its connections and buffers. Returns nullptr, or why it cannot run.
  RINGCC_HOST_DEVICE const char* init(const Params& p) {
    prog_ = p.program;
    ports_ = p.ports;
    inputs_ = p.inputs;
    outputs_ = p.outputs;
    type_ = p.type;
    op_ = p.op;
    wake_ = p.wake;
    wakeCtx_ = p.wakeCtx;
    nDone_ = 0;
    const Program& g = *prog_;
    if (g.nLanes > kMaxLanes || g.nPorts > kMaxPorts || g.nSteps > kMaxSteps)
      return "program tables exceed their bounds";
    if (g.elemSize == 0 || g.sliceElems == 0) return "program has no element or slice size";
    uint64_t sliceBytes = (uint64_t)g.sliceElems * g.elemSize;
    for (int i = 0; i < g.nPorts; i++) {
      const ConnectorView& v = ports_[i];
      if (!v.slots || !v.control) return "port has no connection";
      if (v.nSlots == 0 || (v.nSlots & (v.nSlots - 1)) != 0)
        return "connection nSlots is not a power of two";
      if (v.slotBytes < sliceBytes) return "connection slots are smaller than a slice";
      if (v.nSlots < g.minSlots) return "connection has fewer slots than a chunk of the schedule";
    }
    started_ = false;
    for (int i = 0; i < g.nLanes; i++) {
      LaneState& st = lanes_[i];
      st.loop = 0;
      st.step = 0;
      st.done = 0;
      st.wait = kLaneRunning;
      st.port = kNoPort;
      st.stepDone = 0;
      settle(i);
    }
    return nullptr;
  }

  RINGCC_HOST_DEVICE bool done() const { return nDone_ == prog_->nLanes; }

  // Does every slice that can be done now, at most `maxSlices` of them.
  RINGCC_HOST_DEVICE AdvanceResult advance(uint32_t maxSlices = 0xffffffffu) {
    AdvanceResult r = {};
    const Program& g = *prog_;
    if (!started_) {
      // This side's counters, read only now: an executor may bind several Programs on one
      // connection up front and run them one after the other.
      for (int i = 0; i < g.nPorts; i++) {
        FifoControl* c = ports_[i].control;
        counter_[i] =
            g.ports[i].dir == kPortSend ? loadAcquire(&c->tail.value) : loadAcquire(&c->head.value);
      }
      started_ = true;
    }
    uint32_t budget = maxSlices;
    bool again = true;
    while (again && budget > 0) {
      again = false;
      for (int i = 0; i < g.nLanes && budget > 0; i++) {
        LaneState& st = lanes_[i];
        if (st.done) continue;
        int16_t after = g.lanes[i].after;
        if (after != kNoLane && !lanes_[after].done) {
          st.wait = kLaneWaitLane;
          continue;
        }
        while (budget > 0 && !st.done) {
          int rc = trySlice(i, &r.error);
          if (rc == kSliceError) {
            r.done = false;
            return r;
          }
          if (rc == kSliceBlocked) break;
          budget--;
          r.slices++;
          r.progressed = again = true;
          if (settle(i)) r.progressed = again = true;
        }
      }
    }
    r.done = done();
    if (!r.done && budget > 0) {  // every open lane was tried in the last pass: waits are current
      for (int i = 0; i < g.nLanes; i++) {
        const LaneState& st = lanes_[i];
        if (st.done || (st.wait != kLaneWaitRecv && st.wait != kLaneWaitSend)) continue;
        if (r.nBlocked++ == 0) {
          r.waitOn = st.waitOn;
          r.waitValue = st.waitValue;
        }
      }
    }
    return r;
  }

  RINGCC_HOST_DEVICE LaneStatus laneStatus(int lane) const {
    const LaneState& st = lanes_[lane];
    const Lane& l = prog_->lanes[lane];
    LaneStatus s = {};
    s.wait = st.done ? (uint8_t)kLaneDone : st.wait;
    s.port = st.done ? kNoPort : st.port;
    s.step = (uint16_t)(l.firstStep + st.step);
    s.loop = st.loop;
    s.stepDone = st.stepDone;
    s.stepCount = st.done ? 0 : stepCountInLoop(l, prog_->steps[s.step], st.loop);
    s.counter = s.port != kNoPort ? counter_[s.port] : 0;
    return s;
  }

 private:
  enum { kSliceMoved, kSliceBlocked, kSliceError };

  struct LaneState {
    uint32_t loop;
    uint16_t step;  // within the lane's body
    uint8_t done;
    uint8_t wait;  // LaneWait of the last attempt
    uint8_t port;  // port of that wait
    uint32_t waitValue;
    FifoCounter* waitOn;
    uint64_t stepDone;
  };

  RINGCC_INLINE static uint32_t loadAcquire(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
    uint32_t v = *(const volatile uint32_t*)p;
    __threadfence_system();
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
  }

  RINGCC_INLINE void publish(FifoCounter* c, uint32_t v) {
#if defined(__CUDA_ARCH__)
    // Device: order the slot writes before the counter; host sleepers are woken by whoever
    // polls for the GPU (their waits are timed), never from a kernel.
    __threadfence_system();
    *(volatile uint32_t*)&c->value = v;
#else
    __atomic_store_n(&c->value, v, __ATOMIC_SEQ_CST);
    if (wake_ && __atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST) != 0) wake_(wakeCtx_, &c->value);
#endif
  }

  // Skips steps that are empty in this loop and finishes the lane at its end. Returns whether
  // the lane's state changed in a way that may unblock others (it finished).
  RINGCC_HOST_DEVICE bool settle(int i) {
    LaneState& st = lanes_[i];
    const Lane& l = prog_->lanes[i];
    if (st.done) return false;
    for (;;) {
      if (st.loop >= l.nLoops || l.nSteps == 0) {
        st.done = 1;
        st.wait = kLaneDone;
        nDone_++;
        return true;
      }
      const Step& s = prog_->steps[l.firstStep + st.step];
      if (st.stepDone < stepCountInLoop(l, s, st.loop)) return false;
      st.stepDone = 0;
      if (++st.step >= l.nSteps) {
        st.step = 0;
        st.loop++;
      }
    }
  }

  RINGCC_HOST_DEVICE int trySlice(int i, const char** error) {
    LaneState& st = lanes_[i];
    const Lane& l = prog_->lanes[i];
    const Step& s = prog_->steps[l.firstStep + st.step];
    const uint64_t n = stepCountInLoop(l, s, st.loop);
    uint64_t elems = n - st.stepDone;
    if (elems > prog_->sliceElems) elems = prog_->sliceElems;
    const uint32_t bytes = (uint32_t)(elems * prog_->elemSize);

    const void* peer = nullptr;
    void* sendSlot = nullptr;
    FifoControl* rc = nullptr;
    FifoControl* sc = nullptr;
    uint32_t rslot = 0, sslot = 0;
    if (s.flags & kStepRecv) {
      const ConnectorView& v = ports_[s.recvPort];
      rc = v.control;
      uint32_t tail = loadAcquire(&rc->tail.value);
      if (tail == counter_[s.recvPort])
        return block(st, kLaneWaitRecv, s.recvPort, &rc->tail, tail);
      rslot = counter_[s.recvPort] & (v.nSlots - 1);
      if (rc->sizes[rslot] != bytes) {
        *error = "received slot size differs from the step's slice (mismatched schedules)";
        return kSliceError;
      }
      peer = v.slots + (size_t)rslot * v.slotBytes;
    }
    if (s.flags & kStepSend) {
      const ConnectorView& v = ports_[s.sendPort];
      sc = v.control;
      uint32_t head = loadAcquire(&sc->head.value);
      if (counter_[s.sendPort] - head >= v.nSlots)
        return block(st, kLaneWaitSend, s.sendPort, &sc->head, head);
      sslot = counter_[s.sendPort] & (v.nSlots - 1);
      sendSlot = v.slots + (size_t)sslot * v.slotBytes;
    }
    const uint64_t at = st.stepDone * prog_->elemSize;
    const void* local = nullptr;
    void* out = nullptr;
    if (s.flags & kStepLocal)
      local = (const char*)inputs_[l.inBuf] + stepInOffset(l, s, st.loop) * prog_->elemSize + at;
    if (s.flags & kStepOut)
      out = (char*)outputs_[l.outBuf] + stepOutOffset(l, s, st.loop) * prog_->elemSize + at;

    reduceCopy(type_, op_, local, peer, out, sendSlot, (size_t)elems, (s.flags & kStepPost) != 0);

    if (sc) {
      sc->sizes[sslot] = bytes;
      publish(&sc->tail, ++counter_[s.sendPort]);
    }
    if (rc) publish(&rc->head, ++counter_[s.recvPort]);
    st.stepDone += elems;
    st.wait = kLaneRunning;
    st.port = kNoPort;
    return kSliceMoved;
  }

  RINGCC_INLINE int block(LaneState& st, uint8_t wait, uint8_t port, FifoCounter* c,
                          uint32_t seen) {
    st.wait = wait;
    st.port = port;
    st.waitOn = c;
    st.waitValue = seen;
    return kSliceBlocked;
  }

  const Program* prog_ = nullptr;
  const ConnectorView* ports_ = nullptr;
  const void* const* inputs_ = nullptr;
  void* const* outputs_ = nullptr;
  ncclDataType_t type_ = ncclInt8;
  RedOp op_ = {};
  WakeFn wake_ = nullptr;
  void* wakeCtx_ = nullptr;
  int nDone_ = 0;
  bool started_ = false;
  uint32_t counter_[kMaxPorts];  // next slot number: tail of a send port, head of a recv port
  LaneState lanes_[kMaxLanes];
};

}  // namespace ringcc
