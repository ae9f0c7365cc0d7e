// kernels/dtypes.h and kernels/reduce_copy.h against a reference written independently here:
// narrow formats are decoded with ldexp and rounded by searching the table of all their
// finite values (ties to the even bit pattern), integers wrap through 64-bit arithmetic.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "kernels/red_op.h"
#include "kernels/reduce_copy.h"

using namespace ringcc;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- reference model of the narrow formats ----------------------------------------------

struct FormatSpec {
  const char* name;
  int expBits, mantBits, bias;
  bool infEncoded;  // exponent all-ones: Inf (mantissa 0) or NaN (half, bf16, e5m2)
  bool saturates;   // overflow and Inf become the largest finite value (fp8, as CUDA's SATFINITE)
  uint32_t canonicalNan;
  int totalBits() const { return 1 + expBits + mantBits; }
  uint32_t signBit() const { return 1u << (totalBits() - 1); }
  uint32_t expMax() const { return (1u << expBits) - 1; }
};

const FormatSpec kHalf{"half", 5, 10, 15, true, false, 0x7fff};
const FormatSpec kBf16{"bfloat16", 8, 7, 127, true, false, 0x7fff};
const FormatSpec kE4m3{"fp8e4m3", 4, 3, 7, false, true, 0x7f};
const FormatSpec kE5m2{"fp8e5m2", 5, 2, 15, true, true, 0x7f};

double refDecode(const FormatSpec& f, uint32_t bits) {
  bool neg = (bits & f.signBit()) != 0;
  uint32_t e = (bits >> f.mantBits) & f.expMax();
  uint32_t m = bits & ((1u << f.mantBits) - 1);
  double v;
  if (!f.infEncoded && e == f.expMax() && m == (1u << f.mantBits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.infEncoded && e == f.expMax()) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantBits);
  } else {
    v = std::ldexp(static_cast<double>((1u << f.mantBits) + m),
                   static_cast<int>(e) - f.bias - f.mantBits);
  }
  return neg ? -v : v;
}

struct Finite {
  double value;
  uint32_t bits;
};

// All finite non-negative values of the format, ascending.
std::vector<Finite> finiteValues(const FormatSpec& f) {
  std::vector<Finite> out;
  for (uint32_t b = 0; b < f.signBit(); ++b) {
    double v = refDecode(f, b);
    if (std::isfinite(v)) out.push_back({v, b});
  }
  return out;
}

const std::vector<Finite>& finiteTable(const FormatSpec& f) {
  static const std::vector<Finite> half = finiteValues(kHalf), bf16 = finiteValues(kBf16),
                                   e4m3 = finiteValues(kE4m3), e5m2 = finiteValues(kE5m2);
  if (&f == &kHalf) return half;
  if (&f == &kBf16) return bf16;
  if (&f == &kE4m3) return e4m3;
  return e5m2;
}

// Round to nearest, ties to even, with the overflow rule of the format.
uint32_t refRound(const FormatSpec& f, double v) {
  if (std::isnan(v)) return f.canonicalNan;
  const uint32_t sign = std::signbit(v) ? f.signBit() : 0;
  const double a = std::fabs(v);
  const auto& table = finiteTable(f);
  const Finite& max = table.back();
  if (f.saturates && a >= max.value) return sign | max.bits;
  if (!f.saturates) {
    double ulp = std::ldexp(1.0, static_cast<int>(f.expMax()) - 1 - f.bias - f.mantBits);
    if (a >= max.value + ulp / 2) return sign | (f.expMax() << f.mantBits);  // Inf
    if (a >= max.value) return sign | max.bits;
  }
  auto hi = std::lower_bound(table.begin(), table.end(), a,
                             [](const Finite& x, double y) { return x.value < y; });
  if (hi->value == a) return sign | hi->bits;
  auto lo = hi - 1;
  double dlo = a - lo->value, dhi = hi->value - a;
  if (dlo < dhi) return sign | lo->bits;
  if (dhi < dlo) return sign | hi->bits;
  return sign | ((lo->bits & 1) == 0 ? lo->bits : hi->bits);
}

// The implementation under test, per format.
float implToFloat(const FormatSpec& f, uint32_t bits) {
  if (&f == &kHalf) return halfToFloat(Half{static_cast<uint16_t>(bits)});
  if (&f == &kBf16) return bf16ToFloat(BFloat16{static_cast<uint16_t>(bits)});
  if (&f == &kE4m3) return fp8e4m3ToFloat(Fp8E4M3{static_cast<uint8_t>(bits)});
  return fp8e5m2ToFloat(Fp8E5M2{static_cast<uint8_t>(bits)});
}
uint32_t implFromFloat(const FormatSpec& f, float v) {
  if (&f == &kHalf) return floatToHalf(v).bits;
  if (&f == &kBf16) return floatToBf16(v).bits;
  if (&f == &kE4m3) return floatToFp8e4m3(v).bits;
  return floatToFp8e5m2(v).bits;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

const FormatSpec* const kFormats[] = {&kHalf, &kBf16, &kE4m3, &kE5m2};

}  // namespace

// ==== [dtypes] =============================================================================

TEST_CASE("dataTypeSize and dataTypeValid cover exactly the 12 datatypes", "[dtypes]") {
  CHECK(dataTypeSize(ncclInt8) == 1);
  CHECK(dataTypeSize(ncclUint8) == 1);
  CHECK(dataTypeSize(ncclInt32) == 4);
  CHECK(dataTypeSize(ncclUint32) == 4);
  CHECK(dataTypeSize(ncclInt64) == 8);
  CHECK(dataTypeSize(ncclUint64) == 8);
  CHECK(dataTypeSize(ncclFloat16) == 2);
  CHECK(dataTypeSize(ncclFloat32) == 4);
  CHECK(dataTypeSize(ncclFloat64) == 8);
  CHECK(dataTypeSize(ncclBfloat16) == 2);
  CHECK(dataTypeSize(ncclFloat8e4m3) == 1);
  CHECK(dataTypeSize(ncclFloat8e5m2) == 1);
  static_assert(dataTypeSize(ncclFloat64) == 8, "usable in constant expressions");
  for (int t = 0; t < ncclNumTypes; ++t) {
    CHECK(dataTypeValid(t));
    CHECK(dataTypeSize(static_cast<ncclDataType_t>(t)) > 0);
  }
  CHECK_FALSE(dataTypeValid(-1));
  CHECK_FALSE(dataTypeValid(ncclNumTypes));
  CHECK_FALSE(dataTypeValid(255));
  CHECK(dataTypeSize(static_cast<ncclDataType_t>(ncclNumTypes)) == 0);
  CHECK(sizeof(Half) == 2);
  CHECK(sizeof(BFloat16) == 2);
  CHECK(sizeof(Fp8E4M3) == 1);
  CHECK(sizeof(Fp8E5M2) == 1);
}

TEST_CASE("every narrow bit pattern widens to its exact value", "[dtypes]") {
  for (const FormatSpec* f : kFormats) {
    INFO(f->name);
    int bad = 0;
    std::string first;
    for (uint32_t b = 0; b < (1u << f->totalBits()); ++b) {
      double want = refDecode(*f, b);
      float got = implToFloat(*f, b);
      bool ok = std::isnan(want)
                    ? std::isnan(got)
                    : (static_cast<double>(got) == want && std::signbit(got) == std::signbit(want));
      if (!ok && bad++ == 0) first = hex(b);
    }
    INFO("first mismatch " << first);
    CHECK(bad == 0);
  }
}

