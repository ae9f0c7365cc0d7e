// The one reduce-copy of ringcc: every datatype, every op, host and device (device-clean).
//
//   reduceCopy(type, op, local, peer, dst0, dst1, count, applyPost)
//
// For each element k < count:
//
//   v = pre(local[k])  (+)  peer[k]        (+) is op's sum/prod/max/min; a missing source
//   v = post(v)        if applyPost        is left out, so one source makes a copy
//   dst0[k] = v, dst1[k] = v               for the destinations that are not null
//
// `pre` (PreMulSum's scalar, float Avg's 1/nranks) is applied only to `local`: each rank's
// own input enters a reduction exactly once, through `local`, while `peer` carries partial
// results that were pre-processed upstream. `post` (integer Avg's division by nranks) is for
// the step that produces the final value; the caller says which step that is. With one
// source and neither pre nor post the bits are moved untouched (a NaN payload or an e5m2
// Inf survives a copy, as in NCCL, where copies are byte moves).
//
// Arithmetic: integers wrap (two's complement) and integer Avg truncates toward zero;
// float and double are IEEE; half, bfloat16 and fp8 are computed in float and rounded back
// (kernels/dtypes.h) once per stage: PreMulSum's product is rounded to the datatype before
// it is reduced, like NCCL's pre-op, and every reduction step rounds its result. For half
// and bfloat16 this is bit-identical to native half arithmetic (__hadd, __hmul), for fp8 to
// NCCL's half-based arithmetic: float has more than twice their precision plus two bits, so
// rounding twice equals rounding once. Max and min ignore a NaN operand (fmaxf semantics,
// as NCCL on floats); both NaN gives NaN; -0 counts as less than +0, so the result does not
// depend on operand order.
//
// Aliasing: a destination may be exactly `local` (in place); otherwise destinations and
// sources must not overlap, and dst0 and dst1 must not overlap each other unless equal.
//
// Threads: reduceCopy walks the whole range in the calling thread (the host executor calls
// it per slice). reduceCopyStrided does the elements first, first + step, ... < count only,
// so threads can split a slice by calling it with (thread index, thread count); it is the
// same arithmetic, element by element. The kernels split slices with the packed form below.
//
// Packs: a GPU reaches its memory bandwidth only with 16-byte loads and stores, neighbouring
// threads touching neighbouring addresses. reduceCopyPacked(..., worker, nWorkers) cuts the
// range at the 16-byte boundaries of the addresses (packSplit) and deals the pieces out:
//
//              head       pack 0        pack 1             pack P-1      tail
//   range    [h h h][. . . . . . . .][. . . . . . . .] ... [. . . . . . . .][t t]
//   worker    0 1 2         0                1              (P-1) % n        0 1
//            ^ m bytes past a 16-byte boundary     (n workers; head and tail element i: i % n)
//
// A source pack is loaded whole, its 16 / sizeof(T) elements go through the element code
// above (same pre, reduce, post and rounding; a copy moves the pack's bits), and the result
// is stored whole to each destination. The head and tail take the element walk. Packs need
// every non-null pointer at the same distance m from a boundary, a whole number of elements;
// otherwise the whole range takes the element walk, still dealt out element by element. So
// every element is the one reduceCopy computes, bit for bit, for any alignment and count, and
// the aliasing rules above hold unchanged. A worker loads kPackUnroll packs of each source
// before it stores any (reducePacksGrouped), so that several loads are in flight per thread.
// The kernels use the packed form; the host keeps reduceCopy, whose loops GCC vectorizes
// itself, and runs the packed form in the tests (and in the SIMT test, tests/support/simt.h).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/device_clean.h"
#include "kernels/dtypes.h"
#include "kernels/red_op.h"
#include "nccl.h"

