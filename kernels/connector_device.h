// The view of one connection direction that primitives and kernels see (device-clean).
//
// A connection is a FIFO of `nSlots` slots of `slotBytes` each, in memory the receiver can
// read and the sender can write (heap for p2p, a shared segment for shm, pinned host or
// device memory later). Two counters, both counting slots since the connection was made:
//
//   sender                                 receiver
//   wait until tail - head < nSlots        wait until tail > step
//   write slot[tail % nSlots], meta[..]    read slot[step % nSlots]
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
// meta[slot].size carries kSlotRefBit beside the byte count. The receiver reads the elements from
// there, and its head moving past the slot tells the sender that it is done with them. How the
// receiver reaches the sender's memory is the connection's RefKind, which the receiver writes
// into FifoControl::refKind once it knows (0 until then, and for good where it cannot): a
// sender sends references only where it reads a non-zero kind there.
enum RefKind : uint32_t {
  kRefNone = 0,     // copy into slots only
  kRefPointer = 1,  // one address space (threads of one process): read through the pointer
  kRefProcess = 2,  // another process on this host: read with process_vm_readv (host only)
  // A network connection's local staging FIFO (transports/ucx): this process's proxy sends
  // the elements from the pointer itself, and the far receiver gets them as plain data.
  kRefNetwork = 3,
  // Another process on this host: buffers from its ncclMemAlloc are mapped here and read in
  // place (transports/shm/mapped_buffers.h, host only); others come through the slots.
  kRefMapped = 4,
};
constexpr uint32_t kSlotRefBit = 0x80000000u;

// A shareable buffer of the sender's process (kRefMapped): enough for the receiver to map it.
struct RefRegion {
  uint64_t base;   // where the sender maps it
  uint64_t bytes;  // its size
  uint64_t ino;    // the memfd's inode: tells a reused fd number from the region itself
  int32_t fd;      // the sender's fd of it (/proc/<pid>/fd/<fd>)
  int32_t pad;
};

struct SlotRef {
  uint64_t addr;     // the slice's first byte, in the sender's address space
  RefRegion region;  // kRefMapped: the sender's buffer that holds it
};

// What the sender of a slot was running, so that the receiver can check that both ranks made
// the same call before it touches the data (a mismatch is the user's error, named with both
// calls, instead of wrong data or a hang). Filled per lane by the runner.
struct OpSig {
  uint64_t count;  // NCCL's count of the call (send/recv: bytes of that operation)
  int32_t root;    // rooted collectives: the root, else -1
  uint8_t coll;    // Coll (src/sched/builders.h); send and receive sign as Coll::Send
  uint8_t type;    // ncclDataType_t (send/recv: ncclUint8)
  uint8_t op;      // ncclRedOp_t of reducing collectives (ncclNumOps: a user's PreMulSum), or
                   // kSigNoOp
  uint8_t pad;
};
static_assert(sizeof(OpSig) == 16, "an OpSig is two LL lines of data");
constexpr uint8_t kSigNoOp = 0xff;

RINGCC_INLINE bool sameSig(const OpSig& a, const OpSig& b) {
  return a.count == b.count && a.root == b.root && a.coll == b.coll && a.type == b.type &&
         a.op == b.op;
}

// What the sender of a Simple (or Direct) slot writes beside it, before tail moves; a slot's
// size and signature share one cache line (two records per line).
struct SlotMeta {
  uint32_t size;  // bytes in the slot, | kSlotRefBit when it holds a SlotRef
  uint32_t pad;
  OpSig sig;  // the sender's call
  uint64_t pad2;
};
static_assert(sizeof(SlotMeta) == 32, "two SlotMeta records per cache line");

// Why a side gave up on its connections, for peers that then see them closed.
enum FailReason : uint32_t {
  kFailNone = 0,
  kFailMismatch = 1,  // this side found that the ranks' calls differ
  kFailStopped = 2,   // this side's kernel stopped on another error, or was aborted
  kFailPeerDead = 3,  // written by this side's own host: the peer's process died
};

// The call a side of a connection is in, posted by its engine when a batch starts (host
// only; read by the peer only while it waits on this connection). Ranks whose calls differ
// in a way that leaves both waiting (a reduce with different roots: both only receive) find
// each other's call here. A seqlock: seq is 0 while the side writes.
struct PostedCall {
  uint64_t seq;  // the side's batch number (1, 2, ...), or 0 while written / never
  OpSig sig;     // its call; coll = kSigGroup for a batch that is not one collective
};
constexpr uint8_t kSigGroup = 0xfe;

struct FifoControl {
  FifoCounter tail;                  // written by the sender
  FifoCounter head;                  // written by the receiver
  alignas(64) PostedCall posted[2];  // indexed by the posting side's ConnSide (0 recv, 1 send)
  uint32_t refKind;     // RefKind: set once by the receiver when it can read references
  uint32_t failReason;  // FailReason: set by a side before it closes after a failure
  SlotMeta meta[1];     // really [nSlots]: what the sender wrote about each Simple slot
};

// Protocols: how a slot's bytes are laid out and how a receiver knows they are there. Both
// share one connection's counters (slot numbers), so operations of either protocol can follow
// each other on a connection; each has its own slot memory.
//   Simple  a slot is plain data; the receiver learns it is filled from `tail` (and its size
//           from meta[slot]).
//   LL      a slot is a row of LlLines, each 8 data bytes with a flag beside every 4 of them
//           (the first kLlSigLines carry the sender's OpSig, the data follows);
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
// An LL slot's first lines carry the sender's OpSig; its data follows them. The signature
// shares the data's first cache line, so checking it costs no extra transfer.
constexpr uint32_t kLlSigLines = sizeof(OpSig) / kLlLineData;

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
  // Non-zero: both sides run on one GPU and nothing outside it reads the counters or the
  // slots while they run (p2p in that GPU's memory), so the device's fences may stop at GPU
  // scope (kernels/cuda/device_sync.h). 0: system scope (the host or another GPU looks).
  uint32_t oneGpu;
};

// Bytes needed for a FifoControl with `nSlots` slot records.
RINGCC_INLINE uint64_t fifoControlBytes(uint32_t nSlots) {
  return sizeof(FifoControl) + sizeof(SlotMeta) * (nSlots > 0 ? nSlots - 1 : 0);
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
