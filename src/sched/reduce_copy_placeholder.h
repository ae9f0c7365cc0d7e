// TEMPORARY stand-in for kernels/red_op.h + kernels/reduce_copy.h, written concurrently by
// another branch. Same signatures; only what the schedule tests need (integer and float types,
// sum/prod/max/min/avg, no pre-multiplied sum). kernels/prims.h includes this file only when
// kernels/reduce_copy.h does not exist; delete it once the real one is on main.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/device_clean.h"
#include "nccl.h"

namespace ringcc {

struct RedOp {
  ncclRedOp_t op;
  ncclDataType_t type;
  int nranks;
};

inline RedOp makeRedOp(ncclRedOp_t op, ncclDataType_t type, int nranks) {
  return RedOp{op, type, nranks};
}

namespace placeholder {

template <typename T>
RINGCC_INLINE T combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclProd: return (T)(a * b);
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return (T)(a + b);
  }
}

template <typename T>
RINGCC_HOST_DEVICE void reduceCopyT(const RedOp& op, const T* local, const T* peer, T* dst0,
                                    T* dst1, size_t count, bool applyPost) {
  constexpr bool kFloat = T(0.5) != T(0);
  for (size_t k = 0; k < count; k++) {
    T v;
    if (local) {
      v = local[k];
      if (kFloat && op.op == ncclAvg) v = (T)(v / (T)op.nranks);
      if (peer) v = combine<T>(op.op, v, peer[k]);
    } else {
      v = peer[k];
    }
    if (applyPost && !kFloat && op.op == ncclAvg) v = (T)(v / (T)op.nranks);
    if (dst0) dst0[k] = v;
    if (dst1) dst1[k] = v;
  }
}

}  // namespace placeholder

RINGCC_HOST_DEVICE inline void reduceCopy(ncclDataType_t type, const RedOp& op, const void* local,
                                          const void* peer, void* dst0, void* dst1, size_t count,
                                          bool applyPost) {
#define RINGCC_PLACEHOLDER_CASE(enumv, T)                                                      \
  case enumv:                                                                                  \
    placeholder::reduceCopyT<T>(op, (const T*)local, (const T*)peer, (T*)dst0, (T*)dst1, count, \
                                applyPost);                                                    \
    return;
  switch (type) {
    RINGCC_PLACEHOLDER_CASE(ncclInt8, int8_t)
    RINGCC_PLACEHOLDER_CASE(ncclUint8, uint8_t)
    RINGCC_PLACEHOLDER_CASE(ncclInt32, int32_t)
    RINGCC_PLACEHOLDER_CASE(ncclUint32, uint32_t)
    RINGCC_PLACEHOLDER_CASE(ncclInt64, int64_t)
    RINGCC_PLACEHOLDER_CASE(ncclUint64, uint64_t)
    RINGCC_PLACEHOLDER_CASE(ncclFloat32, float)
    RINGCC_PLACEHOLDER_CASE(ncclFloat64, double)
    default: return;
  }
#undef RINGCC_PLACEHOLDER_CASE
}

}  // namespace ringcc