namespace ringcc {

// Sixteen bytes moved as one access: the unit of the packed walk and of a GPU's widest load.
struct alignas(16) Pack16 {
  uint64_t half[2];
};
static_assert(sizeof(Pack16) == 16 && alignof(Pack16) == 16, "a pack is one 16-byte access");

// How reduceCopyPacked cuts a range of `count` elements of `elemSize` bytes at these pointers
// (null ones ignored): `head` elements up to the first 16-byte boundary, then `packs` whole
// packs, then the remaining count - head - packs * (16 / elemSize) elements. Without packs
// (pointers at different distances from a boundary, or not a whole number of elements from
// one, or elemSize not dividing 16) head is count and packs 0.
struct PackSplit {
  size_t head;
  size_t packs;
};

RINGCC_HOST_DEVICE inline PackSplit packSplit(size_t elemSize, size_t count, const void* local,
                                              const void* peer, const void* dst0,
                                              const void* dst1) {
  const void* const ptrs[4] = {local, peer, dst0, dst1};
  constexpr uintptr_t kMask = sizeof(Pack16) - 1;
  uintptr_t mis = 0;
  bool any = false, same = true;
  for (const void* p : ptrs) {
    if (p == nullptr) continue;
    const uintptr_t m = reinterpret_cast<uintptr_t>(p) & kMask;
    same = same && (!any || m == mis);
    mis = m;
    any = true;
  }
  if (!same || elemSize == 0 || sizeof(Pack16) % elemSize != 0 || mis % elemSize != 0) {
    return PackSplit{count, 0};
  }
  size_t head = ((sizeof(Pack16) - mis) & kMask) / elemSize;
  if (head > count) head = count;
  return PackSplit{head, (count - head) / (sizeof(Pack16) / elemSize)};
}

namespace detail {

// ---- integer and float element arithmetic ------------------------------------------------

// Integers: U is the unsigned twin (wrapping arithmetic), Div the type Avg divides in (wide
// enough for any nranks, and signed for signed types so that it truncates toward zero).
template <class T>
struct IntInfo {
  static constexpr bool kIsInt = false;
};
template <class UT, class DivT>
struct IntInfoOf {
  static constexpr bool kIsInt = true;
  using U = UT;
  using Div = DivT;
};
// clang-format off
template <> struct IntInfo<int8_t> : IntInfoOf<uint8_t, int32_t> {};
template <> struct IntInfo<uint8_t> : IntInfoOf<uint8_t, uint32_t> {};
template <> struct IntInfo<int32_t> : IntInfoOf<uint32_t, int32_t> {};
template <> struct IntInfo<uint32_t> : IntInfoOf<uint32_t, uint32_t> {};
template <> struct IntInfo<int64_t> : IntInfoOf<uint64_t, int64_t> {};
template <> struct IntInfo<uint64_t> : IntInfoOf<uint64_t, uint64_t> {};
// clang-format on

// Wrapping add and multiply: signed integers go through their unsigned twin (no UB).
template <class C>
RINGCC_INLINE C addOf(C a, C b) {
  if constexpr (IntInfo<C>::kIsInt) {
    using U = typename IntInfo<C>::U;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

// A float product is rounded on its own, never fused with a following add into an FMA
// (nvcc fuses by default; the host, built as ISO C++ for x86-64, does not), so PreMulSum
// rounds identically on host and device.
template <class C>
RINGCC_INLINE C mulOf(C a, C b) {
  if constexpr (IntInfo<C>::kIsInt) {
    using U = typename IntInfo<C>::U;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(C) == sizeof(float)) {
      return __fmul_rn(a, b);
    } else {
      return __dmul_rn(a, b);
    }
#else
    return a * b;
#endif
  }
}

RINGCC_INLINE float andBits(float a, float b) { return floatFromBits(floatBits(a) & floatBits(b)); }
RINGCC_INLINE float orBits(float a, float b) { return floatFromBits(floatBits(a) | floatBits(b)); }
RINGCC_INLINE double andBits(double a, double b) {
  return doubleFromBits(doubleBits(a) & doubleBits(b));
}
RINGCC_INLINE double orBits(double a, double b) {
  return doubleFromBits(doubleBits(a) | doubleBits(b));
}

// Floats: a NaN operand is ignored (both NaN: NaN). Equal operands are identical or +-0;
// and-ing (max) or or-ing (min) their bits picks +0 (max) or -0 (min) in either operand
// order. The bitwise | on bools keeps the selection branch-free, so host loops vectorize.
template <class C>
RINGCC_INLINE C maxOf(C a, C b) {
  if constexpr (IntInfo<C>::kIsInt) {
    return a < b ? b : a;
  } else {
    C r = ((a < b) | (a != a)) ? b : a;
    return a == b ? andBits(a, b) : r;
  }
}

template <class C>
RINGCC_INLINE C minOf(C a, C b) {
  if constexpr (IntInfo<C>::kIsInt) {
    return b < a ? b : a;
  } else {
    C r = ((b < a) | (a != a)) ? b : a;
    return a == b ? orBits(a, b) : r;
  }
}

// ---- the op functors ---------------------------------------------------------------------
//
// Each has Traits (how elements load from and store to Traits::Bits, the scalar type loops
// move, through the compute type C), pre, reduce and post on C, and kHasPre/kHasPost so that
// loops that cannot need them are not generated. kIsCopy: the functor moves bits untouched,
// so the packed walk may move whole packs.

template <class T>
struct FnBase {
  using Traits = DataTypeTraits<T>;
  using C = typename Traits::Compute;
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  static constexpr bool kIsCopy = false;
  RINGCC_INLINE C pre(C x) const { return x; }
  RINGCC_INLINE C post(C x) const { return x; }
};

template <class T>
struct FnSum : FnBase<T> {
  using C = typename FnBase<T>::C;
  RINGCC_INLINE C reduce(C a, C b) const { return addOf(a, b); }
};

template <class T>
struct FnProd : FnBase<T> {
  using C = typename FnBase<T>::C;
  RINGCC_INLINE C reduce(C a, C b) const { return mulOf(a, b); }
};

template <class T>
struct FnMax : FnBase<T> {
  using C = typename FnBase<T>::C;
  RINGCC_INLINE C reduce(C a, C b) const { return maxOf(a, b); }
};

template <class T>
struct FnMin : FnBase<T> {
  using C = typename FnBase<T>::C;
  RINGCC_INLINE C reduce(C a, C b) const { return minOf(a, b); }
};

template <class T>
struct FnPreMulSum : FnBase<T> {
  using Traits = DataTypeTraits<T>;
  using C = typename Traits::Compute;
  static constexpr bool kHasPre = true;
  C scalar;
  RINGCC_INLINE explicit FnPreMulSum(typename Traits::Bits s) : scalar(Traits::load(s)) {}
  // The product is rounded to T before it is reduced, as NCCL's pre-op produces a T.
  RINGCC_INLINE C pre(C x) const { return Traits::load(Traits::store(mulOf(x, scalar))); }
  RINGCC_INLINE C reduce(C a, C b) const { return addOf(a, b); }
};

// Integer Avg: sum, then divide the final value (truncating toward zero, as NCCL does).
template <class T>
struct FnSumPostDiv : FnBase<T> {
  using C = typename FnBase<T>::C;
  using Div = typename IntInfo<T>::Div;
  static constexpr bool kHasPost = true;
  Div divisor;
  RINGCC_INLINE explicit FnSumPostDiv(uint64_t d) : divisor(static_cast<Div>(d)) {}
  RINGCC_INLINE C reduce(C a, C b) const { return addOf(a, b); }
  RINGCC_INLINE C post(C x) const { return static_cast<C>(static_cast<Div>(x) / divisor); }
};

// A plain copy: elements move as bits, no conversion.
template <class T>
struct IdentityTraits {
  using Compute = T;
  using Bits = T;
  RINGCC_INLINE static T load(T v) { return v; }
  RINGCC_INLINE static T store(T v) { return v; }
};

template <class T>
struct FnCopy {
  using Traits = IdentityTraits<T>;
  using C = T;
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  static constexpr bool kIsCopy = true;
  RINGCC_INLINE C pre(C x) const { return x; }
  RINGCC_INLINE C reduce(C a, C) const { return a; }
  RINGCC_INLINE C post(C x) const { return x; }
};

// ---- the loop ----------------------------------------------------------------------------

enum Sources : int { kLocalOnly = 1, kPeerOnly = 2, kBoth = 3 };

// Element k of the result, as stored.
template <class T, class Fn, int kSrc>
RINGCC_INLINE T reduceValue(const Fn& fn, const T* local, const T* peer, size_t k) {
  using Traits = typename Fn::Traits;
  typename Fn::C v;
  if constexpr (kSrc == kPeerOnly) {
    v = Traits::load(peer[k]);
  } else {
    v = fn.pre(Traits::load(local[k]));
    if constexpr (kSrc == kBoth) v = fn.reduce(v, Traits::load(peer[k]));
  }
  return Traits::store(fn.post(v));
}

#if defined(__CUDA_ARCH__)

// Device: one loop for every shape (each thread reads element k before it writes it, so an
// in-place alias is harmless); fewer instantiations, and the memory system, not the loop
// body, limits a kernel.
template <class T, class Fn, int kSrc>
RINGCC_HOST_DEVICE inline void reduceShape(const Fn& fn, const T* local, const T* peer, T* dst0,
                                           T* dst1, size_t first, size_t step, size_t count) {
  for (size_t k = first; k < count; k += step) {
    const T out = reduceValue<T, Fn, kSrc>(fn, local, peer, k);
    dst0[k] = out;
    if (dst1 != nullptr) dst1[k] = out;
  }
}

#else

// Host: one loop per shape, so GCC sees restrict-qualified, branch-free bodies. kInPlace:
// dst0 is `local`, and only dst0 is read. With step 1 the elements go in blocks of a fixed
// trip count: at -O2 GCC vectorizes only loops whose vector code replaces the scalar code
// entirely (no epilogue, no run-time alias check), which such a block over restrict
// pointers is; the tail of fewer than kBlock elements stays scalar.
template <class T, class Fn, int kSrc, bool kInPlace, bool kTwoDst>
RINGCC_LOOP void reduceLoop(const Fn fn, const T* __restrict__ local, const T* __restrict__ peer,
                            T* __restrict__ dst0, T* __restrict__ dst1, size_t first, size_t step,
                            size_t count) {
  const T* src = kInPlace ? dst0 : local;
  if (step == 1) {
    constexpr size_t kBlock = 32;
    size_t k = first;
    for (; count - k >= kBlock; k += kBlock) {
      for (size_t j = 0; j < kBlock; ++j) {
        const T out = reduceValue<T, Fn, kSrc>(fn, src, peer, k + j);
        dst0[k + j] = out;
        if constexpr (kTwoDst) dst1[k + j] = out;
      }
    }
    for (; k < count; ++k) {
      const T out = reduceValue<T, Fn, kSrc>(fn, src, peer, k);
      dst0[k] = out;
      if constexpr (kTwoDst) dst1[k] = out;
    }
  } else {
    for (size_t k = first; k < count; k += step) {
      const T out = reduceValue<T, Fn, kSrc>(fn, src, peer, k);
      dst0[k] = out;
      if constexpr (kTwoDst) dst1[k] = out;
    }
  }
}

template <class T, class Fn, int kSrc>
inline void reduceShape(const Fn& fn, const T* local, const T* peer, T* dst0, T* dst1, size_t first,
                        size_t step, size_t count) {
  const bool inPlace = kSrc != kPeerOnly && dst0 == local;
  if (inPlace) {
    if (dst1 != nullptr) {
      reduceLoop<T, Fn, kSrc, true, true>(fn, local, peer, dst0, dst1, first, step, count);
    } else {
      reduceLoop<T, Fn, kSrc, true, false>(fn, local, peer, dst0, dst1, first, step, count);
    }
  } else {
    if (dst1 != nullptr) {
      reduceLoop<T, Fn, kSrc, false, true>(fn, local, peer, dst0, dst1, first, step, count);
    } else {
      reduceLoop<T, Fn, kSrc, false, false>(fn, local, peer, dst0, dst1, first, step, count);
    }
  }
}

#endif

// ---- the packed walk ---------------------------------------------------------------------

// A pack's bytes from memory 16-byte aligned, in one access. memcpy, not a Pack16 lvalue:
// the memory holds elements of another type (strict aliasing). With the alignment promised,
// nvcc emits one ld.v2.u64 / st.v2.u64 (as the PTX of kernels/cuda/instantiate.cu shows); on
// the host, which runs this walk only in tests, g++ may split a load into two 8-byte moves.
RINGCC_INLINE Pack16 loadPack(const void* p) {
  Pack16 v;
  __builtin_memcpy(&v, __builtin_assume_aligned(p, sizeof(Pack16)), sizeof v);
  return v;
}

RINGCC_INLINE void storePack(void* p, const Pack16& v) {
  __builtin_memcpy(__builtin_assume_aligned(p, sizeof(Pack16)), &v, sizeof v);
}

// One pack's result from its source packs: the elements through reduceValue (the element
// walk's arithmetic); a copy moves the pack's bits untouched.
template <class T, class Fn, int kSrc>
RINGCC_INLINE Pack16 reducePackValue(const Fn& fn, const Pack16& a, const Pack16& b) {
  if constexpr (Fn::kIsCopy) {
    return b;
  } else {
    constexpr size_t kPer = sizeof(Pack16) / sizeof(T);
    T x[kPer] = {}, y[kPer] = {}, r[kPer];
    if constexpr (kSrc != kPeerOnly) __builtin_memcpy(x, &a, sizeof a);
    if constexpr (kSrc != kLocalOnly) __builtin_memcpy(y, &b, sizeof b);
    for (size_t j = 0; j < kPer; ++j) r[j] = reduceValue<T, Fn, kSrc>(fn, x, y, j);
    Pack16 out;
    __builtin_memcpy(&out, r, sizeof out);
    return out;
  }
}

// Packs in flight per thread: a GPU thread waits a memory latency per dependent load, so it
// loads this many packs of each source before it stores any (NCCL's Simple unroll).
constexpr int kPackUnroll = 4;

// Packs first, first + step, ... < packs of pointers at a 16-byte boundary, in groups of
// kPackUnroll: every source pack of a group loaded, then every result stored (a group past the
// end is cut short by predicates, not by a second loop, to keep the kernel small). The same
// packs, the same arithmetic, in the same thread as one pack at a time: only the order of
// independent loads changes. The destinations are __restrict__ (the sources' loads may move
// above their stores); the sources are not: a slot is rewritten by its sender while the
// kernel runs, and const __restrict__ lets nvcc read through the non-coherent read-only
// cache. In place the local source is dst0 itself and is read through it (local null here),
// so that nothing reaches dst0's memory but through dst0; each pack is read before written.
template <class T, class Fn, int kSrc>
RINGCC_HOST_DEVICE inline void reducePacksGrouped(const Fn& fn, const T* local, const T* peer,
                                                  T* __restrict__ dst0, T* __restrict__ dst1,
                                                  size_t first, size_t step, size_t packs) {
  constexpr size_t kPer = sizeof(Pack16) / sizeof(T);
  constexpr int kU = kPackUnroll;
  const T* src = local != nullptr ? local : dst0;
  for (size_t p = first; p < packs; p += kU * step) {
    Pack16 a[kU] = {}, b[kU] = {};
    RINGCC_UNROLL
    for (int u = 0; u < kU; ++u) {
      const size_t q = p + u * step;
      if (q >= packs) break;
      if constexpr (kSrc != kPeerOnly) a[u] = loadPack(src + q * kPer);
      if constexpr (kSrc != kLocalOnly) b[u] = loadPack(peer + q * kPer);
    }
    RINGCC_UNROLL
    for (int u = 0; u < kU; ++u) {
      const size_t q = p + u * step;
      if (q >= packs) break;
      const Pack16 out = reducePackValue<T, Fn, kSrc>(fn, a[u], b[u]);
      storePack(dst0 + q * kPer, out);
      if (dst1 != nullptr) storePack(dst1 + q * kPer, out);
    }
  }
}

template <class T, class Fn, int kSrc>
RINGCC_HOST_DEVICE inline void reducePacks(const Fn& fn, const T* local, const T* peer, T* dst0,
                                           T* dst1, size_t first, size_t step, size_t packs) {
  const bool inPlace = kSrc != kPeerOnly && local == dst0;
  reducePacksGrouped<T, Fn, kSrc>(fn, inPlace ? nullptr : local, peer, dst0, dst1, first, step,
                                  packs);
}

template <class T>
RINGCC_INLINE T* advanced(T* p, size_t k) {
  return p != nullptr ? p + k : nullptr;
}

// Worker `worker` of `nWorkers`: head elements worker, worker + nWorkers, ..., packs likewise,
// then tail elements likewise (see the top of this file for the picture).
template <class T, class Fn, int kSrc>
RINGCC_HOST_DEVICE inline void reducePacked(const Fn& fn, const T* local, const T* peer, T* dst0,
                                            T* dst1, size_t worker, size_t nWorkers, size_t count) {
  const PackSplit cut = packSplit(sizeof(T), count, local, peer, dst0, dst1);
  if (worker < cut.head) {
    reduceShape<T, Fn, kSrc>(fn, local, peer, dst0, dst1, worker, nWorkers, cut.head);
  }
  const size_t h = cut.head;
  if (worker < cut.packs) {
    reducePacks<T, Fn, kSrc>(fn, advanced(local, h), advanced(peer, h), dst0 + h, advanced(dst1, h),
                             worker, nWorkers, cut.packs);
  }
  const size_t t = h + cut.packs * (sizeof(Pack16) / sizeof(T));
  if (worker < count - t) {
    reduceShape<T, Fn, kSrc>(fn, advanced(local, t), advanced(peer, t), dst0 + t, advanced(dst1, t),
                             worker, nWorkers, count - t);
  }
}

// How a call walks its range: kWalkElements does elements first, first + step, ...;
// kWalkPacks reads (first, step) as (worker, nWorkers) and runs reducePacked.
enum Walk : int { kWalkElements, kWalkPacks };

template <class T, class Fn, int kSrc, int kWalk>
RINGCC_HOST_DEVICE inline void walkShape(const Fn& fn, const T* local, const T* peer, T* dst0,
                                         T* dst1, size_t first, size_t step, size_t count) {
  if constexpr (kWalk == kWalkPacks) {
    reducePacked<T, Fn, kSrc>(fn, local, peer, dst0, dst1, first, step, count);
  } else {
    reduceShape<T, Fn, kSrc>(fn, local, peer, dst0, dst1, first, step, count);
  }
}

// ---- dispatch ----------------------------------------------------------------------------

// Sources present -> loop shape. Single-source shapes exist only for ops with pre or post.
template <class T, class Fn, int kWalk>
RINGCC_HOST_DEVICE inline void reduceWith(const Fn& fn, const T* local, const T* peer, T* dst0,
                                          T* dst1, size_t first, size_t step, size_t count) {
  if (local != nullptr && peer != nullptr) {
    walkShape<T, Fn, kBoth, kWalk>(fn, local, peer, dst0, dst1, first, step, count);
  } else if constexpr (Fn::kHasPre || Fn::kHasPost) {
    if (local != nullptr) {
      walkShape<T, Fn, kLocalOnly, kWalk>(fn, local, peer, dst0, dst1, first, step, count);
    } else if constexpr (Fn::kHasPost) {
      walkShape<T, Fn, kPeerOnly, kWalk>(fn, local, peer, dst0, dst1, first, step, count);
    }
  }
}

// Moves elements as bits. An in-place destination needs nothing.
template <class T, int kWalk = kWalkElements>
RINGCC_HOST_DEVICE inline void copyElements(const T* src, T* dst0, T* dst1, size_t first,
                                            size_t step, size_t count) {
  if (dst0 == src) {
    if (dst1 == nullptr) return;
    dst0 = dst1;
    dst1 = nullptr;
  }
  walkShape<T, FnCopy<T>, kPeerOnly, kWalk>(FnCopy<T>{}, nullptr, src, dst0, dst1, first, step,
                                            count);
}

// (first, step) as walkShape reads them. `first >= count` leaves nothing for either walk: a
// packed worker's head elements, packs and tail elements all have indices below count.
template <class T, int kWalk = kWalkElements>
RINGCC_HOST_DEVICE inline void reduceCopyTyped(const RedOp& op, const void* localv,
                                               const void* peerv, void* dst0v, void* dst1v,
                                               size_t first, size_t step, size_t count,
                                               bool applyPost) {
  using S = typename DataTypeTraits<T>::Bits;
  const S* local = static_cast<const S*>(localv);
  const S* peer = static_cast<const S*>(peerv);
  S* dst0 = static_cast<S*>(dst0v);
  S* dst1 = static_cast<S*>(dst1v);
  // Normalise: dst0 is set, dst1 differs from it, and an in-place alias sits in dst0.
  if (dst0 == nullptr) {
    dst0 = dst1;
    dst1 = nullptr;
  }
  if (dst1 == dst0) dst1 = nullptr;
  if (dst0 == nullptr || (local == nullptr && peer == nullptr) || first >= count) return;
  if (dst1 != nullptr && dst1 == local) {
    dst1 = dst0;
    dst0 = const_cast<S*>(local);
  }

  const bool pre = local != nullptr && op.kind == RedOpKind::PreMulSum;
  bool post = false;
  if constexpr (IntInfo<T>::kIsInt) {
    post = applyPost && op.kind == RedOpKind::Sum && op.postDivisor > 1;
  }
  if ((local == nullptr || peer == nullptr) && !pre && !post) {
    copyElements<S, kWalk>(local != nullptr ? local : peer, dst0, dst1, first, step, count);
    return;
  }

  switch (op.kind) {
    case RedOpKind::Sum:
      if constexpr (IntInfo<T>::kIsInt) {
        if (post) {
          reduceWith<S, FnSumPostDiv<T>, kWalk>(FnSumPostDiv<T>(op.postDivisor), local, peer, dst0,
                                                dst1, first, step, count);
          return;
        }
      }
      reduceWith<S, FnSum<T>, kWalk>(FnSum<T>{}, local, peer, dst0, dst1, first, step, count);
      return;
    case RedOpKind::Prod:
      reduceWith<S, FnProd<T>, kWalk>(FnProd<T>{}, local, peer, dst0, dst1, first, step, count);
      return;
    case RedOpKind::Max:
      reduceWith<S, FnMax<T>, kWalk>(FnMax<T>{}, local, peer, dst0, dst1, first, step, count);
      return;
    case RedOpKind::Min:
      reduceWith<S, FnMin<T>, kWalk>(FnMin<T>{}, local, peer, dst0, dst1, first, step, count);
      return;
    case RedOpKind::PreMulSum:
      reduceWith<S, FnPreMulSum<T>, kWalk>(FnPreMulSum<T>(redOpScalar<S>(op)), local, peer, dst0,
                                           dst1, first, step, count);
      return;
  }
}

template <int kWalk>
RINGCC_HOST_DEVICE inline void reduceCopyDispatch(ncclDataType_t type, const RedOp& op,
                                                  const void* local, const void* peer, void* dst0,
                                                  void* dst1, size_t first, size_t step,
                                                  size_t count, bool applyPost) {
#define RINGCC_REDUCE_COPY_CASE(TYPE)                                                              \
  case TYPE:                                                                                       \
    reduceCopyTyped<StorageOf<TYPE>::Type, kWalk>(op, local, peer, dst0, dst1, first, step, count, \
                                                  applyPost);                                      \
    return;
  switch (type) {
    RINGCC_REDUCE_COPY_CASE(ncclInt8)
    RINGCC_REDUCE_COPY_CASE(ncclUint8)
    RINGCC_REDUCE_COPY_CASE(ncclInt32)
    RINGCC_REDUCE_COPY_CASE(ncclUint32)
    RINGCC_REDUCE_COPY_CASE(ncclInt64)
    RINGCC_REDUCE_COPY_CASE(ncclUint64)
    RINGCC_REDUCE_COPY_CASE(ncclFloat16)
    RINGCC_REDUCE_COPY_CASE(ncclFloat32)
    RINGCC_REDUCE_COPY_CASE(ncclFloat64)
    RINGCC_REDUCE_COPY_CASE(ncclBfloat16)
    RINGCC_REDUCE_COPY_CASE(ncclFloat8e4m3)
    RINGCC_REDUCE_COPY_CASE(ncclFloat8e5m2)
    default:
      return;  // not a datatype: the API layer rejects it before anything runs
  }
#undef RINGCC_REDUCE_COPY_CASE
}

}  // namespace detail

// See the top of this file. `count` is in elements of `type`.
RINGCC_HOST_DEVICE inline void reduceCopy(ncclDataType_t type, const RedOp& op, const void* local,
                                          const void* peer, void* dst0, void* dst1, size_t count,
                                          bool applyPost) {
  detail::reduceCopyDispatch<detail::kWalkElements>(type, op, local, peer, dst0, dst1, 0, 1, count,
                                                    applyPost);
}

// The same, for elements first, first + step, ... below count only (step >= 1).
RINGCC_HOST_DEVICE inline void reduceCopyStrided(ncclDataType_t type, const RedOp& op,
                                                 const void* local, const void* peer, void* dst0,
                                                 void* dst1, size_t count, bool applyPost,
                                                 size_t first, size_t step) {
  detail::reduceCopyDispatch<detail::kWalkElements>(type, op, local, peer, dst0, dst1, first, step,
                                                    count, applyPost);
}

// The same in 16-byte packs, for worker `worker` of `nWorkers` (>= 1): its head and tail
// elements and its packs, as the top of this file draws them. The workers' shares together
// are the whole range, and every element is the one reduceCopy computes, bit for bit.
RINGCC_HOST_DEVICE inline void reduceCopyPacked(ncclDataType_t type, const RedOp& op,
                                                const void* local, const void* peer, void* dst0,
                                                void* dst1, size_t count, bool applyPost,
                                                size_t worker, size_t nWorkers) {
  detail::reduceCopyDispatch<detail::kWalkPacks>(type, op, local, peer, dst0, dst1, worker,
                                                 nWorkers, count, applyPost);
}

// The reduce-copy of one datatype, chosen once per operation by the host runner
// (kernels/prims.h) instead of once per slice: (op, local, peer, dst0, dst1, first, step,
// count, applyPost), the arguments of reduceCopyStrided.
typedef void (*ReduceCopyFn)(const RedOp& op, const void* local, const void* peer, void* dst0,
                             void* dst1, size_t first, size_t step, size_t count, bool applyPost);

#if !defined(__CUDA_ARCH__)
// Host: the ReduceCopyFn of `type`; null for a value that is not a datatype (the API layer
// rejects those before anything runs).
inline ReduceCopyFn reduceCopyFunction(ncclDataType_t type) {
#define RINGCC_REDUCE_COPY_FN(TYPE) \
  case TYPE:                        \
    return &detail::reduceCopyTyped<StorageOf<TYPE>::Type>;
  switch (type) {
    RINGCC_REDUCE_COPY_FN(ncclInt8)
    RINGCC_REDUCE_COPY_FN(ncclUint8)
    RINGCC_REDUCE_COPY_FN(ncclInt32)
    RINGCC_REDUCE_COPY_FN(ncclUint32)
    RINGCC_REDUCE_COPY_FN(ncclInt64)
    RINGCC_REDUCE_COPY_FN(ncclUint64)
    RINGCC_REDUCE_COPY_FN(ncclFloat16)
    RINGCC_REDUCE_COPY_FN(ncclFloat32)
    RINGCC_REDUCE_COPY_FN(ncclFloat64)
    RINGCC_REDUCE_COPY_FN(ncclBfloat16)
    RINGCC_REDUCE_COPY_FN(ncclFloat8e4m3)
    RINGCC_REDUCE_COPY_FN(ncclFloat8e5m2)
    default:
      return nullptr;
  }
#undef RINGCC_REDUCE_COPY_FN
}
#endif

// Moves `bytes` bytes; dst == src is a no-op, any other overlap is not allowed. On the device
// in 16-byte packs where dst and src line up.
RINGCC_HOST_DEVICE inline void copyBytes(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
#if defined(__CUDA_ARCH__)
  detail::copyElements<uint8_t, detail::kWalkPacks>(
      static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), nullptr, 0, 1, bytes);
#else
  __builtin_memcpy(dst, src, bytes);
#endif
}

}  // namespace ringcc
