// What each benchmarked collective moves: buffer element counts, in-place offsets, and the
// algorithm and bus bandwidth formulas, exactly as nccl-tests defines them.
//
// `count` below is the size the sweep asks for, in elements. Collectives that split a buffer
// among ranks (all-gather, reduce-scatter, all-to-all) round each rank's part down to a multiple
// of 16 bytes, so the printed size can be smaller than the requested one.
//
// Bus bandwidth turns the algorithm bandwidth (bytes of the user buffer / time) into the rate at
// which the busiest link moves data in an optimal ring algorithm, so numbers of different
// collectives and rank counts compare against the hardware's peak:
//   all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n, all-to-all (n-1)/n,
//   broadcast, reduce, send/recv 1.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ringcc::bench {

enum class CollKind { AllReduce, AllGather, Broadcast, Reduce, ReduceScatter, AlltoAll, SendRecv };

struct CollSpec {
  CollKind kind;
  const char* name;     // "AllReduce", as nccl-tests names it
  const char* program;  // "all_reduce_perf"
  bool hasOp;           // takes a reduction operator (-o)
  bool hasRoot;         // takes a root (-r)
};
const CollSpec& collSpec(CollKind kind);
std::optional<CollKind> collByProgram(std::string_view program);

struct CollCounts {
  size_t sendCount = 0;          // elements each rank sends (its input buffer)
  size_t recvCount = 0;          // elements each rank receives (the checked region)
  size_t paramCount = 0;         // the count argument of the NCCL call
  size_t sendInplaceOffset = 0;  // in place, input = recvbuff + sendInplaceOffset * rank
  size_t recvInplaceOffset = 0;  // in place, output = recvbuff + recvInplaceOffset * rank
};
CollCounts collCounts(CollKind kind, size_t count, size_t eltSize, int nranks);

struct Bandwidth {
  double algBw = 0;  // GB/s (1e9 bytes)
  double busBw = 0;
};
double busBwFactor(CollKind kind, int nranks);
// `paramCount` is CollCounts::paramCount; `seconds` the time of one operation.
Bandwidth bandwidth(CollKind kind, size_t paramCount, size_t typeSize, double seconds, int nranks);

}  // namespace ringcc::bench
