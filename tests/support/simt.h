// A small SIMT emulation: the batch kernel's device paths (kernels/cuda/batch_block.h with
// DeviceSync, ProgramRunner::reduceCopyBlock: reduceCopyPacked, the LL line polls, every
// barrier and vote) run on host threads, one host thread per CUDA thread, so that what only a
// block of many threads can get wrong fails in a host test: a barrier some thread skips, a
// share of a slice no thread takes (a lost tail), two threads on one element (a wrong lane
// split). The memory operations the device code uses are the host forms of
// kernels/device_ops.h (the same header the kernel compiles), so the code under test is the
// kernel's own, not a copy.
//
// A Thread is the kernel's Block policy (index, thread, threads, barrier, barrierAnd,
// barrierOr, nap, nanos, and the block's shared slice and word). Every barrier of a block
// checks what CUDA leaves undefined or hangs on:
//   - a thread that leaves the kernel while others of its block wait at a barrier, or reaches
//     a barrier after another thread left ("divergent barrier");
//   - threads of one block meeting at different kinds of barrier (a __syncthreads against a
//     __syncthreads_and: also divergent);
//   - a barrier that not every thread reaches within the timeout ("barrier timeout").
// The first such error stops the whole grid: every thread's next barrier or nap throws, all
// threads unwind, and runGrid returns the error text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/device_sync.h"
#include "kernels/prims.h"

namespace ringcc::simt {

class Grid;
struct BlockShared;

// One emulated CUDA thread, as batch_block.h's Block policy sees it.
class Thread {
 public:
  using Sync = DeviceSync;
  Thread(BlockShared* block, uint32_t thread) : block_(block), thread_(thread) {}
  uint32_t index() const;    // blockIdx.x
  uint32_t thread() const { return thread_; }  // threadIdx.x
  uint32_t threads() const;  // blockDim.x
  void barrier() { meet(kPlain, true); }
  bool barrierAnd(bool p) { return meet(kAnd, p); }
  bool barrierOr(bool p) { return meet(kOr, p); }
  void nap(unsigned polls) const;
  uint64_t nanos() const;
  Slice* slice();
  int* word();

  enum Kind : int { kPlain, kAnd, kOr };

 private:
  bool meet(Kind kind, bool p);
  BlockShared* block_;
  uint32_t thread_;
};

// One launch: `blocks` blocks of `threads` threads, each thread running kernel(thread).
struct Launch {
  std::function<void(Thread&)> kernel;
  uint32_t blocks = 1;
  uint32_t threads = 1;
};

// Runs every block of every launch at once (the ranks' kernels side by side, as their GPUs
// would), each emulated thread on a host thread of its own, and waits for all. Returns "" or
// what went wrong (a divergent barrier, a barrier timeout, an exception in a thread).
std::string runGrid(const std::vector<Launch>& launches, double barrierTimeoutSeconds = 120);

}  // namespace ringcc::simt