TEST_CASE("narrow values round-trip through float", "[dtypes]") {
  for (const FormatSpec* f : kFormats) {
    INFO(f->name);
    int bad = 0;
    std::string first;
    for (uint32_t b = 0; b < (1u << f->totalBits()); ++b) {
      double v = refDecode(*f, b);
      if (std::isnan(v)) {
        if (implFromFloat(*f, implToFloat(*f, b)) != f->canonicalNan && bad++ == 0) first = hex(b);
        continue;
      }
      if (std::isinf(v) && f->saturates) continue;  // e5m2 Inf: checked below
      if (implFromFloat(*f, implToFloat(*f, b)) != b && bad++ == 0) first = hex(b);
    }
    INFO("first mismatch " << first);
    CHECK(bad == 0);
  }
}

TEST_CASE("float to narrow rounds to nearest even at every midpoint", "[dtypes]") {
  for (const FormatSpec* f : kFormats) {
    INFO(f->name);
    const auto& table = finiteTable(*f);
    int bad = 0, ties = 0;
    std::string first;
    for (size_t i = 0; i + 1 < table.size(); ++i) {
      const Finite& lo = table[i];
      const Finite& hi = table[i + 1];
      float mid = static_cast<float>((lo.value + hi.value) / 2);
      REQUIRE(static_cast<double>(mid) == (lo.value + hi.value) / 2);  // exact in float
      uint32_t even = (lo.bits & 1) == 0 ? lo.bits : hi.bits;
      for (uint32_t sign : {0u, f->signBit()}) {
        float m = sign ? -mid : mid;
        float towardLo = std::nextafter(m, sign ? std::numeric_limits<float>::infinity()
                                                : -std::numeric_limits<float>::infinity());
        float towardHi = std::nextafter(m, sign ? -std::numeric_limits<float>::infinity()
                                                : std::numeric_limits<float>::infinity());
        ++ties;
        if (implFromFloat(*f, m) != (sign | even) && bad++ == 0) first = "tie " + hex(bitsOf(m));
        if (implFromFloat(*f, towardLo) != (sign | lo.bits) && bad++ == 0) {
          first = "below tie " + hex(bitsOf(towardLo));
        }
        if (implFromFloat(*f, towardHi) != (sign | hi.bits) && bad++ == 0) {
          first = "above tie " + hex(bitsOf(towardHi));
        }
      }
    }
    INFO("first mismatch " << first);
    CHECK(ties > 200);
    CHECK(bad == 0);
  }
}

TEST_CASE("float to narrow matches the reference on a million floats", "[dtypes]") {
  std::mt19937_64 rng(12345);
  for (const FormatSpec* f : kFormats) {
    INFO(f->name);
    int bad = 0;
    std::string first;
    for (int i = 0; i < 250000; ++i) {
      // Mostly near the format's range, sometimes anything at all (NaN, Inf, huge, tiny).
      uint32_t x = static_cast<uint32_t>(rng());
      if (i % 4 != 0) {
        int e = static_cast<int>(rng() % 60) - 30;
        x = (x & 0x807fffffu) | (static_cast<uint32_t>(127 + e) << 23);
      }
      float v = floatOf(x);
      if (implFromFloat(*f, v) != refRound(*f, v) && bad++ == 0) first = hex(x);
    }
    INFO("first mismatch " << first);
    CHECK(bad == 0);
  }
}

