// The view of one connection direction that primitives and kernels see (device-clean).
//
// A connection is a FIFO of `nSlots` slots of `slotBytes` each, in memory the receiver can
// read and the sender can write (heap for p2p, a shared segment for shm, pinned host or
// device memory later). Two counters, both counting slots since the connection was made:
//
//   sender                                 receiver
//   wait until tail - head < nSlots        wait until tail > step
//   write slot[tail % nSlots], sizes[..]   read slot[step % nSlots]
//   release-store tail = tail + 1          release-store head = step + 1
//   wake receiver if tailWaiters           wake sender if headWaiters
//
// Counters are 32-bit so that they can be futex words; they wrap, and all comparisons use
// unsigned differences. nSlots is a power of two, so that the slot of a counter value
// (value % nSlots) stays the same sequence across the wrap from 2^32-1 to 0. A sleeping waiter
// increments the matching *Waiters word before it re-checks and sleeps, so a writer makes the futex
// system call only when someone sleeps. The owning host object (transports/transport.h: Connector)
// allocates and frees the memory; this struct only points into it and is trivially copyable.
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"

namespace ringcc {

struct alignas(64) FifoCounter {
  uint32_t value;    // tail (filled by the sender) or head (freed by the receiver)
  uint32_t waiters;  // threads asleep on `value`
  // Doorbells only (a proxy's; 0 elsewhere): an eventfd + 1 that a host wake also signals, so
  // a proxy can sleep in poll() on its network's event fd and on this counter at once.
  int32_t wakeFd;
  char pad[52];
};

// References (the Direct protocol): instead of copying a slice into a slot, a sender may
// publish where the slice already lies in its own memory: the slot then holds a SlotRef, and
// sizes[slot] carries kSlotRefBit beside the byte count. The receiver reads the elements from
// there, and its head moving past the slot tells the sender that it is done with them. How the
// receiver reaches the sender's memory is the connection's RefKind, which the receiver writes
// into FifoControl::refKind once it knows (0 until then, and for good where it cannot): a
// sender sends references only where it reads a non-zero kind there.
enum RefKind : uint32_t {
  kRefNone = 0,     // copy into slots only
  kRefPointer = 1,  // one address space (threads of one process): read through the pointer
  kRefProcess = 2,  // another process on this host: read with process_vm_readv (host only)
};
constexpr uint32_t kSlotRefBit = 0x80000000u;

struct SlotRef {
  uint64_t addr;  // the slice's first byte, in the sender's address space
};

struct FifoControl {
  FifoCounter tail;   // written by the sender
  FifoCounter head;   // written by the receiver
  uint32_t refKind;   // RefKind: set once by the receiver when it can read references
  uint32_t sizes[1];  // really [nSlots]: bytes written into each slot (set before tail moves),
                      // | kSlotRefBit when the slot holds a SlotRef
};

// Protocols: how a slot's bytes are laid out and how a receiver knows they are there. Both
// share one connection's counters (slot numbers), so operations of either protocol can follow
// each other on a connection; each has its own slot memory.
//   Simple  a slot is plain data; the receiver learns it is filled from `tail` (and its size
//           from sizes[slot]).
//   LL      a slot is a row of LlLines, each 8 data bytes with a flag beside every 4 of them;
//           a line is valid once both its flags equal the slot number + 1 (its "epoch"), so
//           the receiver polls the data itself and needs neither tail nor sizes. Memory is
//           never cleared: the epoch of a slot differs from the one of its last round
//           (by nSlots). A transport fills new LL memory with zero flags; counters start at 0.
//   Direct  Simple's slots, plus references: a step whose data already lies in a user buffer
//           (and stays unchanged until the receiver read it: kStepByRef) publishes a SlotRef
//           instead of copying it, so a large message is copied once per hop. Receivers
//           accept both kinds of slot under Simple and Direct alike.
enum Protocol : uint8_t { kProtoSimple = 0, kProtoLL = 1, kProtoDirect = 2 };
constexpr int kNumProtocols = 3;

struct alignas(16) LlLine {
  uint32_t data0;
  uint32_t flag0;
  uint32_t data1;
  uint32_t flag1;
};
constexpr uint32_t kLlLineBytes = sizeof(LlLine);
constexpr uint32_t kLlLineData = 8;  // data bytes per line

struct ConnectorView {
  char* slots;           // Simple: nSlots * slotBytes, receiver-visible
  FifoControl* control;  // counters and per-slot sizes, visible to both sides
  uint32_t nSlots;
  uint32_t slotBytes;
  char* llSlots;         // LL: nSlots * llSlotBytes of LlLines, receiver-visible; null: no LL
  uint32_t llSlotBytes;  // multiple of kLlLineBytes
  int32_t refPid;        // receive side of kRefProcess: the sender's pid, else 0
  // Optional: a counter a progress thread (a network transport's proxy) sleeps on. Whoever
  // publishes on this connection also bumps it and wakes its sleepers. Null for transports
  // whose FIFO memory is shared (p2p, shm).
  FifoCounter* doorbell;
};

// Bytes needed for a FifoControl with `nSlots` sizes.
RINGCC_INLINE uint64_t fifoControlBytes(uint32_t nSlots) {
  return sizeof(FifoControl) + sizeof(uint32_t) * (nSlots > 0 ? nSlots - 1 : 0);
}

// The slot that counter value `step` (a tail or head value) refers to.
RINGCC_INLINE uint32_t fifoSlot(const ConnectorView& v, uint32_t step) {
  return step & (v.nSlots - 1);
}

RINGCC_INLINE char* fifoSlotData(const ConnectorView& v, uint32_t step) {
  return v.slots + static_cast<uint64_t>(fifoSlot(v, step)) * v.slotBytes;
}

// True once a counter that moved to `value` has reached `target` (wrap-aware: the counters
// of one connection never drift more than 2^31 apart).
RINGCC_INLINE bool counterReached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

}  // namespace ringcc
