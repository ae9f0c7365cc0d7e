// Host-side waiting and waking on FIFO counters (kernels/connector_device.h).
//
// A waiter polls a counter for a while (NCCL_SPIN_COUNT polls), then sleeps on it with a futex
// so that 8 processes on 2 cores still move. The futex is not private (FUTEX_WAIT, not
// FUTEX_WAIT_PRIVATE), so it works on shared memory between processes as well as on the heap.
// Every sleep is short (WaitOptions::sleepMicros), so an abort flag, the deadline and a dead or
// departed peer are noticed within that time even if nobody wakes the sleeper.
//
// Memory ordering, for the FIFO protocol (both sides are single-threaded per connection):
//
//   sender                                      receiver
//   waitForCounter(head, tail + 1 - nSlots)     waitForCounter(tail, step + 1)   (acquire)
//   write slot bytes, meta[slot]                read meta[slot], slot bytes
//   publishCounter(tail, tail + 1)  (release)   publishCounter(head, step + 1)   (release)
//
// The release store of tail orders the slot and size writes before it; the receiver's acquire
// load of tail orders its reads after it. Symmetrically, the receiver's release of head orders
// its reads of a slot before the sender's acquire of head lets it overwrite that slot. 32-bit
// atomics are lock-free, so the same holds between processes on shared memory.
//
// Lost wake-ups: a sleeper increments `waiters` (seq_cst) and then re-reads the counter before
// it sleeps; a publisher stores the counter, issues a seq_cst fence, then reads `waiters`. So
// either the sleeper sees the new value, or the publisher sees waiters != 0 and wakes it (and
// FUTEX_WAIT itself refuses to sleep if the value already changed). Publishers make the
// futex system call only when someone sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "kernels/connector_device.h"
#include "nccl.h"

namespace ringcc {

class Connector;

using WaitClock = std::chrono::steady_clock;

struct WaitOptions {
  int spinCount = 2000;                      // polls before sleeping (NCCL_SPIN_COUNT)
  const std::atomic<bool>* abort = nullptr;  // set: the wait ends with ncclInvalidUsage
  WaitClock::time_point deadline = WaitClock::time_point::max();  // passed: ncclRemoteError
  const Connector* conn = nullptr;  // if set: a Closed or Dead peer ends the wait (ncclRemoteError)
  const char* what = "wait";        // names the wait in error messages ("ch 1 recv step 7")
  int sleepMicros = 5000;           // longest single futex sleep
};

// SPIN_COUNT and TIMEOUT (from now) from the parameter table, plus the given abort flag and
// connector. The deadline is absolute: make the options once per operation, not per wait.
WaitOptions defaultWaitOptions(const std::atomic<bool>* abort, const Connector* conn);

// Waits until counter->value has reached `target` (counterReached: wrap-aware), with acquire
// ordering. On success stores the value seen in *observed (if not null); it may be past target.
// Returns:
//   ncclSuccess        the counter reached target (checked before anything else, and once more
//                      after an abort, deadline or peer failure is seen, so no completed step is
//                      reported as failed);
//   ncclInvalidUsage   *opts.abort became true (logged at INFO only: whoever set the flag
//                      recorded the cause);
//   ncclRemoteError    the deadline passed, or the peer closed its side or died (logged via
//                      failPeer with opts.what, the target and the last value seen).
ncclResult_t waitForCounter(FifoCounter* counter, uint32_t target, const WaitOptions& opts,
                            uint32_t* observed = nullptr);

// Wakes every thread sleeping on `counter`, if there is any (one seq_cst fence and a load
// otherwise). Call after storing a new value.
void wakeCounter(FifoCounter* counter);

// Release-stores `value` into the counter, then wakeCounter.
void publishCounter(FifoCounter* counter, uint32_t value);

// Sleeps at most `micros` while counter->value == unchanged (returns at once if it differs,
// early when woken). No error, no logging: for an executor that polls many counters and naps
// on one of them between rounds.
void napOnCounter(FifoCounter* counter, uint32_t unchanged, int micros);

// Acquire load of the counter's value.
uint32_t loadCounter(const FifoCounter* counter);

// The FIFO protocol's two waits, on a view.
// Sender: until slot `tail` is free (head >= tail + 1 - nSlots).
inline ncclResult_t waitSlotFree(const ConnectorView& v, uint32_t tail, const WaitOptions& o) {
  return waitForCounter(&v.control->head, tail + 1 - v.nSlots, o);
}
// Receiver: until slot `step` is filled (tail >= step + 1).
inline ncclResult_t waitSlotFilled(const ConnectorView& v, uint32_t step, const WaitOptions& o) {
  return waitForCounter(&v.control->tail, step + 1, o);
}

}  // namespace ringcc
