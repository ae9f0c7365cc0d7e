// What a reduction does to elements, as one trivially copyable value (device-clean).
//
// A RedOp is built once on the host per collective (makeRedOp for the five built-in ops,
// makePreMulSum for ops from ncclRedOpCreatePreMulSum) and handed by value to the executor
// and the kernels. The element arithmetic lives in kernels/reduce_copy.h; this file only
// says which arithmetic. The split into three stages follows NCCL:
//
//   pre(x)     applied to each rank's own input once, as it enters the reduction:
//              x * scalar for PreMulSum (rounded to the datatype), identity otherwise
//   reduce     sum, prod, max or min of two values (PreMulSum reduces by sum)
//   post(x)    applied once to the final result: x / nranks for integer Avg, else identity
//
// ncclAvg therefore has no kind of its own: for integer types it is Sum with
// postDivisor = nranks (sum first, divide the total, truncating toward zero, as NCCL's
// FuncSumPostDiv does), and for floating types it is PreMulSum with scalar = 1/nranks
// rounded to the datatype (NCCL's hostToDevRedOp does the same, so half Avg over 3 ranks
// multiplies by half(1/3) = 0x3555).
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"
#include "kernels/dtypes.h"
#include "nccl.h"

namespace ringcc {

enum class RedOpKind : uint8_t { Sum, Prod, Max, Min, PreMulSum };

struct RedOp {
  RedOpKind kind;
  ncclDataType_t type;    // the datatype the scalar below is encoded in
  uint64_t scalarBits;    // PreMulSum: the scalar's bytes (redOpScalarBits of a `type` value)
  const void* scalarPtr;  // PreMulSum with ncclScalarDevice: read at each use, wins if set
  uint64_t postDivisor;   // integer Avg: divide the final result by this; 0 or 1: no post step
};
static_assert(__is_trivially_copyable(RedOp), "RedOp travels by value to kernels");

// A value's bytes as RedOp::scalarBits holds them (the first sizeof(T) bytes of the uint64,
// the rest zero; on little-endian machines: the low bits).
template <class T>
RINGCC_INLINE uint64_t redOpScalarBits(T value) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "scalar wider than 64 bits");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &value, sizeof(T));
  return bits;
}

// Host side: the RedOp for a built-in op (ncclSum .. ncclAvg) over `nranks` ranks.
// The API layer has checked `builtin`, `type` and `nranks` (>= 1); anything else yields a Sum.
inline RedOp makeRedOp(ncclRedOp_t builtin, ncclDataType_t type, int nranks) {
  RedOp op{RedOpKind::Sum, type, 0, nullptr, 0};
  switch (builtin) {
    case ncclProd:
      op.kind = RedOpKind::Prod;
      break;
    case ncclMax:
      op.kind = RedOpKind::Max;
      break;
    case ncclMin:
      op.kind = RedOpKind::Min;
      break;
    case ncclAvg: {
      uint64_t n = nranks > 0 ? static_cast<uint64_t>(nranks) : 1;
      if (!dataTypeIsFloat(type)) {
        op.postDivisor = n;
        break;
      }
      op.kind = RedOpKind::PreMulSum;
      // As NCCL: 1/n in double for double, else float(1/n) rounded to the datatype.
      double inv = 1.0 / static_cast<double>(n);
      float invf = static_cast<float>(inv);
      switch (type) {
        case ncclFloat64:
          op.scalarBits = redOpScalarBits(inv);
          break;
        case ncclFloat32:
          op.scalarBits = redOpScalarBits(invf);
          break;
        case ncclFloat16:
          op.scalarBits = redOpScalarBits(floatToHalf(invf));
          break;
        case ncclBfloat16:
          op.scalarBits = redOpScalarBits(floatToBf16(invf));
          break;
        case ncclFloat8e4m3:
          op.scalarBits = redOpScalarBits(floatToFp8e4m3(invf));
          break;
        case ncclFloat8e5m2:
          op.scalarBits = redOpScalarBits(floatToFp8e5m2(invf));
          break;
        default:
          break;
      }
      break;
    }
    default:  // ncclSum, and anything the API layer should have rejected
      break;
  }
  return op;
}

// Host side: the RedOp of ncclRedOpCreatePreMulSum. With `deviceResident` the scalar is read
// through the pointer whenever the op runs (ncclScalarDevice: the caller keeps it alive);
// otherwise its dataTypeSize(type) bytes are copied now (ncclScalarHostImmediate).
inline RedOp makePreMulSum(ncclDataType_t type, const void* scalar, bool deviceResident) {
  RedOp op{RedOpKind::PreMulSum, type, 0, nullptr, 0};
  if (deviceResident) {
    op.scalarPtr = scalar;
  } else if (scalar != nullptr) {
    __builtin_memcpy(&op.scalarBits, scalar, dataTypeSize(type));
  }
  return op;
}

// The PreMulSum scalar as a value of storage type T (T must match op.type).
template <class T>
RINGCC_INLINE T redOpScalar(const RedOp& op) {
  T s;
  if (op.scalarPtr != nullptr) {
    s = *static_cast<const T*>(op.scalarPtr);
  } else {
    __builtin_memcpy(&s, &op.scalarBits, sizeof(T));
  }
  return s;
}

}  // namespace ringcc
