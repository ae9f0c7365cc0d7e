// The text the perf tools print, column for column as nccl-tests prints it, so scripts that
// parse nccl-tests output parse ours.
//
//   #                                                              out-of-place                       in-place
//   #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
//       33554432       8388608     float     sum      -1   1234.5   27.18   40.77       0   1230.1   27.28   40.91       0
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 40.84
//
// Pure string functions; the driver decides who prints (rank 0's first thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringcc::bench {

// nccl-tests' number format: `value` right-aligned in `width` characters with 2, 1 or 0
// decimals as it fits, scientific notation when even the integer part does not.
std::string formatFloat(double value, int width);

// The three header lines of the results table (timeLabel "time" or "cputime").
std::string tableHeader(const char* timeLabel);

// First columns of a row: size, count, type, redop, root.
std::string rowPreamble(size_t bytes, size_t count, const char* type, const char* op, int root);

// One placement's columns (out-of-place, then in-place): time, algbw, busbw, #wrong ("N/A"
// when that placement is not checked).
std::string rowResult(double timeUs, double algBw, double busBw, bool reportErrors,
                      int64_t wrong);

// The closing lines: out-of-bounds count with OK/FAILED, the average bus bandwidth (with
// OK/FAILED against minBw*0.9 when minBw >= 0), and the concluding line.
std::string footer(int errors, double avgBusBw, double minBw, const char* program);

}  // namespace ringcc::bench
