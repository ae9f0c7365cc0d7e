// Storage types and float conversions for every ncclDataType_t (device-clean).
//
// half, bfloat16 and the two fp8 formats are stored as raw bits and converted to and from
// float in software, so the host executor and the kernels round identically on any machine.
// Every float -> narrow conversion rounds to nearest, ties to even, and treats the special
// values the way CUDA's own types do (cuda_fp16/cuda_bf16/cuda_fp8, which NCCL uses):
//
//   format    bias  max finite        float -> format: overflow     Inf        NaN
//   half       15   65504    (0x7bff)  >= 65520 -> +-Inf (0x7c00)    +-Inf      0x7fff
//   bfloat16  127   3.39e38  (0x7f7f)  rounds to +-Inf               +-Inf      0x7fff
//   fp8 e4m3    7   448      (0x7e)    > 464 -> +-448 (saturate)     +-448      0x7f
//   fp8 e5m2   15   57344    (0x7b)    >= 61440 -> +-57344 (saturate) +-57344   0x7f
//
// fp8: NCCL builds its fp8 values with __nv_fp8_e4m3(x) / __nv_fp8_e5m2(x), whose
// conversion is __nv_cvt_*_to_fp8(x, __NV_SATFINITE, ...): a finite result beyond the
// format's range, and Inf itself, saturate to the largest finite value of the same sign;
// a NaN becomes the canonical NaN 0x7f (sign dropped). e4m3 has no Inf at all (S.1111.111
// is its only NaN, S.1111.110 = 448 its largest value); e5m2 keeps IEEE's encoding
// (exponent 31: mantissa 0 is Inf, else NaN), so an e5m2 Inf survives a plain copy but not
// a reduction, exactly as in NCCL, which computes fp8 arithmetic in half and converts back
// with saturation. Ties at the saturation edge follow round-to-nearest-even first: 464 lies
// halfway between 448 (even) and the NaN slot, so it becomes 448.
// half/bfloat16 (__float2half_rn, __float2bfloat16_rn) are plain IEEE: overflow gives Inf,
// Inf stays Inf, NaN becomes the canonical quiet NaN 0x7fff.
// Narrow -> float is exact; NaNs come back as float NaNs (their sign and payload are not
// promised), Infs as Infs.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/device_clean.h"
#include "nccl.h"
#ifndef RINGCC_NCCL_H  // nvcc has /usr/local/cuda/include (and NVIDIA's nccl.h) on its path
#error "NVIDIA's nccl.h was found before ringcc's include/nccl.h"
#endif

namespace ringcc {

// Raw storage of the formats C++ has no type for. Trivially copyable, sizeof == format size.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
};

// Bytes per element, 0 for a value that is not a datatype.
RINGCC_HOST_DEVICE constexpr size_t dataTypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// True for the 12 datatypes of nccl.h (the API checks user input with this).
RINGCC_HOST_DEVICE constexpr bool dataTypeValid(int type) {
  return type >= 0 && type < static_cast<int>(ncclNumTypes);
}

// True for the datatypes whose arithmetic is floating point.
RINGCC_HOST_DEVICE constexpr bool dataTypeIsFloat(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 ||
         type == ncclBfloat16 || type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

// ---- bit casts ---------------------------------------------------------------------------

RINGCC_INLINE uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

RINGCC_INLINE float floatFromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

RINGCC_INLINE uint64_t doubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  __builtin_memcpy(&u, &d, sizeof u);
  return u;
#endif
}

RINGCC_INLINE double doubleFromBits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  __builtin_memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// The conversions below are branch-free (selects, not jumps) so that host loops over them
// vectorize. Two float tricks carry them, both exact in round-to-nearest-even:
//  - narrow -> float for a subnormal: build 2^emin * (1 + m) by bits and subtract 2^emin;
//  - float -> narrow for a result below the smallest normal: add a power of two whose ulp is
//    the format's smallest subnormal; the float adder rounds (ties to even) exactly as the
//    format must, and the low bits of the sum count subnormal units.
// Flush-to-zero cannot change a result: the floats these steps produce are normal, and a
// float subnormal input is far below every narrow format's smallest subnormal.
// Checked bit for bit against CUDA 13's own host conversions (__float2half_rn,
// __float2bfloat16_rn, __nv_cvt_float_to_fp8 with __NV_SATFINITE, and back) for all 2^32
// floats when written; tests/unit/test_reduce_copy.cc keeps an independent reference.
namespace detail {

// c ? a : b by masks: compilers do not turn it back into a branch, so the float operations
// feeding it are not sunk into conditional code that GCC then will not if-convert (a float
// add may trap as far as it knows, so it will not execute one speculatively).
RINGCC_INLINE uint32_t selectBits(bool c, uint32_t a, uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<uint32_t>(c)));
}

