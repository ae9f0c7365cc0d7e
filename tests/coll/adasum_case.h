// Adasum's reference for the tests (tests/coll/test_adasum.cc on host communicators,
// tests/coll/test_cuda_engine.cc on CUDA ones): its definition (include/ringcc.h,
// docs/adasum.md) computed in double on every rank's whole input, segment by segment, and a
// test case that makes inputs, runs one rank's call and checks it. Each element must lie
// within a tolerance of its segment's root mean square: 1e-12 (float64), 1e-5 (float32), a few
// roundings of the type per tree level for float16 and bfloat16.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "nccl.h"
#include "ringcc.h"

namespace ringcc::test {

using Vec = std::vector<double>;

// adasum(a, b) of the definition, over [lo, hi), into a.
inline void refCombine(Vec& a, const Vec& b, size_t lo, size_t hi) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = lo; i < hi; ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  double ca = aa > 0 ? 1 - ab / (2 * aa) : 1;
  double cb = bb > 0 ? 1 - ab / (2 * bb) : 1;
  for (size_t i = lo; i < hi; ++i) a[i] = ca * a[i] + cb * b[i];
}

// The definition, verbatim: extra ranks fold into the first ones, then the binary tree.
inline Vec reference(std::vector<Vec> v, const std::vector<size_t>& segs) {
  const int n = static_cast<int>(v.size());
  int p = 1;
  while (p * 2 <= n) p *= 2;
  auto combine = [&](int s, int t) {
    size_t lo = 0;
    for (size_t len : segs) {
      refCombine(v[s], v[t], lo, lo + len);
      lo += len;
    }
  };
  for (int i = 0; i < n - p; ++i) combine(i, p + i);
  for (int d = 1; d < p; d *= 2)
    for (int s = 0; s < p; s += 2 * d) combine(s, s + d);
  return v[0];
}

inline size_t typeSize(ncclDataType_t t) { return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2; }

inline double load(ncclDataType_t t, const uint8_t* p) {
  switch (t) {
    case ncclFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case ncclFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case ncclFloat16: { ringcc::Half h; std::memcpy(&h, p, 2); return ringcc::halfToFloat(h); }
    default: { ringcc::BFloat16 b; std::memcpy(&b, p, 2); return ringcc::bf16ToFloat(b); }
  }
}

