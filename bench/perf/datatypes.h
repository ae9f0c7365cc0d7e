// Element types and reduction operators as the perf tools name them, and exact host-side
// conversion between a type's bytes and a double.
//
// Names follow nccl-tests (-d int8 ... f8e5m2, -o sum ... mulsum). encodeValue rounds to nearest
// even, so every value the data check uses (small integers and powers of two) round-trips
// exactly in every type, half, bfloat16 and both fp8 formats included.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "nccl.h"

namespace ringcc::bench {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;      // as nccl-tests prints it
  size_t size;           // bytes per element
  bool isFloat;
  double maxExactInt;    // every integer in [0, maxExactInt] is representable
  double maxPowerOfTwo;  // largest power of two the type holds
};

// nccl-tests' order: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3
// f8e5m2.
std::span<const TypeInfo> allTypes();
const TypeInfo& typeInfo(ncclDataType_t type);
const TypeInfo* typeByName(std::string_view name);

// Reduction operators; MulSum is ncclRedOpCreatePreMulSum with a per-rank scalar.
enum class OpKind { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, MulSum = 5 };
constexpr int kNumOps = 6;
const char* opName(OpKind op);
std::optional<OpKind> opByName(std::string_view name);

// Writes `value` as one element of `type` (round to nearest even; out of range saturates for
// integers and becomes inf/NaN for floats as the format has them).
void encodeValue(ncclDataType_t type, double value, void* dst);
// Reads one element of `type`.
double decodeValue(ncclDataType_t type, const void* src);
// Distance from `value` (a representable magnitude of `type`) to the next larger one; 1 for
// integers.
double ulpAt(ncclDataType_t type, double value);

}  // namespace ringcc::bench