// Rounds a float magnitude `u` (bits without sign) to a narrow format with `kMant`
// mantissa bits, exponent bias `kBias` and smallest subnormal 2^kMinSub; the format's bits
// without sign. Valid for finite results up to the format's largest finite value.
template <int kMant, int kBias, int kMinSub>
RINGCC_INLINE uint32_t roundToNarrow(uint32_t u) {
  constexpr uint32_t kDrop = 23 - kMant;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - kBias) << 23;  // 2^(1-bias)
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  // Normal results: drop kDrop mantissa bits, ties to even, then rebias the exponent.
  uint32_t normal = (u - kRebias + ((1u << (kDrop - 1)) - 1) + ((u >> kDrop) & 1u)) >> kDrop;
  // Subnormal results: 2^(kMinSub + 23) has an ulp of 2^kMinSub.
  constexpr uint32_t kMagic = static_cast<uint32_t>(127 + kMinSub + 23) << 23;
  uint32_t sub = floatBits(floatFromBits(u) + floatFromBits(kMagic)) - kMagic;
  return selectBits(u < kMinNormal, sub, normal);
}

// A narrow format's magnitude bits (sign removed), aligned so that its exponent field ends
// at float's bit 23 (shifted left by 23 - mantissa bits), as float bits. `expMask` is the
// format's exponent field at that position; exponent all-ones is left to the caller.
template <int kBias>
RINGCC_INLINE uint32_t widenToFloat(uint32_t aligned, uint32_t expMask) {
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - kBias) << 23;
  uint32_t normal = aligned + kRebias;
  // Subnormal or zero: (2^emin + m ulps) - 2^emin.
  uint32_t sub = floatBits(floatFromBits(aligned + kMinNormal) - floatFromBits(kMinNormal));
  return selectBits((aligned & expMask) == 0, sub, normal);
}

}  // namespace detail

// ---- half (IEEE binary16) ----------------------------------------------------------------

RINGCC_INLINE float halfToFloat(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t aligned = static_cast<uint32_t>(h.bits & 0x7fffu) << 13;
  uint32_t r = detail::widenToFloat<15>(aligned, 0x0f800000u);
  // Exponent 31: Inf or NaN, kept as such (payload shifted along).
  r = detail::selectBits((aligned & 0x0f800000u) == 0x0f800000u, aligned | 0x7f800000u, r);
  return floatFromBits(sign | r);
}

RINGCC_INLINE Half floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t u = x & 0x7fffffffu;
  uint32_t r = detail::roundToNarrow<10, 15, -24>(u);
  r = detail::selectBits(u >= 0x477ff000u, 0x7c00u, r);  // >= 65520, halfway to 2^16: Inf
  return Half{static_cast<uint16_t>(detail::selectBits(u > 0x7f800000u, 0x7fffu, sign | r))};
}

// ---- bfloat16 ----------------------------------------------------------------------------

RINGCC_INLINE float bf16ToFloat(BFloat16 b) {
  return floatFromBits(static_cast<uint32_t>(b.bits) << 16);
}

RINGCC_INLINE BFloat16 floatToBf16(float f) {
  uint32_t x = floatBits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // overflow carries into Inf, as IEEE
  return BFloat16{
      static_cast<uint16_t>(detail::selectBits((x & 0x7fffffffu) > 0x7f800000u, 0x7fffu, r))};
}

// ---- fp8 e4m3 (no Inf; NaN = S.1111.111) -------------------------------------------------

RINGCC_INLINE float fp8e4m3ToFloat(Fp8E4M3 v) {
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x80u) << 24;
  uint32_t aligned = static_cast<uint32_t>(v.bits & 0x7fu) << 20;
  uint32_t r = detail::widenToFloat<7>(aligned, 0x07800000u);
  r = detail::selectBits((v.bits & 0x7fu) == 0x7fu, 0x7fc00000u, r);
  return floatFromBits(sign | r);
}