TEST_CASE("half and bfloat16 keep IEEE Inf and NaN", "[dtypes]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(floatToHalf(65504.0f).bits == 0x7bff);
  CHECK(floatToHalf(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
  CHECK(floatToHalf(65520.0f).bits == 0x7c00);  // halfway to 2^16: ties to even = Inf
  CHECK(floatToHalf(1e9f).bits == 0x7c00);
  CHECK(floatToHalf(inf).bits == 0x7c00);
  CHECK(floatToHalf(-inf).bits == 0xfc00);
  CHECK(floatToHalf(nan).bits == 0x7fff);
  CHECK(floatToHalf(-nan).bits == 0x7fff);
  CHECK(floatToHalf(0x1p-24f).bits == 0x0001);
  CHECK(floatToHalf(0x1p-25f).bits == 0x0000);  // tie with 0: even
  CHECK(floatToHalf(-0x1p-25f).bits == 0x8000);
  CHECK(floatToHalf(0x1.8p-24f).bits == 0x0002);  // tie between 1 and 2 units: even
  CHECK(floatToHalf(-0.0f).bits == 0x8000);
  CHECK(std::isinf(halfToFloat(Half{0xfc00})));
  CHECK(halfToFloat(Half{0xfc00}) < 0);
  CHECK(std::isnan(halfToFloat(Half{0x7c01})));
  CHECK(std::isnan(halfToFloat(Half{0xfe00})));

  CHECK(floatToBf16(1.0f).bits == 0x3f80);
  CHECK(floatToBf16(inf).bits == 0x7f80);
  CHECK(floatToBf16(-inf).bits == 0xff80);
  CHECK(floatToBf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds up to Inf
  CHECK(floatToBf16(nan).bits == 0x7fff);
  CHECK(floatToBf16(floatOf(0xff800001u)).bits == 0x7fff);  // signalling, negative NaN
  CHECK(std::isnan(bf16ToFloat(BFloat16{0x7f81})));
}

TEST_CASE("fp8 saturates like CUDA's __NV_SATFINITE; e4m3 has no Inf", "[dtypes]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // e4m3: largest 448 = 0x7e; 0x7f/0xff are its only NaNs.
  CHECK(fp8e4m3ToFloat(Fp8E4M3{0x7e}) == 448.0f);
  CHECK(std::isnan(fp8e4m3ToFloat(Fp8E4M3{0x7f})));
  CHECK(std::isnan(fp8e4m3ToFloat(Fp8E4M3{0xff})));
  CHECK(fp8e4m3ToFloat(Fp8E4M3{0x78}) == 256.0f);  // exponent 15 is an ordinary exponent
  CHECK(floatToFp8e4m3(448.0f).bits == 0x7e);
  CHECK(floatToFp8e4m3(464.0f).bits == 0x7e);  // tie between 448 and the NaN slot: even
  CHECK(floatToFp8e4m3(480.0f).bits == 0x7e);
  CHECK(floatToFp8e4m3(1e30f).bits == 0x7e);
  CHECK(floatToFp8e4m3(inf).bits == 0x7e);
  CHECK(floatToFp8e4m3(-inf).bits == 0xfe);
  CHECK(floatToFp8e4m3(-1e30f).bits == 0xfe);
  CHECK(floatToFp8e4m3(nan).bits == 0x7f);
  CHECK(floatToFp8e4m3(-nan).bits == 0x7f);
  CHECK(floatToFp8e4m3(0x1p-9f).bits == 0x01);
  CHECK(floatToFp8e4m3(0x1p-10f).bits == 0x00);
  CHECK(floatToFp8e4m3(0x1.8p-10f).bits == 0x01);
  CHECK(floatToFp8e4m3(-0x1p-11f).bits == 0x80);
  // e5m2: largest 57344 = 0x7b; 0x7c is Inf, 0x7d..0x7f NaN, but conversions saturate.
  CHECK(fp8e5m2ToFloat(Fp8E5M2{0x7b}) == 57344.0f);
  CHECK(fp8e5m2ToFloat(Fp8E5M2{0x7c}) == inf);
  CHECK(fp8e5m2ToFloat(Fp8E5M2{0xfc}) == -inf);
  for (uint8_t b : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff})
    CHECK(std::isnan(fp8e5m2ToFloat(Fp8E5M2{b})));
  CHECK(floatToFp8e5m2(57344.0f).bits == 0x7b);
  CHECK(floatToFp8e5m2(61439.0f).bits == 0x7b);
  CHECK(floatToFp8e5m2(61440.0f).bits == 0x7b);
  CHECK(floatToFp8e5m2(inf).bits == 0x7b);
  CHECK(floatToFp8e5m2(-inf).bits == 0xfb);
  CHECK(floatToFp8e5m2(nan).bits == 0x7f);
  CHECK(floatToFp8e5m2(0x1p-16f).bits == 0x01);
  CHECK(floatToFp8e5m2(0x1p-17f).bits == 0x00);
  CHECK(floatToFp8e5m2(0x1.000002p-17f).bits == 0x01);
}

// ==== [reduce_copy] ========================================================================

namespace {

// One datatype as the reduction tests see it: raw elements (Bits), a reference for every
// stage, random inputs and an equality that treats any two NaNs as equal.
template <class T>
struct IntCase {
  using Bits = T;
  static constexpr bool kInt = true;
  static constexpr bool kSigned = static_cast<T>(-1) < static_cast<T>(0);
  static Bits random(std::mt19937_64& rng) { return static_cast<T>(rng()); }
  static Bits randomScalar(std::mt19937_64& rng) { return static_cast<T>(rng()); }
  static uint64_t wide(Bits v) {
    return kSigned ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
  }
  static Bits sum(Bits a, Bits b) { return static_cast<T>(wide(a) + wide(b)); }
  static Bits prod(Bits a, Bits b) { return static_cast<T>(wide(a) * wide(b)); }
  static Bits max(Bits a, Bits b) { return a < b ? b : a; }
  static Bits min(Bits a, Bits b) { return b < a ? b : a; }
  static Bits post(Bits v, int n) {
    if (kSigned) return static_cast<T>(static_cast<int64_t>(v) / n);
    return static_cast<T>(static_cast<uint64_t>(v) / static_cast<uint64_t>(n));
  }
  static Bits avgScalar(int) { return 0; }
  static bool same(Bits a, Bits b) { return a == b; }
  static std::string show(Bits v) { return std::to_string(static_cast<int64_t>(wide(v))); }
};

// Max/min of the reference: NaN ignored, -0 below +0.
template <class D>
D refMax(D a, D b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? b : a;
  return a < b ? b : a;
}
template <class D>
D refMin(D a, D b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? a : b;
  return b < a ? b : a;
}

// float and double: the reference computes in double; a float result rounded from double
// equals the float operation (double has more than 2 * 24 + 2 bits).
template <class T>
struct IeeeCase {
  using Bits = T;
  static constexpr bool kInt = false;
  static Bits random(std::mt19937_64& rng) {
    // Products of a few values stay finite; mantissas are full, signs and zeros mixed in.
    if (rng() % 16 == 0) return (rng() & 1) ? T(0) : -T(0);
    double m = std::ldexp(static_cast<double>(rng() >> 11), -53);  // [0, 1)
    T v = static_cast<T>(std::ldexp(1.0 + m, static_cast<int>(rng() % 40) - 20));
    return (rng() & 1) ? -v : v;
  }
  static Bits randomScalar(std::mt19937_64& rng) { return random(rng); }
  static Bits sum(Bits a, Bits b) { return static_cast<T>(double(a) + double(b)); }
  static Bits prod(Bits a, Bits b) { return static_cast<T>(double(a) * double(b)); }
  static Bits max(Bits a, Bits b) { return refMax(a, b); }
  static Bits min(Bits a, Bits b) { return refMin(a, b); }
  static Bits post(Bits v, int) { return v; }
  static Bits avgScalar(int n) { return static_cast<T>(1.0 / n); }
  static bool same(Bits a, Bits b) {
    return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
  }
  static std::string show(Bits v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }
};

// The narrow formats: reference arithmetic in double on decoded values, then refRound.
template <class Storage, const FormatSpec& kSpec>
struct NarrowCase {
  using Bits = Storage;
  static constexpr bool kInt = false;
  static double val(Bits b) { return refDecode(kSpec, b); }
  static Bits round(double v) { return static_cast<Bits>(refRound(kSpec, v)); }
  static Bits random(std::mt19937_64& rng) {
    // Any bit pattern but NaN (Inf included where the format has one).
    for (;;) {
      Bits b = static_cast<Bits>(rng());
      if (!std::isnan(val(b))) return b;
    }
  }
  static Bits randomScalar(std::mt19937_64& rng) {
    for (;;) {
      Bits b = random(rng);
      if (std::isfinite(val(b))) return b;
    }
  }
  static Bits sum(Bits a, Bits b) { return round(val(a) + val(b)); }
  static Bits prod(Bits a, Bits b) { return round(val(a) * val(b)); }
  static Bits max(Bits a, Bits b) { return round(refMax(val(a), val(b))); }
  static Bits min(Bits a, Bits b) { return round(refMin(val(a), val(b))); }
  static Bits post(Bits v, int) { return v; }
  static Bits avgScalar(int n) { return round(static_cast<float>(1.0 / n)); }
  static bool same(Bits a, Bits b) { return a == b || (std::isnan(val(a)) && std::isnan(val(b))); }
  static std::string show(Bits v) { return hex(v); }
};

using Int8Case = IntCase<int8_t>;
using Uint8Case = IntCase<uint8_t>;
using Int32Case = IntCase<int32_t>;
using Uint32Case = IntCase<uint32_t>;
using Int64Case = IntCase<int64_t>;
using Uint64Case = IntCase<uint64_t>;
using FloatCase = IeeeCase<float>;
using DoubleCase = IeeeCase<double>;
using HalfCase = NarrowCase<uint16_t, kHalf>;
using Bf16Case = NarrowCase<uint16_t, kBf16>;
using E4m3Case = NarrowCase<uint8_t, kE4m3>;
using E5m2Case = NarrowCase<uint8_t, kE5m2>;

enum class TestOp { Sum, Prod, Max, Min, Avg, PreMulSum };
const TestOp kTestOps[] = {TestOp::Sum, TestOp::Prod, TestOp::Max,
                           TestOp::Min, TestOp::Avg,  TestOp::PreMulSum};
const char* opName(TestOp op) {
  switch (op) {
    case TestOp::Sum:
      return "sum";
    case TestOp::Prod:
      return "prod";
    case TestOp::Max:
      return "max";
    case TestOp::Min:
      return "min";
    case TestOp::Avg:
      return "avg";
    case TestOp::PreMulSum:
      return "premulsum";
  }
  return "?";
}

// The reference of one whole reduction over `inputs` (one vector per rank), as a ring
// computes it: acc = pre(in0); acc = pre(in_r) (op) acc for r = 1..n-1; post at the end.
template <class Case>
std::vector<typename Case::Bits> referenceReduce(
    TestOp op, const std::vector<std::vector<typename Case::Bits>>& inputs,
    typename Case::Bits scalar) {
  using Bits = typename Case::Bits;
  const int n = static_cast<int>(inputs.size());
  const bool premul = op == TestOp::PreMulSum || (op == TestOp::Avg && !Case::kInt);
  const Bits s = op == TestOp::Avg ? Case::avgScalar(n) : scalar;
  std::vector<Bits> out(inputs[0].size());
  for (size_t k = 0; k < out.size(); ++k) {
    auto pre = [&](Bits x) { return premul ? Case::prod(x, s) : x; };
    Bits acc = pre(inputs[0][k]);
    for (int r = 1; r < n; ++r) {
      Bits x = pre(inputs[r][k]);
      switch (op) {
        case TestOp::Prod:
          acc = Case::prod(x, acc);
          break;
        case TestOp::Max:
          acc = Case::max(x, acc);
          break;
        case TestOp::Min:
          acc = Case::min(x, acc);
          break;
        default:
          acc = Case::sum(x, acc);
          break;
      }
    }
    if (op == TestOp::Avg && Case::kInt) acc = Case::post(acc, n);
    out[k] = acc;
  }
  return out;
}

template <class Bits>
RedOp redOpFor(TestOp op, ncclDataType_t type, int nranks, const Bits* scalar) {
  switch (op) {
    case TestOp::Sum:
      return makeRedOp(ncclSum, type, nranks);
    case TestOp::Prod:
      return makeRedOp(ncclProd, type, nranks);
    case TestOp::Max:
      return makeRedOp(ncclMax, type, nranks);
    case TestOp::Min:
      return makeRedOp(ncclMin, type, nranks);
    case TestOp::Avg:
      return makeRedOp(ncclAvg, type, nranks);
    case TestOp::PreMulSum:
      return makePreMulSum(type, scalar, false);
  }
  return makeRedOp(ncclSum, type, nranks);
}

// Runs the same reduction through reduceCopy: a local-only first step, then local + peer
// steps into a fresh buffer, the last one with applyPost.
template <class Bits>
std::vector<Bits> implReduce(ncclDataType_t type, const RedOp& op,
                             const std::vector<std::vector<Bits>>& inputs) {
  const size_t count = inputs[0].size();
  std::vector<Bits> acc(count), next(count);
  reduceCopy(type, op, inputs[0].data(), nullptr, acc.data(), nullptr, count, inputs.size() == 1);
  for (size_t r = 1; r < inputs.size(); ++r) {
    reduceCopy(type, op, inputs[r].data(), acc.data(), next.data(), nullptr, count,
               r + 1 == inputs.size());
    acc.swap(next);
  }
  return acc;
}

template <class Case>
void checkEveryOp(ncclDataType_t type) {
  using Bits = typename Case::Bits;
  REQUIRE(dataTypeSize(type) == sizeof(Bits));
  std::mt19937_64 rng(1000 + static_cast<int>(type));
  for (TestOp op : kTestOps) {
    for (int nranks : {1, 2, 3, 5}) {
      for (size_t count : {size_t(1), size_t(33), size_t(1001)}) {
        std::vector<std::vector<Bits>> inputs(nranks, std::vector<Bits>(count));
        for (auto& in : inputs) {
          for (auto& x : in) x = Case::random(rng);
        }
        Bits scalar = Case::randomScalar(rng);
        RedOp redop = redOpFor(op, type, nranks, &scalar);
        std::vector<Bits> want = referenceReduce<Case>(op, inputs, scalar);
        std::vector<Bits> got = implReduce(type, redop, inputs);
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < count; ++k) {
          if (!Case::same(got[k], want[k]) && bad++ == 0) first = k;
        }
        INFO(opName(op) << " nranks " << nranks << " count " << count);
        INFO("first mismatch at " << first << ": got " << Case::show(got[first]) << " want "
                                  << Case::show(want[first]));
        CHECK(bad == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("reduceCopy: every datatype x op equals the reference", "[reduce_copy]") {
  checkEveryOp<Int8Case>(ncclInt8);
  checkEveryOp<Uint8Case>(ncclUint8);
  checkEveryOp<Int32Case>(ncclInt32);
  checkEveryOp<Uint32Case>(ncclUint32);
  checkEveryOp<Int64Case>(ncclInt64);
  checkEveryOp<Uint64Case>(ncclUint64);
  checkEveryOp<FloatCase>(ncclFloat32);
  checkEveryOp<DoubleCase>(ncclFloat64);
  checkEveryOp<HalfCase>(ncclFloat16);
  checkEveryOp<Bf16Case>(ncclBfloat16);
  checkEveryOp<E4m3Case>(ncclFloat8e4m3);
  checkEveryOp<E5m2Case>(ncclFloat8e5m2);
}

TEST_CASE("makeRedOp encodes Avg as NCCL does", "[reduce_copy]") {
  RedOp sum = makeRedOp(ncclSum, ncclFloat32, 4);
  CHECK(sum.kind == RedOpKind::Sum);
  CHECK(sum.postDivisor == 0);
  CHECK(makeRedOp(ncclProd, ncclInt32, 4).kind == RedOpKind::Prod);
  CHECK(makeRedOp(ncclMax, ncclInt32, 4).kind == RedOpKind::Max);
  CHECK(makeRedOp(ncclMin, ncclInt32, 4).kind == RedOpKind::Min);

  RedOp intAvg = makeRedOp(ncclAvg, ncclInt8, 7);
  CHECK(intAvg.kind == RedOpKind::Sum);
  CHECK(intAvg.postDivisor == 7);

  auto scalarOf = [](ncclDataType_t type, int n) { return makeRedOp(ncclAvg, type, n); };
  RedOp h = scalarOf(ncclFloat16, 3);
  CHECK(h.kind == RedOpKind::PreMulSum);
  CHECK(h.postDivisor == 0);
  CHECK(h.scalarPtr == nullptr);
  CHECK(redOpScalar<uint16_t>(h) == 0x3555);  // half(1/3)
  CHECK(redOpScalar<uint16_t>(scalarOf(ncclBfloat16, 3)) == 0x3eab);
  CHECK(redOpScalar<float>(scalarOf(ncclFloat32, 4)) == 0.25f);
  CHECK(redOpScalar<float>(scalarOf(ncclFloat32, 3)) == static_cast<float>(1.0 / 3));
  CHECK(redOpScalar<double>(scalarOf(ncclFloat64, 3)) == 1.0 / 3);
  CHECK(redOpScalar<uint8_t>(scalarOf(ncclFloat8e4m3, 3)) == 0x2b);  // 0.34375
  CHECK(redOpScalar<uint8_t>(scalarOf(ncclFloat8e5m2, 3)) == 0x35);  // 0.3125

  int32_t seven = 7;
  RedOp imm = makePreMulSum(ncclInt32, &seven, false);
  seven = 8;  // copied at creation
  CHECK(imm.kind == RedOpKind::PreMulSum);
  CHECK(redOpScalar<int32_t>(imm) == 7);
  RedOp dev = makePreMulSum(ncclInt32, &seven, true);
  CHECK(dev.scalarPtr == &seven);
  CHECK(redOpScalar<int32_t>(dev) == 8);
}

TEST_CASE("PreMulSum with a device-resident scalar reads it at each call", "[reduce_copy]") {
  float scalar = 2.0f;
  RedOp op = makePreMulSum(ncclFloat32, &scalar, true);
  std::vector<float> local = {1, 2, 3}, peer = {10, 20, 30}, out(3);
  reduceCopy(ncclFloat32, op, local.data(), peer.data(), out.data(), nullptr, 3, true);
  CHECK(out == std::vector<float>{12, 24, 36});
  scalar = -1.0f;
  reduceCopy(ncclFloat32, op, local.data(), peer.data(), out.data(), nullptr, 3, true);
  CHECK(out == std::vector<float>{9, 18, 27});
  // Only local is pre-multiplied; a peer-only step copies.
  reduceCopy(ncclFloat32, op, nullptr, peer.data(), out.data(), nullptr, 3, true);
  CHECK(out == peer);
  reduceCopy(ncclFloat32, op, local.data(), nullptr, out.data(), nullptr, 3, false);
  CHECK(out == std::vector<float>{-1, -2, -3});
}

TEST_CASE("integer Avg divides only when applyPost, truncating toward zero", "[reduce_copy]") {
  RedOp avg2 = makeRedOp(ncclAvg, ncclInt32, 2);
  std::vector<int32_t> a = {-7, 7, -1, 5, INT32_MIN}, b = {0, 0, 0, 4, 0}, out(5);
  reduceCopy(ncclInt32, avg2, a.data(), b.data(), out.data(), nullptr, 5, false);
  CHECK(out == std::vector<int32_t>{-7, 7, -1, 9, INT32_MIN});
  reduceCopy(ncclInt32, avg2, a.data(), b.data(), out.data(), nullptr, 5, true);
  CHECK(out == std::vector<int32_t>{-3, 3, 0, 4, INT32_MIN / 2});

  // int8 wraps before it divides (100 + 100 = -56), and a divisor beyond int8's range works.
  std::vector<int8_t> c = {100, -128, 127}, d = {100, -1, 0}, o8(3);
  reduceCopy(ncclInt8, makeRedOp(ncclAvg, ncclInt8, 2), c.data(), d.data(), o8.data(), nullptr, 3,
             true);
  CHECK(o8 == std::vector<int8_t>{-28, 63, 63});
  reduceCopy(ncclInt8, makeRedOp(ncclAvg, ncclInt8, 300), c.data(), nullptr, o8.data(), nullptr, 3,
             true);
  CHECK(o8 == std::vector<int8_t>{0, 0, 0});
  std::vector<uint8_t> e = {200, 255}, f = {100, 255}, ou(2);
  reduceCopy(ncclUint8, makeRedOp(ncclAvg, ncclUint8, 2), e.data(), f.data(), ou.data(), nullptr, 2,
             true);
  CHECK(ou == std::vector<uint8_t>{22, 127});  // (300 mod 256) / 2, (510 mod 256) / 2

  // One source with post: local-only and peer-only steps divide as well.
  std::vector<uint64_t> g = {9, 10, 11}, og(3);
  RedOp avg3 = makeRedOp(ncclAvg, ncclUint64, 3);
  reduceCopy(ncclUint64, avg3, g.data(), nullptr, og.data(), nullptr, 3, true);
  CHECK(og == std::vector<uint64_t>{3, 3, 3});
  reduceCopy(ncclUint64, avg3, nullptr, g.data(), og.data(), nullptr, 3, true);
  CHECK(og == std::vector<uint64_t>{3, 3, 3});
  reduceCopy(ncclUint64, avg3, nullptr, g.data(), og.data(), nullptr, 3, false);
  CHECK(og == g);
  // applyPost is harmless for every other op.
  std::vector<int64_t> h = {5, -5}, i = {2, 2}, oh(2);
  reduceCopy(ncclInt64, makeRedOp(ncclSum, ncclInt64, 4), h.data(), i.data(), oh.data(), nullptr, 2,
             true);
  CHECK(oh == std::vector<int64_t>{7, -3});
}

TEST_CASE("NaN and Inf in reductions behave as in NCCL", "[reduce_copy]") {
  auto half2 = [](uint16_t a, uint16_t b, ncclRedOp_t op) {
    uint16_t x[2] = {a, b}, y[2] = {b, a}, o[2];
    reduceCopy(ncclFloat16, makeRedOp(op, ncclFloat16, 2), x, y, o, nullptr, 2, true);
    CHECK(o[0] == o[1]);  // the result does not depend on operand order
    return o[0];
  };
  const uint16_t hInf = 0x7c00, hNegInf = 0xfc00, hOne = 0x3c00, hMax = 0x7bff, hNan = 0x7e00;
  CHECK(half2(hInf, hOne, ncclSum) == hInf);
  CHECK(half2(hInf, hNegInf, ncclSum) == 0x7fff);
  CHECK(half2(hMax, hMax, ncclSum) == hInf);  // overflow is Inf for half
  CHECK(half2(hNan, hOne, ncclSum) == 0x7fff);
  CHECK(half2(hNan, hOne, ncclMax) == hOne);  // max/min ignore a NaN operand
  CHECK(half2(hNan, hOne, ncclMin) == hOne);
  CHECK(half2(hNan, 0xfe01, ncclMax) == 0x7fff);
  CHECK(half2(0x8000, 0x0000, ncclMax) == 0x0000);  // +0 beats -0
  CHECK(half2(0x8000, 0x0000, ncclMin) == 0x8000);

  auto f8 = [](ncclDataType_t type, uint8_t a, uint8_t b, ncclRedOp_t op) {
    uint8_t x[1] = {a}, y[1] = {b}, o[1];
    reduceCopy(type, makeRedOp(op, type, 2), x, y, o, nullptr, 1, true);
    return o[0];
  };
  CHECK(f8(ncclFloat8e4m3, 0x7e, 0x7e, ncclSum) == 0x7e);  // 448 + 448 saturates to 448
  CHECK(f8(ncclFloat8e4m3, 0xfe, 0xfe, ncclSum) == 0xfe);
  CHECK(f8(ncclFloat8e4m3, 0x7f, 0x38, ncclSum) == 0x7f);  // NaN stays NaN
  CHECK(f8(ncclFloat8e4m3, 0x7e, 0x48, ncclProd) == 0x7e);
  CHECK(f8(ncclFloat8e5m2, 0x7c, 0x3c, ncclSum) == 0x7b);  // Inf + 1 saturates to 57344
  CHECK(f8(ncclFloat8e5m2, 0x7b, 0x7b, ncclSum) == 0x7b);
  CHECK(f8(ncclFloat8e5m2, 0x7c, 0xfc, ncclSum) == 0x7f);  // Inf - Inf is NaN
  CHECK(f8(ncclFloat8e5m2, 0x7d, 0x3c, ncclMax) == 0x3c);

  uint16_t bInf[1] = {0x7f80}, bOne[1] = {0x3f80}, bOut[1];
  reduceCopy(ncclBfloat16, makeRedOp(ncclSum, ncclBfloat16, 2), bInf, bOne, bOut, nullptr, 1, true);
  CHECK(bOut[0] == 0x7f80);

  // A copy moves bits untouched: an e5m2 Inf and a float NaN payload survive.
  uint8_t e5Inf[2] = {0x7c, 0xfd}, e5Out[2];
  reduceCopy(ncclFloat8e5m2, makeRedOp(ncclSum, ncclFloat8e5m2, 2), nullptr, e5Inf, e5Out, nullptr,
             2, true);
  CHECK(e5Out[0] == 0x7c);
  CHECK(e5Out[1] == 0xfd);
  float payload = floatOf(0xffc01234u), fOut = 0;
  reduceCopy(ncclFloat32, makeRedOp(ncclMax, ncclFloat32, 2), &payload, nullptr, &fOut, nullptr, 1,
             true);
  CHECK(bitsOf(fOut) == 0xffc01234u);

  float fa[3] = {std::numeric_limits<float>::quiet_NaN(), 1.0f, -0.0f};
  float fb[3] = {2.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f}, fo[3];
  reduceCopy(ncclFloat32, makeRedOp(ncclMax, ncclFloat32, 2), fa, fb, fo, nullptr, 3, true);
  CHECK(fo[0] == 2.0f);
  CHECK(fo[1] == 1.0f);
  CHECK(bitsOf(fo[2]) == 0);
  reduceCopy(ncclFloat32, makeRedOp(ncclMin, ncclFloat32, 2), fb, fa, fo, nullptr, 3, true);
  CHECK(fo[0] == 2.0f);
  CHECK(fo[1] == 1.0f);
  CHECK(bitsOf(fo[2]) == 0x80000000u);
}

TEST_CASE("reduceCopy works in place, to two destinations, for odd counts", "[reduce_copy]") {
  std::mt19937_64 rng(7);
  for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(31), size_t(32), size_t(33),
                       size_t(63), size_t(64), size_t(65), size_t(1000), size_t(1001)}) {
    for (ncclRedOp_t builtin : {ncclSum, ncclMax, ncclAvg}) {
      for (ncclDataType_t type :
           {ncclInt32, ncclFloat32, ncclFloat16, ncclFloat8e4m3, ncclFloat64}) {
        INFO("count " << count << " op " << builtin << " type " << type);
        const size_t es = dataTypeSize(type);
        // Inputs from integers small enough to be exact in every type; the extra element in
        // front of each buffer makes the data start misaligned.
        auto make = [&](size_t n) {
          std::vector<unsigned char> v((n + 1) * es, 0xab);
          for (size_t k = 0; k < n; ++k) {
            float x = static_cast<float>(static_cast<int>(rng() % 9) - 4);
            switch (type) {
              case ncclInt32: {
                int32_t i = static_cast<int32_t>(x);
                std::memcpy(&v[(k + 1) * es], &i, es);
                break;
              }
              case ncclFloat16: {
                uint16_t h = floatToHalf(x).bits;
                std::memcpy(&v[(k + 1) * es], &h, es);
                break;
              }
              case ncclFloat8e4m3:
                v[k + 1] = floatToFp8e4m3(x).bits;
                break;
              case ncclFloat64: {
                double d = x;
                std::memcpy(&v[(k + 1) * es], &d, es);
                break;
              }
              default:
                std::memcpy(&v[(k + 1) * es], &x, es);
            }
          }
          return v;
        };
        RedOp op = makeRedOp(builtin, type, 2);
        auto local = make(count), peer = make(count);
        auto at = [&](std::vector<unsigned char>& v) { return v.data() + es; };
        std::vector<unsigned char> want((count + 1) * es, 0xcd);
        reduceCopy(type, op, at(local), at(peer), at(want), nullptr, count, true);
        // Sentinels in front of every buffer and after the last element stay untouched.
        CHECK(want[0] == 0xcd);

        auto same = [&](std::vector<unsigned char>& v) {
          return std::memcmp(at(v), at(want), count * es) == 0;
        };
        {  // dst0 == local
          auto io = local;
          reduceCopy(type, op, at(io), at(peer), at(io), nullptr, count, true);
          CHECK(same(io));
        }
        {  // dst1 == local, dst0 elsewhere
          auto io = local;
          std::vector<unsigned char> other((count + 2) * es, 0xee);
          reduceCopy(type, op, at(io), at(peer), at(other), at(io), count, true);
          CHECK(same(io));
          CHECK(same(other));
          CHECK(other[(count + 1) * es] == 0xee);
        }
        {  // only dst1, and both destinations out of place
          std::vector<unsigned char> d0((count + 1) * es, 0x11), d1((count + 1) * es, 0x22);
          reduceCopy(type, op, at(local), at(peer), nullptr, at(d1), count, true);
          CHECK(same(d1));
          reduceCopy(type, op, at(local), at(peer), at(d0), at(d1), count, true);
          CHECK(same(d0));
          CHECK(same(d1));
        }
        {  // strided: four "threads" together do exactly the whole slice
          std::vector<unsigned char> d((count + 1) * es, 0x33);
          for (size_t t = 0; t < 4; ++t) {
            reduceCopyStrided(type, op, at(local), at(peer), at(d), nullptr, count, true, t, 4);
          }
          CHECK(same(d));
        }
        {  // no destination or no source: nothing is written
          auto untouched = local;
          reduceCopy(type, op, at(local), at(peer), nullptr, nullptr, count, true);
          reduceCopy(type, op, nullptr, nullptr, at(untouched), nullptr, count, true);
          CHECK(untouched == local);
        }
        {  // local-only copies in place are no-ops; to a second buffer they copy
          auto io = local;
          RedOp sum = makeRedOp(ncclSum, type, 2);
          reduceCopy(type, sum, at(io), nullptr, at(io), nullptr, count, true);
          CHECK(io == local);
          std::vector<unsigned char> d((count + 1) * es, 0x44);
          reduceCopy(type, sum, at(io), nullptr, at(io), at(d), count, true);
          CHECK(std::memcmp(at(d), at(local), count * es) == 0);
        }
      }
    }
  }
}

TEST_CASE("count 0 writes nothing", "[reduce_copy]") {
  int32_t a[2] = {1, 2}, b[2] = {3, 4}, d[2] = {-1, -1};
  reduceCopy(ncclInt32, makeRedOp(ncclSum, ncclInt32, 2), a, b, d, nullptr, 0, true);
  CHECK(d[0] == -1);
  CHECK(d[1] == -1);
  reduceCopyStrided(ncclInt32, makeRedOp(ncclSum, ncclInt32, 2), a, b, d, nullptr, 2, true, 2,
                    4);  // first beyond count
  CHECK(d[0] == -1);
  CHECK(d[1] == -1);
}

TEST_CASE("copyBytes moves bytes and ignores dst == src", "[reduce_copy]") {
  std::vector<unsigned char> src(77), dst(77, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  copyBytes(dst.data(), src.data(), src.size());
  CHECK(dst == src);
  copyBytes(src.data(), src.data(), src.size());
  CHECK(dst == src);
  copyBytes(dst.data(), nullptr, 0);
}

// ==== reduceCopyPacked =====================================================================
//
// The packed walk against the element walk it must equal bit for bit. The reference is
// reduceCopy itself (checked against the independent reference above), so these tests are
// about the walk: the cut at 16-byte boundaries, the pack loads and stores, the dealing to
// workers, the fallback when pointers do not line up, in place and two destinations.

namespace {

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

const char* typeName(ncclDataType_t t) {
  static const char* const names[] = {"int8", "uint8", "int32",  "uint32",   "int64", "uint64",
                                      "half", "float", "double", "bfloat16", "e4m3",  "e5m2"};
  return dataTypeValid(t) ? names[t] : "?";
}

// Element `p` (raw bytes of `type`) is a NaN.
bool isNanElem(ncclDataType_t type, const unsigned char* p) {
  const uint8_t b8 = p[0];
  uint16_t b16 = 0;
  if (dataTypeSize(type) >= 2) std::memcpy(&b16, p, 2);
  switch (type) {
    case ncclFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case ncclFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    case ncclFloat16:
      return std::isnan(halfToFloat(Half{b16}));
    case ncclBfloat16:
      return std::isnan(bf16ToFloat(BFloat16{b16}));
    case ncclFloat8e4m3:
      return std::isnan(fp8e4m3ToFloat(Fp8E4M3{b8}));
    case ncclFloat8e5m2:
      return std::isnan(fp8e5m2ToFloat(Fp8E5M2{b8}));
    default:
      return false;
  }
}

// Values worth meeting in every datatype, as little-endian bytes: zeros of both signs, Infs,
// NaNs with payloads (signalling ones too), the extremes of the integers.
std::vector<uint64_t> specialsOf(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32:
      return {0,           0x80000000u, 0x7f800000u, 0xff800000u,
              0x7fc01234u, 0xffa00001u, 0x7f800001u, 0x3f800000u};
    case ncclFloat64:
      return {0,
              0x8000000000000000ull,
              0x7ff0000000000000ull,
              0xfff0000000000000ull,
              0x7ff8000000001234ull,
              0xfff4000000000001ull,
              0x3ff0000000000000ull};
    case ncclFloat16:
      return {0, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0xfd55, 0x7bff, 0x3c00};
    case ncclBfloat16:
      return {0, 0x8000, 0x7f80, 0xff80, 0x7fc1, 0xff81, 0x7f7f, 0x3f80};
    case ncclFloat8e4m3:
      return {0, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x38};
    case ncclFloat8e5m2:
      return {0, 0x80, 0x7c, 0xfc, 0x7d, 0xfe, 0x7b, 0x3c};
    default: {
      const size_t bits = 8 * dataTypeSize(type);
      const uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
      return {0, all, all >> 1, (all >> 1) + 1, 1};  // 0, -1/max, max/min signed, 1
    }
  }
}

// `count` elements of `type`: random bits, a special value one time in four.
std::vector<unsigned char> randomElems(ncclDataType_t type, size_t count, std::mt19937_64& rng) {
  const size_t es = dataTypeSize(type);
  const std::vector<uint64_t> specials = specialsOf(type);
  std::vector<unsigned char> v(count * es);
  for (size_t k = 0; k < count; ++k) {
    uint64_t x = rng();
    if (rng() % 4 == 0) x = specials[rng() % specials.size()];
    std::memcpy(&v[k * es], &x, es);
  }
  return v;
}

// Bytes of a run placed `offset` bytes past a 16-byte boundary, with guard bytes around it.
class Placed {
 public:
  Placed(size_t bytes, size_t offset, unsigned char guard)
      : raw_(bytes + 64, guard), bytes_(bytes), guard_(guard) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(raw_.data()) + 16;
    start_ = ((base + 15) & ~uintptr_t{15}) - reinterpret_cast<uintptr_t>(raw_.data()) + offset;
  }
  Placed(const std::vector<unsigned char>& content, size_t offset, unsigned char guard)
      : Placed(content.size(), offset, guard) {
    if (!content.empty()) std::memcpy(data(), content.data(), content.size());
  }
  unsigned char* data() { return raw_.data() + start_; }
  std::vector<unsigned char> content() const {
    return std::vector<unsigned char>(raw_.begin() + start_, raw_.begin() + start_ + bytes_);
  }
  bool guardsIntact() const {
    for (size_t i = 0; i < raw_.size(); ++i) {
      if ((i < start_ || i >= start_ + bytes_) && raw_[i] != guard_) return false;
    }
    return true;
  }

 private:
  std::vector<unsigned char> raw_;
  size_t bytes_, start_;
  unsigned char guard_;
};

// The op configurations of the packed tests: every op, Avg with and without its post step.
struct OpCase {
  const char* name;
  ncclRedOp_t builtin;  // ignored for PreMulSum
  bool preMulSum;
  bool applyPost;
};
const OpCase kOpCases[] = {
    {"sum", ncclSum, false, true},      {"prod", ncclProd, false, true},
    {"max", ncclMax, false, true},      {"min", ncclMin, false, true},
    {"avg+post", ncclAvg, false, true}, {"avg-post", ncclAvg, false, false},
    {"premulsum", ncclSum, true, true},
};

RedOp redOpOf(const OpCase& c, ncclDataType_t type, const std::vector<unsigned char>& scalar) {
  return c.preMulSum ? makePreMulSum(type, scalar.data(), false) : makeRedOp(c.builtin, type, 3);
}

// Offsets (bytes past a boundary) of local, peer, dst0 and dst1: every common misalignment
// that is a whole number of elements (a GPU cannot address a misaligned element), then
// pointers misaligned against each other, one at a time and all at once.
struct Offsets {
  size_t local, peer, dst0, dst1;
};
std::vector<Offsets> offsetCases(size_t es) {
  std::vector<Offsets> out;
  for (size_t m = 0; m < 16; m += es) out.push_back({m, m, m, m});
  const size_t d = es;
  out.push_back({d, 0, 0, 0});
  out.push_back({0, d, 0, 0});
  out.push_back({0, 0, d, 0});
  out.push_back({0, 0, 0, d});
  out.push_back({0, es % 16, (2 * es) % 16, (3 * es) % 16});
  out.push_back({16 - es, 16 - es, 16 - es, (16 - es + d) % 16});
  return out;
}

enum Srcs { kSrcBoth, kSrcLocal, kSrcPeer };
enum Dsts { kDstOne, kDstTwo, kDstInPlace, kDstInPlaceTwo };
const char* const kSrcNames[] = {"local+peer", "local only", "peer only"};
const char* const kDstNames[] = {"dst0", "dst0+dst1", "in place", "in place+dst1"};

struct PackedTally {
  size_t runs = 0, packRuns = 0, fallbackRuns = 0, bad = 0;
  std::string first;
};

// One datatype: every op case x count x offsets x sources x destinations x worker count.
void checkPackedEqualsElementwise(ncclDataType_t type, PackedTally& t) {
  const size_t es = dataTypeSize(type);
  std::mt19937_64 rng(4242 + static_cast<int>(type));
  for (const OpCase& oc : kOpCases) {
    for (size_t count :
         {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(1000), size_t(4099)}) {
      for (const Offsets& off : offsetCases(es)) {
        std::vector<unsigned char> local = randomElems(type, count, rng);
        std::vector<unsigned char> peer = randomElems(type, count, rng);
        // At most one NaN per element: which of two NaN payloads an IEEE add keeps is not
        // promised, and the compiler may order the operands differently in the two walks.
        for (size_t k = 0; k < count; ++k) {
          if (isNanElem(type, &local[k * es]) && isNanElem(type, &peer[k * es])) {
            std::memset(&peer[k * es], 0, es);
          }
        }
        std::vector<unsigned char> scalar = randomElems(type, 1, rng);
        if (isNanElem(type, scalar.data())) std::memset(scalar.data(), 0, es);
        const RedOp op = redOpOf(oc, type, scalar);
        Placed L(local, off.local, 0x5a), P(peer, off.peer, 0x5b);
        for (int srcs : {kSrcBoth, kSrcLocal, kSrcPeer}) {
          const void* l = srcs != kSrcPeer ? L.data() : nullptr;
          const void* p = srcs != kSrcLocal ? P.data() : nullptr;
          std::vector<unsigned char> want(count * es, 0);
          reduceCopy(type, op, l, p, want.data(), nullptr, count, oc.applyPost);
          for (int dsts : {kDstOne, kDstTwo, kDstInPlace, kDstInPlaceTwo}) {
            const bool inPlace = dsts == kDstInPlace || dsts == kDstInPlaceTwo;
            if (inPlace && srcs == kSrcPeer) continue;  // only `local` may be a destination
            const bool two = dsts == kDstTwo || dsts == kDstInPlaceTwo;
            for (size_t nWorkers : {size_t(1), size_t(3), size_t(32)}) {
              Placed io(local, off.local, 0x5a);
              Placed d0(count * es, inPlace ? off.local : off.dst0, 0xc3);
              Placed d1(count * es, off.dst1, 0x3c);
              unsigned char* dst0 = inPlace ? io.data() : d0.data();
              unsigned char* dst1 = two ? d1.data() : nullptr;
              const void* src = inPlace ? io.data() : l;
              for (size_t w = 0; w < nWorkers; ++w) {
                reduceCopyPacked(type, op, src, p, dst0, dst1, count, oc.applyPost, w, nWorkers);
              }
              const PackSplit cut = packSplit(es, count, src, p, dst0, dst1);
              ++t.runs;
              (cut.packs > 0 ? t.packRuns : t.fallbackRuns)++;
              const std::vector<unsigned char> got0 = inPlace ? io.content() : d0.content();
              std::string why;
              if (got0 != want) {
                size_t k = 0;
                for (; k < count; ++k) {
                  if (std::memcmp(&got0[k * es], &want[k * es], es) != 0) break;
                }
                uint64_t g = 0, w0 = 0;
                if (k < count) {
                  std::memcpy(&g, &got0[k * es], es);
                  std::memcpy(&w0, &want[k * es], es);
                }
                why = "dst0 element " + std::to_string(k) + " got " + hex(g) + " want " + hex(w0);
              } else if (two && d1.content() != want) {
                why = "dst1 differs";
              } else if (!io.guardsIntact() || !d0.guardsIntact() || !d1.guardsIntact()) {
                why = "bytes outside a destination changed";
              } else if (!two && d1.content() != std::vector<unsigned char>(count * es, 0x3c)) {
                why = "dst1 written though null";
              } else if (!inPlace && io.content() != local) {
                why = "local changed";
              } else if (L.content() != local || P.content() != peer || !L.guardsIntact() ||
                         !P.guardsIntact()) {
                why = "a source changed";
              }
              if (!why.empty() && t.bad++ == 0) {
                std::ostringstream s;
                s << typeName(type) << " " << oc.name << " count " << count << " offsets "
                  << off.local << "/" << off.peer << "/" << off.dst0 << "/" << off.dst1 << " "
                  << kSrcNames[srcs] << " " << kDstNames[dsts] << " workers " << nWorkers << ": "
                  << why;
                t.first = s.str();
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("packSplit cuts at 16-byte boundaries only when all pointers line up", "[reduce_copy]") {
  alignas(16) unsigned char buf[4][64];
  auto at = [&](int b, size_t off) { return static_cast<void*>(buf[b] + off); };
  // Aligned floats: no head, 1024 packs, 3 elements of tail.
  PackSplit c = packSplit(4, 4099, at(0, 0), at(1, 0), at(2, 0), at(3, 0));
  CHECK(c.head == 0);
  CHECK(c.packs == 1024);
  // 4 bytes past a boundary: 3 elements up to the next, then packs.
  c = packSplit(4, 4099, at(0, 4), at(1, 4), at(2, 4), nullptr);
  CHECK(c.head == 3);
  CHECK(c.packs == 1024);  // (4099 - 3) / 4, tail 0
  c = packSplit(1, 100, at(0, 15), nullptr, at(2, 15), nullptr);
  CHECK(c.head == 1);
  CHECK(c.packs == 6);  // 99 / 16, tail 3
  c = packSplit(8, 3, at(0, 8), at(1, 8), at(2, 8), nullptr);
  CHECK(c.head == 1);
  CHECK(c.packs == 1);
  // A count that ends before the first boundary: all head.
  c = packSplit(2, 3, at(0, 6), at(1, 6), at(2, 6), nullptr);
  CHECK(c.head == 3);
  CHECK(c.packs == 0);
  // Null pointers do not count; one pointer off by an element, or off by less than an
  // element, and there are no packs.
  c = packSplit(4, 64, nullptr, at(1, 8), at(2, 8), nullptr);
  CHECK(c.head == 2);
  CHECK(c.packs == 15);
  for (int which = 0; which < 4; ++which) {
    void* p[4] = {at(0, 0), at(1, 0), at(2, 0), at(3, 0)};
    p[which] = at(which, 4);
    c = packSplit(4, 64, p[0], p[1], p[2], p[3]);
    CHECK(c.head == 64);
    CHECK(c.packs == 0);
  }
  c = packSplit(4, 64, at(0, 2), at(1, 2), at(2, 2), nullptr);
  CHECK(c.head == 64);
  CHECK(c.packs == 0);
  c = packSplit(4, 0, at(0, 0), at(1, 0), at(2, 0), nullptr);
  CHECK(c.head == 0);
  CHECK(c.packs == 0);
}

TEST_CASE("reduceCopyPacked equals reduceCopy bit for bit: every datatype x op, any alignment",
          "[reduce_copy]") {
  for (ncclDataType_t type : kAllTypes) {
    PackedTally t;
    checkPackedEqualsElementwise(type, t);
    INFO(typeName(type) << ": " << t.runs << " runs, " << t.packRuns << " with packs, "
                        << t.fallbackRuns << " element walk; first failure: " << t.first);
    CHECK(t.bad == 0);
    // Both walks were exercised: packs where the pointers line up, elements where not.
    CHECK(t.packRuns > t.runs / 4);
    CHECK(t.fallbackRuns > t.runs / 20);
  }
}

TEST_CASE("reduceCopyPacked deals pack p to worker p % n, each element to exactly one worker",
          "[reduce_copy]") {
  std::mt19937_64 rng(99);
  for (ncclDataType_t type : {ncclUint8, ncclFloat16, ncclFloat32, ncclFloat64}) {
    const size_t es = dataTypeSize(type);
    const size_t per = 16 / es;
    const RedOp op = makeRedOp(ncclSum, type, 2);
    for (size_t count : {size_t(17), size_t(1000), size_t(4099)}) {
      for (const Offsets& off : offsetCases(es)) {
        Placed L(randomElems(type, count, rng), off.local, 0);
        Placed P(randomElems(type, count, rng), off.peer, 0);
        for (size_t n : {size_t(3), size_t(32)}) {
          INFO(typeName(type) << " count " << count << " offsets " << off.local << "/" << off.peer
                              << "/" << off.dst0 << " workers " << n);
          std::vector<int> owners(count, 0);
          std::vector<size_t> owner(count, n);
          Placed a(count * es, off.dst0, 0x00), b(count * es, off.dst0, 0xff);
          const PackSplit cut = packSplit(es, count, L.data(), P.data(), a.data(), nullptr);
          for (size_t w = 0; w < n; ++w) {
            // An element worker w writes is the same in both runs; one it leaves keeps the
            // fill, which differs between them.
            std::memset(a.data(), 0x00, count * es);
            std::memset(b.data(), 0xff, count * es);
            reduceCopyPacked(type, op, L.data(), P.data(), a.data(), nullptr, count, true, w, n);
            reduceCopyPacked(type, op, L.data(), P.data(), b.data(), nullptr, count, true, w, n);
            for (size_t k = 0; k < count; ++k) {
              if (std::memcmp(a.data() + k * es, b.data() + k * es, es) == 0) {
                owners[k]++;
                owner[k] = w;
              }
            }
          }
          size_t bad = 0, first = 0;
          const size_t tail = cut.head + cut.packs * per;
          for (size_t k = 0; k < count; ++k) {
            const size_t want = k < cut.head ? k % n
                                : k < tail   ? (k - cut.head) / per % n
                                             : (k - tail) % n;
            if ((owners[k] != 1 || owner[k] != want) && bad++ == 0) first = k;
          }
          INFO("first wrong element " << first << " written by " << owners[first]
                                      << " workers, last " << owner[first]);
          CHECK(bad == 0);
        }
      }
    }
  }
}
