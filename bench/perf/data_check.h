// The data check: per-rank inputs whose collective result is exact whatever order the library
// combines them in, the expected result, and the count of wrong elements.
//
// Every input is a small non-negative integer (or, for prod, 1 or 2) chosen by a hash of
// (seed, rank, index), bounded so that every partial sum or product over all ranks is exactly
// representable in the element type: sums stay below the type's largest exact integer divided
// by the rank count (when that leaves nothing, one rank per element contributes 1 and the rest
// 0), products have at most log2(max) factors of 2. So sum, prod, max, min and mulsum results
// are compared bit for bit. avg is exact for integers (truncating division) and for floats
// when the rank count is a power of two; otherwise a float avg may differ from sum/n by a
// rounding of 1/n, and is accepted within nranks ulps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/perf/coll_spec.h"
#include "bench/perf/datatypes.h"
#include "nccl.h"

namespace ringcc::bench {

struct CheckSetup {
  CollKind kind = CollKind::AllReduce;
  ncclDataType_t type = ncclFloat32;
  OpKind op = OpKind::Sum;  // ignored by collectives without an operator
  int root = 0;
  int nranks = 1;
  int rank = 0;
  uint64_t seed = 0;
  CollCounts counts;
};

// Rank `rank`'s input value at index `index` of its send buffer, before encoding.
double inputValue(const CheckSetup& s, int rank, size_t index);
// The per-rank scalar the mulsum operator multiplies rank `rank`'s input by.
double premulScalar(int rank);

// Writes this rank's input (counts.sendCount elements) into `input`. Broadcast writes only on
// the root.
void fillInput(const CheckSetup& s, void* input);

// Writes the expected content of the checked region (counts.recvCount elements) into
// `expected`. `regionBefore` is that region's content just before the operation: a reduce
// leaves non-root outputs untouched, so they must still hold it.
void fillExpected(const CheckSetup& s, void* expected, const void* regionBefore);

// How far an element may be from `expected` and still count as right (0: bit-exact).
double checkTolerance(const CheckSetup& s);

// Elements of `got` that are not `expected` (both `count` elements of `type`).
int64_t countWrong(ncclDataType_t type, const void* got, const void* expected, size_t count,
                   double tolerance);

// nccl-tests does not check in-place all-to-all and send/recv (their in-place form overwrites
// inputs peers still read); their in-place #wrong prints N/A.
bool checksPlacement(CollKind kind, bool inPlace);

}  // namespace ringcc::bench