RINGCC_INLINE Fp8E4M3 floatToFp8e4m3(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t u = x & 0x7fffffffu;
  uint32_t r = detail::roundToNarrow<3, 7, -9>(u);
  r = detail::selectBits(u > 0x43e80000u, 0x7eu, r);  // beyond 464 = 448 + ulp/2, Inf too: 448
  return Fp8E4M3{static_cast<uint8_t>(detail::selectBits(u > 0x7f800000u, 0x7fu, sign | r))};
}

// ---- fp8 e5m2 (IEEE-like: Inf = S.11111.00, NaN = S.11111.xx) ----------------------------

RINGCC_INLINE float fp8e5m2ToFloat(Fp8E5M2 v) {
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x80u) << 24;
  uint32_t aligned = static_cast<uint32_t>(v.bits & 0x7fu) << 21;
  uint32_t r = detail::widenToFloat<15>(aligned, 0x0f800000u);
  r = detail::selectBits((aligned & 0x0f800000u) == 0x0f800000u, aligned | 0x7f800000u, r);
  return floatFromBits(sign | r);
}

RINGCC_INLINE Fp8E5M2 floatToFp8e5m2(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t u = x & 0x7fffffffu;
  uint32_t r = detail::roundToNarrow<2, 15, -16>(u);
  r = detail::selectBits(u >= 0x47700000u, 0x7bu, r);  // >= 61440 = 57344 + ulp/2, Inf too
  return Fp8E5M2{static_cast<uint8_t>(detail::selectBits(u > 0x7f800000u, 0x7fu, sign | r))};
}

// ---- element traits ----------------------------------------------------------------------
//
// DataTypeTraits<T>: Compute is the type arithmetic happens in (float for the narrow
// formats, T itself otherwise), Bits the plain scalar loops move (the raw bits for the
// narrow formats, so compilers see integer loads and stores, not struct copies); load and
// store convert between them, store rounding once.

template <class T>
struct DataTypeTraits {
  using Compute = T;
  using Bits = T;
  RINGCC_INLINE static Compute load(Bits v) { return v; }
  RINGCC_INLINE static Bits store(Compute v) { return v; }
};

template <>
struct DataTypeTraits<Half> {
  using Compute = float;
  using Bits = uint16_t;
  RINGCC_INLINE static float load(uint16_t v) { return halfToFloat(Half{v}); }
  RINGCC_INLINE static uint16_t store(float v) { return floatToHalf(v).bits; }
};

template <>
struct DataTypeTraits<BFloat16> {
  using Compute = float;
  using Bits = uint16_t;
  RINGCC_INLINE static float load(uint16_t v) { return bf16ToFloat(BFloat16{v}); }
  RINGCC_INLINE static uint16_t store(float v) { return floatToBf16(v).bits; }
};

template <>
struct DataTypeTraits<Fp8E4M3> {
  using Compute = float;
  using Bits = uint8_t;
  RINGCC_INLINE static float load(uint8_t v) { return fp8e4m3ToFloat(Fp8E4M3{v}); }
  RINGCC_INLINE static uint8_t store(float v) { return floatToFp8e4m3(v).bits; }
};

template <>
struct DataTypeTraits<Fp8E5M2> {
  using Compute = float;
  using Bits = uint8_t;
  RINGCC_INLINE static float load(uint8_t v) { return fp8e5m2ToFloat(Fp8E5M2{v}); }
  RINGCC_INLINE static uint8_t store(float v) { return floatToFp8e5m2(v).bits; }
};

// The storage type of each ncclDataType_t, for code that dispatches at compile time.
template <ncclDataType_t kType>
struct StorageOf;
// clang-format off
template <> struct StorageOf<ncclInt8> { using Type = int8_t; };
template <> struct StorageOf<ncclUint8> { using Type = uint8_t; };
template <> struct StorageOf<ncclInt32> { using Type = int32_t; };
template <> struct StorageOf<ncclUint32> { using Type = uint32_t; };
template <> struct StorageOf<ncclInt64> { using Type = int64_t; };
template <> struct StorageOf<ncclUint64> { using Type = uint64_t; };
template <> struct StorageOf<ncclFloat16> { using Type = Half; };
template <> struct StorageOf<ncclFloat32> { using Type = float; };
template <> struct StorageOf<ncclFloat64> { using Type = double; };
template <> struct StorageOf<ncclBfloat16> { using Type = BFloat16; };
template <> struct StorageOf<ncclFloat8e4m3> { using Type = Fp8E4M3; };
template <> struct StorageOf<ncclFloat8e5m2> { using Type = Fp8E5M2; };
// clang-format on

}  // namespace ringcc
