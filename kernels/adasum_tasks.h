// Adasum's local steps as one kernel's arguments and the block body that runs them
// (device-clean). The schedule (src/adasum) cuts each step into tasks, a segment's part of a
// range each, and hands them over in launches of at most kAdasumMaxTasks:
//
//   products      dots[segment] += the three products of a and b over the task's elements
//   coefficients  coefficients[k] = adasumCoefficients(sum of rows [firstRow, firstRow + rows)
//                 of the table of products, row by row in rank order), for every segment k:
//                 every rank of a block sums the same rows in the same order, so all get the
//                 same bits
//   combine       out = coefficients[segment].a a + coefficients[segment].b b
//
// The CUDA kernel (kernels/cuda/adasum_kernel.cuh) runs the body with 512 threads a block and
// many blocks; the host schedule (src/adasum/local_steps.cc) and the emulated driver with one
// thread a block (AdasumSoloBlock). A block takes the work items (a task's chunk of
// kAdasumChunk elements) index, index + blocks, ...; each thread the chunk's elements thread,
// thread + threads, ....
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/adasum.h"
#include "kernels/device_clean.h"
#include "kernels/device_ops.h"
#include "kernels/dtypes.h"

namespace ringcc {

enum AdasumStep : uint32_t { kAdasumProducts = 0, kAdasumCoefficients = 1, kAdasumCombine = 2 };

// One segment's part of a range: n elements from a, b and out (out: combine only; it may be a
// or b). Addresses as the executor sees them (device addresses in a kernel).
struct AdasumTask {
  uint64_t a, b, out;
  uint64_t n;
  uint32_t segment;
  uint32_t pad;
};

constexpr uint32_t kAdasumMaxTasks = 96;     // the arguments stay under the 4 KB of a launch
constexpr uint64_t kAdasumChunk = 1u << 16;  // elements of one work item
constexpr uint32_t kAdasumMaxBlocks = 1024;   // blocks of one launch (fewer if fewer items)

struct AdasumArgs {
  uint32_t step = kAdasumProducts;
  uint32_t datatype = 0;  // ncclDataType_t: float16, bfloat16, float32 or float64
  uint32_t ntasks = 0;
  uint32_t segments = 0;  // coefficients: how many segments
  uint32_t firstRow = 0;  // coefficients: the rows of `dots` summed
  uint32_t rows = 0;
  uint64_t dots = 0;  // AdasumDots[segments] (products), or [rows][segments] (coefficients)
  uint64_t coefficients = 0;  // AdasumCoefficients[segments]
  AdasumTask tasks[kAdasumMaxTasks];
};
static_assert(sizeof(AdasumArgs) <= 4096, "a launch's arguments");

// How many work items the tasks of `args` make.
RINGCC_INLINE uint64_t adasumItems(const AdasumArgs& args) {
  uint64_t items = 0;
  for (uint32_t t = 0; t < args.ntasks; ++t)
    items += (args.tasks[t].n + kAdasumChunk - 1) / kAdasumChunk;
  return items;
}

// One host thread as a whole block: block `index` of `blocks`.
struct AdasumSoloBlock {
  uint32_t id = 0;
  uint32_t count = 1;
  uint32_t index() const { return id; }
  uint32_t blocks() const { return count; }
  uint32_t thread() const { return 0; }
  uint32_t threads() const { return 1; }
  // Adds this thread's share of a task's products into the launch's sum (the blocks of a
  // launch may run side by side).
  void addDots(AdasumDots* to, const AdasumDots& mine) const {
    atomicAddF64(&to->ab, mine.ab);
    atomicAddF64(&to->aa, mine.aa);
    atomicAddF64(&to->bb, mine.bb);
  }
};

template <class T, class Block>
RINGCC_INLINE void adasumItem(const AdasumArgs& args, const AdasumTask& task, uint64_t lo,
                              uint64_t n, Block& block) {
  const T* a = reinterpret_cast<const T*>(task.a) + lo;
  const T* b = reinterpret_cast<const T*>(task.b) + lo;
  if (args.step == kAdasumProducts) {
    AdasumDots mine;
    if (block.threads() == 1)
      adasumAccumulate(a, b, n, &mine);
    else
      adasumAccumulateStrided(a, b, n, block.thread(), block.threads(), &mine);
    block.addDots(reinterpret_cast<AdasumDots*>(args.dots) + task.segment, mine);
    return;
  }
  const AdasumCoefficients c =
      reinterpret_cast<const AdasumCoefficients*>(args.coefficients)[task.segment];
  T* out = reinterpret_cast<T*>(task.out) + lo;
  if (block.threads() == 1)
    adasumCombine(out, a, b, n, c);
  else
    adasumCombineStrided(out, a, b, n, block.thread(), block.threads(), c);
}

// The products or the combination: this block's work items, in order.
template <class T, class Block>
RINGCC_INLINE void adasumItems(const AdasumArgs& args, Block& block) {
  uint64_t item = 0;  // the first item of task t
  for (uint32_t t = 0; t < args.ntasks; ++t) {
    const AdasumTask& task = args.tasks[t];
    const uint64_t items = (task.n + kAdasumChunk - 1) / kAdasumChunk;
    // This block's first item of the task: the smallest i >= item with i = index mod blocks.
    const uint64_t skip = (block.index() + block.blocks() - item % block.blocks()) % block.blocks();
    for (uint64_t i = skip; i < items; i += block.blocks()) {
      const uint64_t lo = i * kAdasumChunk;
      const uint64_t n = task.n - lo < kAdasumChunk ? task.n - lo : kAdasumChunk;
      adasumItem<T>(args, task, lo, n, block);
    }
    item += items;
  }
}

// Coefficients of segments index * threads + thread, then + blocks * threads, ...
template <class Block>
RINGCC_INLINE void adasumCoefficientsStep(const AdasumArgs& args, Block& block) {
  const AdasumDots* table = reinterpret_cast<const AdasumDots*>(args.dots);
  AdasumCoefficients* out = reinterpret_cast<AdasumCoefficients*>(args.coefficients);
  const uint64_t stride = static_cast<uint64_t>(block.blocks()) * block.threads();
  for (uint64_t k = static_cast<uint64_t>(block.index()) * block.threads() + block.thread();
       k < args.segments; k += stride) {
    AdasumDots sum;
    for (uint32_t r = args.firstRow; r < args.firstRow + args.rows; ++r) {
      const AdasumDots& d = table[static_cast<uint64_t>(r) * args.segments + k];
      sum.ab += d.ab;
      sum.aa += d.aa;
      sum.bb += d.bb;
    }
    out[k] = adasumCoefficients(sum);
  }
}

template <class Block>
RINGCC_INLINE void adasumRunBlock(const AdasumArgs& args, Block& block) {
  if (args.step == kAdasumCoefficients) return adasumCoefficientsStep(args, block);
  switch (args.datatype) {
    case ncclFloat16: return adasumItems<Half>(args, block);
    case ncclBfloat16: return adasumItems<BFloat16>(args, block);
    case ncclFloat32: return adasumItems<float>(args, block);
    case ncclFloat64: return adasumItems<double>(args, block);
    default: return;  // refused at the call (src/api/ext_api.cc)
  }
}

}  // namespace ringcc
