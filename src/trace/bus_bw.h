// nccl-tests' bandwidth conventions, in one place for the perf tools (bench/perf) and the
// trace records (src/trace/trace.cc), so both report the same bus bandwidth for one run.
//
//   algbw = bytes / time, bytes as nccl-tests counts them: count x type size, times nranks for
//           the collectives whose count is one rank's share (all-gather, reduce-scatter,
//           all-to-all, gather, scatter);
//   busbw = algbw x factor: 2(n-1)/n for all-reduce, (n-1)/n for the shared ones, 1 otherwise.
// Header only and free of the library's types: the perf tools do not link the library.
#pragma once

#include <cstdint>

namespace ringcc {

enum class BwShape : uint8_t {
  AllReduce,  // every rank sends and receives the whole buffer twice over the ring
  Shares,     // count is one rank's share of an n-share buffer
  Plain,      // broadcast, reduce, send/recv: the buffer once
};

inline double busBwFactor(BwShape shape, int nranks) {
  const double n = nranks;
  switch (shape) {
    case BwShape::AllReduce:
      return 2.0 * (n - 1) / n;
    case BwShape::Shares:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

// The bytes algbw divides by time.
inline double bwBytes(BwShape shape, double countBytes, int nranks) {
  return shape == BwShape::Shares ? countBytes * nranks : countBytes;
}

}  // namespace ringcc
