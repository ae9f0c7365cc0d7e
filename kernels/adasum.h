// Adasum's arithmetic (ringccAllReduceAdasum), device-clean so a CUDA kernel can share it:
//
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// The three products are accumulated in double for every type: a float sum over millions of
// elements would lose the digits that decide the coefficients. A zero vector contributes
// nothing: adasum(0, b) = b (its coefficient would be 0/0; the other's is then exactly 1).
// The combination is computed in double and rounded to the type once.
#pragma once

#include <stddef.h>

#include "kernels/device_clean.h"
#include "kernels/dtypes.h"

namespace ringcc {

// The products of one pair of vectors (or of the parts of them one rank holds): summed
// element-wise over ranks they give the whole vectors' products.
struct AdasumDots {
  double ab = 0;
  double aa = 0;
  double bb = 0;
};

struct AdasumCoefficients {
  double a;
  double b;
};

RINGCC_INLINE AdasumCoefficients adasumCoefficients(const AdasumDots& d) {
  AdasumCoefficients c;
  c.a = d.aa > 0 ? 1.0 - d.ab / (2.0 * d.aa) : 1.0;
  c.b = d.bb > 0 ? 1.0 - d.ab / (2.0 * d.bb) : 1.0;
  return c;
}

// dots += the products of a[0..n) and b[0..n).
template <class T>
RINGCC_LOOP_WIDE void adasumAccumulate(const T* __restrict__ a, const T* __restrict__ b, size_t n,
                                       AdasumDots* dots) {
  using Traits = DataTypeTraits<T>;
  using Bits = typename Traits::Bits;
  const Bits* ab = reinterpret_cast<const Bits*>(a);
  const Bits* bb = reinterpret_cast<const Bits*>(b);
  // kLanes partial sums of each product: independent chains of additions (one chain would
  // wait an addition's latency per element), which GCC at -O2 turns into two-double vector
  // instructions in the baseline build (6 instructions per float element, counted by
  // callgrind; 8 lanes spill registers and take 12) and four-double ones with FMA in the
  // x86-64-v3 build (RINGCC_LOOP_WIDE). The order is fixed, so the result is the same on every
  // run of one build.
  constexpr size_t kLanes = 4;
  double sab[kLanes] = {}, saa[kLanes] = {}, sbb[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      double x = static_cast<double>(Traits::load(ab[i + l]));
      double y = static_cast<double>(Traits::load(bb[i + l]));
      sab[l] += x * y;
      saa[l] += x * x;
      sbb[l] += y * y;
    }
  }
  for (; i < n; ++i) {
    double x = static_cast<double>(Traits::load(ab[i]));
    double y = static_cast<double>(Traits::load(bb[i]));
    sab[0] += x * y;
    saa[0] += x * x;
    sbb[0] += y * y;
  }
  dots->ab += (sab[0] + sab[1]) + (sab[2] + sab[3]);
  dots->aa += (saa[0] + saa[1]) + (saa[2] + saa[3]);
  dots->bb += (sbb[0] + sbb[1]) + (sbb[2] + sbb[3]);
}

constexpr size_t kAdasumCombineBlock = 8;

// One element of the combination, c.a * a + c.b * b in double, rounded to T once.
template <class T>
RINGCC_INLINE typename DataTypeTraits<T>::Bits adasumCombined(typename DataTypeTraits<T>::Bits a,
                                                              typename DataTypeTraits<T>::Bits b,
                                                              AdasumCoefficients c) {
  using Traits = DataTypeTraits<T>;
  const double v = c.a * static_cast<double>(Traits::load(a)) +
                   c.b * static_cast<double>(Traits::load(b));
  return Traits::store(static_cast<typename Traits::Compute>(v));
}

// out[0..n) = c.a * a + c.b * b, rounded to T once. `out` may be `a` or `b` (each element is
// read before it is written, block by block). Blocks of kAdasumCombineBlock elements: a
// fixed-size inner loop that GCC at -O2 vectorizes (its cheapest cost model takes only loops
// whose trip count is a multiple of the vector length, and n is not known): 6 instructions
// per float element against 12 for the plain loop (callgrind).
template <class T>
RINGCC_LOOP_WIDE void adasumCombine(T* out, const T* a, const T* b, size_t n,
                                    AdasumCoefficients c) {
  using Traits = DataTypeTraits<T>;
  using Bits = typename Traits::Bits;
  using Compute = typename Traits::Compute;
  const Bits* ab = reinterpret_cast<const Bits*>(a);
  const Bits* bb = reinterpret_cast<const Bits*>(b);
  Bits* ob = reinterpret_cast<Bits*>(out);
  constexpr size_t L = kAdasumCombineBlock;
  size_t i = 0;
  for (; i + L <= n; i += L) {
    double v[L];
    for (size_t l = 0; l < L; ++l)
      v[l] = c.a * static_cast<double>(Traits::load(ab[i + l])) +
             c.b * static_cast<double>(Traits::load(bb[i + l]));
    for (size_t l = 0; l < L; ++l) ob[i + l] = Traits::store(static_cast<Compute>(v[l]));
  }
  for (; i < n; ++i) ob[i] = adasumCombined<T>(ab[i], bb[i], c);
}

// The forms a thread of a CUDA block runs: elements first, first + stride, ... of [0, n), so
// that neighbouring threads read neighbouring elements. Same arithmetic per element.
template <class T>
RINGCC_INLINE void adasumAccumulateStrided(const T* a, const T* b, size_t n, size_t first,
                                           size_t stride, AdasumDots* dots) {
  using Traits = DataTypeTraits<T>;
  using Bits = typename Traits::Bits;
  const Bits* ab = reinterpret_cast<const Bits*>(a);
  const Bits* bb = reinterpret_cast<const Bits*>(b);
  for (size_t i = first; i < n; i += stride) {
    double x = static_cast<double>(Traits::load(ab[i]));
    double y = static_cast<double>(Traits::load(bb[i]));
    dots->ab += x * y;
    dots->aa += x * x;
    dots->bb += y * y;
  }
}

template <class T>
RINGCC_INLINE void adasumCombineStrided(T* out, const T* a, const T* b, size_t n, size_t first,
                                        size_t stride, AdasumCoefficients c) {
  using Bits = typename DataTypeTraits<T>::Bits;
  const Bits* ab = reinterpret_cast<const Bits*>(a);
  const Bits* bb = reinterpret_cast<const Bits*>(b);
  Bits* ob = reinterpret_cast<Bits*>(out);
  for (size_t i = first; i < n; i += stride) ob[i] = adasumCombined<T>(ab[i], bb[i], c);
}

}  // namespace ringcc