inline void store(ncclDataType_t t, double v, uint8_t* p) {
  switch (t) {
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case ncclFloat16: { auto h = ringcc::floatToHalf(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    default: { auto b = ringcc::floatToBf16(static_cast<float>(v)); std::memcpy(p, &b, 2); break; }
  }
}

// Per-segment tolerance relative to the segment's RMS.
inline double tolerance(ncclDataType_t t, int nranks) {
  int levels = 1;
  for (int p = 1; p < nranks; p *= 2) ++levels;
  if (t == ncclFloat64) return 1e-12;
  if (t == ncclFloat32) return 1e-5;
  double eps = t == ncclFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  return 8 * levels * eps;  // a rounding per level, elements up to a few RMS
}

// One test case: every rank's input (as the type holds it), the segments, the expectation.
struct AdasumCase {
  ncclDataType_t type = ncclFloat32;
  int nranks = 1;
  std::vector<size_t> segs;  // empty: one segment
  bool inPlace = false;
  std::vector<std::vector<uint8_t>> input;
  Vec expect;

  size_t count() const {
    size_t c = 0;
    for (size_t s : segs) c += s;
    return c;
  }

  // Inputs: a direction shared by all ranks plus noise of their own, so coefficients are
  // neither 1/2 nor 1. Segment 1, when there is one, is zero on rank 1 (adasum(0, b) = b) and
  // segment 2 zero everywhere.
  AdasumCase(ncclDataType_t t, int n, std::vector<size_t> s, bool inPlace, uint64_t seed)
      : type(t), nranks(n), segs(std::move(s)), inPlace(inPlace) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    const size_t c = count();
    Vec common(c);
    for (double& x : common) x = u(rng);
    std::vector<Vec> values(n, Vec(c));
    input.assign(n, std::vector<uint8_t>(c * typeSize(t)));
    for (int r = 0; r < n; ++r) {
      size_t segStart = 0;
      for (size_t k = 0; k < segs.size(); ++k) {
        for (size_t i = segStart; i < segStart + segs[k]; ++i) {
          double x = (k == 1 && r == 1) || k == 2 ? 0 : common[i] + 0.7 * u(rng);
          store(t, x, &input[r][i * typeSize(t)]);
          values[r][i] = load(t, &input[r][i * typeSize(t)]);  // as the type holds it
        }
        segStart += segs[k];
      }
    }
    expect = reference(values, segs);
  }

  std::string describe() const {
    return "type " + std::to_string(type) + ", " + std::to_string(nranks) + " ranks, " +
           std::to_string(segs.size()) + " segments, count " + std::to_string(count()) +
           (inPlace ? ", in place" : "");
  }

  // "" or the first element out of tolerance.
  std::string check(const std::vector<uint8_t>& got) const {
    const double tol = tolerance(type, nranks);
    size_t lo = 0;
    for (size_t len : segs) {
      double ss = 0;
      for (size_t i = lo; i < lo + len; ++i) ss += expect[i] * expect[i];
      const double rms = len ? std::sqrt(ss / static_cast<double>(len)) : 0;
      for (size_t i = lo; i < lo + len; ++i) {
        double g = load(type, &got[i * typeSize(type)]);
        if (!(std::fabs(g - expect[i]) <= tol * rms))
          return describe() + ": element " + std::to_string(i) + " is " + std::to_string(g) +
                 ", expected " + std::to_string(expect[i]) + " (segment RMS " +
                 std::to_string(rms) + ")";
      }
      lo += len;
    }
    return "";
  }

  // This rank's buffers: its input, and an output filled with 0xa5 (unused in place).
  struct Buffers {
    std::vector<uint8_t> send, recv;
  };
  Buffers buffers(int rank) const {
    return {input[rank], std::vector<uint8_t>(input[rank].size(), 0xa5)};
  }

  // This rank's call on `b`; `list` is the segment list handed over (default: segs).
  ncclResult_t call(ncclComm_t comm, Buffers& b, const size_t* list = nullptr,
                    cudaStream_t stream = nullptr) const {
    const bool several = segs.size() > 1;
    return ringccAllReduceAdasum(b.send.data(), inPlace ? b.send.data() : b.recv.data(), count(),
                                 type, several ? (list ? list : segs.data()) : nullptr,
                                 several ? static_cast<int>(segs.size()) : 0, comm, stream);
  }

  // "" or what is wrong with rank `rank`'s buffers after its call.
  std::string verify(int rank, const Buffers& b) const {
    if (!inPlace && b.send != input[rank]) return describe() + ": sendbuff was modified";
    return check(inPlace ? b.send : b.recv);
  }

  // Runs this rank's call; "" or what went wrong.
  std::string run(ncclComm_t comm, int rank) const {
    Buffers b = buffers(rank);
    ncclResult_t rc = call(comm, b);
    if (rc != ncclSuccess) return describe() + ": " + ncclGetErrorString(rc);
    return verify(rank, b);
  }
};

inline constexpr ncclDataType_t kAdasumTypes[] = {ncclFloat64, ncclFloat32, ncclFloat16, ncclBfloat16};

inline std::vector<AdasumCase> adasumCases(int n) {
  std::vector<AdasumCase> cases;
  uint64_t seed = 100 * n;
  for (ncclDataType_t t : kAdasumTypes) {
    cases.emplace_back(t, n, std::vector<size_t>{1000}, false, ++seed);
    cases.emplace_back(t, n, std::vector<size_t>{333, 100, 64, 1, 4099}, true, ++seed);
  }
  // A single element, fewer elements than ranks, and a large buffer.
  cases.emplace_back(ncclFloat32, n, std::vector<size_t>{1}, false, ++seed);
  cases.emplace_back(ncclFloat64, n, std::vector<size_t>{3}, true, ++seed);
  cases.emplace_back(ncclFloat32, n, std::vector<size_t>{300000, 5, 7}, false, ++seed);
  // More segments than the two-rank path takes as weighted all-reduces (src/adasum/adasum.cc,
  // kWeightedMaxSegments): two ranks then combine as every other count does.
  std::vector<size_t> many;
  for (size_t k = 0; k < 20; ++k) many.push_back(50 + 37 * k);
  cases.emplace_back(ncclFloat32, n, many, true, ++seed);
  return cases;
}


}  // namespace ringcc::test
