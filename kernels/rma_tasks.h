// One-sided signals and waits of a CUDA communicator (ncclPutSignal, ncclSignal,
// ncclWaitSignal: src/rma) as one small kernel's arguments, and the body that runs them
// (device-clean). A put's data goes by a copy queued on the stream before the kernel
// (cuMemcpyDtoDAsync, the copy engine); the kernel does what a copy cannot:
//
//   signal  a system fence, then one atomic add (system scope) to each named counter: a
//           peer's counter of (this rank, ctx, sigIdx), in host memory that the peer's kernels
//           read. Stream order puts the copy before the add; the fence makes what this
//           rank's GPU wrote visible before the count.
//   wait    polls this rank's counters until each has reached its target (what earlier waits
//           consumed plus opCnt: the host counts, at the call), then a fence. Between polls it
//           naps, and every kRmaCheckPolls polls it reads the communicator's abort flag, the
//           flag of the peer it waits for (set by the host when that peer's process exited or
//           its connection closed: after a last look at the counter, since what the peer sent
//           before it went still counts) and the clock: a wait in which no counter moved for
//           timeoutNs (NCCL_TIMEOUT) stops, as the batch kernel's waits do. A stop writes why into
//           the status words (host-mapped), in which the engine finds it (src/cuda/cuda_engine.h).
//
// Thread 0 of one block does the work; the CUDA kernel is kernels/cuda/rma_kernel.cuh, the
// emulated driver runs the body on one host thread.
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"
#include "kernels/device_ops.h"

namespace ringcc {

enum RmaKind : uint32_t { kRmaSignal = 0, kRmaWait = 1 };

// Why a wait stopped: status[0] of RmaArgs::status.
enum RmaStop : uint32_t {
  kRmaStopNone = 0,
  kRmaStopAborted = 1,
  kRmaStopTimeout = 2,
  kRmaStopPeerGone = 3,
};

// A counter to add one to (signal) or to wait for (wait), by its device address. peer, sigIdx
// and ctx only name it in a stop's status.
struct RmaItem {
  uint64_t counter = 0;
  uint64_t target = 0;  // wait: the count to reach
  uint32_t peer = 0;
  uint16_t sigIdx = 0;
  uint16_t ctx = 0;
  uint64_t pad = 0;
};

constexpr uint32_t kRmaMaxItems = 96;    // the arguments stay under the 4 KB of a launch
constexpr uint32_t kRmaCheckPolls = 64;  // polls between looks at the abort flag and the clock
constexpr uint32_t kRmaStatusWords = 4;
constexpr uint32_t kRmaThreads =
    32;  // the kernel's block (thread 0 works)  // stop, peer, sigIdx | ctx << 16, count seen (low)

struct RmaArgs {
  uint32_t kind = kRmaSignal;
  uint32_t nItems = 0;
  uint64_t abortFlag = 0;  // const uint32_t*, host-mapped: non-zero stops a wait
  uint64_t status = 0;     // uint32_t[kRmaStatusWords], host-mapped: written when a wait stops
  uint64_t timeoutNs = 0;  // 0: no clock
  uint64_t peerGone = 0;   // const uint32_t[nranks], host-mapped: non-zero once that peer is gone
  RmaItem items[kRmaMaxItems];
};
static_assert(sizeof(RmaArgs) <= 4096, "a launch's arguments");

namespace rma_detail {

template <class T>
RINGCC_INLINE T* at(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

RINGCC_INLINE void stop(const RmaArgs& args, const RmaItem& item, uint32_t why, uint64_t seen) {
  uint32_t* status = at<uint32_t>(args.status);
  stVolatile32(status + 1, item.peer);
  stVolatile32(status + 2, static_cast<uint32_t>(item.sigIdx) | (uint32_t{item.ctx} << 16));
  stVolatile32(status + 3, static_cast<uint32_t>(seen));
  stVolatile32(status + 4, static_cast<uint32_t>(item.target));
  fenceSystem();  // the details before the stop that tells the host to read them
  stVolatile32(status, why);
}

}  // namespace rma_detail

// Block: thread(), nap(polls) (a pause after a fruitless poll) and nanos() (a clock).
template <class Block>
RINGCC_INLINE void rmaRunBlock(const RmaArgs& args, Block& blk) {
  using rma_detail::at;
  if (blk.thread() != 0) return;
  if (args.kind == kRmaSignal) {
    fenceSystem();
    for (uint32_t i = 0; i < args.nItems; ++i)
      atomicAddSystemU64(at<uint64_t>(args.items[i].counter), 1);
    return;
  }
  for (uint32_t i = 0; i < args.nItems; ++i) {
    const RmaItem& item = args.items[i];
    const uint64_t* counter = at<uint64_t>(item.counter);
    uint64_t seen = ldVolatile64(counter);
    uint64_t since = 0;  // when the clock was first read in a stretch without movement
    for (unsigned polls = 0; seen < item.target; ++polls) {
      if (polls % kRmaCheckPolls == kRmaCheckPolls - 1) {
        if (ldVolatile32(at<const uint32_t>(args.abortFlag)) != 0) {
          rma_detail::stop(args, item, kRmaStopAborted, seen);
          return;
        }
        if (args.peerGone != 0 && ldVolatile32(at<const uint32_t>(args.peerGone) + item.peer)) {
          seen = ldVolatile64(counter);  // the last look: what it sent before it went counts
          if (seen >= item.target) break;
          rma_detail::stop(args, item, kRmaStopPeerGone, seen);
          return;
        }
        if (args.timeoutNs != 0) {
          const uint64_t now = blk.nanos();
          if (since == 0) {
            since = now;
          } else if (now - since > args.timeoutNs) {
            rma_detail::stop(args, item, kRmaStopTimeout, seen);
            return;
          }
        }
      }
      blk.nap(polls);
      const uint64_t now = ldVolatile64(counter);
      if (now != seen) since = 0;  // a signal came: the clock starts again
      seen = now;
    }
  }
  // Acquire: what the signalling peers wrote before their adds is seen by this stream's
  // later work.
  fenceSystem();
}

}  // namespace ringcc
