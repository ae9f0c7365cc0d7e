#include "bench/perf/datatypes.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ringcc::bench {
namespace {

// A narrow binary float: 1 sign bit, `expBits`, `mantBits`. IEEE-like formats (half, bfloat16,
// e5m2) keep the top exponent for inf/NaN; e4m3 ("fn") has no inf and only S.1111.111 is NaN.
struct SmallFloat {
  int expBits;
  int mantBits;
  bool ieeeSpecials;
};
constexpr SmallFloat kHalf{5, 10, true};
constexpr SmallFloat kBf16{8, 7, true};
constexpr SmallFloat kE4m3{4, 3, false};
constexpr SmallFloat kE5m2{5, 2, true};

int bias(const SmallFloat& f) { return (1 << (f.expBits - 1)) - 1; }

uint32_t nanBits(const SmallFloat& f) {
  uint32_t expAll = (1u << f.expBits) - 1;
  uint32_t mantAll = (1u << f.mantBits) - 1;
  return f.ieeeSpecials ? (expAll << f.mantBits) | (1u << (f.mantBits - 1))
                        : (expAll << f.mantBits) | mantAll;
}

uint32_t encodeSmall(const SmallFloat& f, double v) {
  const uint32_t signBit = 1u << (f.expBits + f.mantBits);
  if (std::isnan(v)) return nanBits(f);
  uint32_t sign = std::signbit(v) ? signBit : 0;
  double a = std::fabs(v);
  const uint32_t expAll = (1u << f.expBits) - 1;
  const uint32_t mantAll = (1u << f.mantBits) - 1;
  // Largest finite field value (exponent|mantissa) the format allows.
  const uint32_t maxField = f.ieeeSpecials ? ((expAll - 1) << f.mantBits) | mantAll
                                           : (expAll << f.mantBits) | (mantAll - 1);
  const uint32_t infField = f.ieeeSpecials ? expAll << f.mantBits : nanBits(f);
  if (std::isinf(a)) return sign | infField;
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;      // a in [2^e, 2^(e+1))
  const int minNormal = 1 - bias(f);
  // Quantum: the value of one mantissa step at this magnitude (subnormals share minNormal's).
  int qexp = (e < minNormal ? minNormal : e) - f.mantBits;
  double steps = std::nearbyint(std::ldexp(a, -qexp));  // round to nearest even (default mode)
  uint64_t field;
  if (e < minNormal) {
    field = static_cast<uint64_t>(steps);  // subnormal, or carries into the smallest normal
  } else {
    uint64_t m = static_cast<uint64_t>(steps);  // in [2^mant, 2^(mant+1)]
    int ee = e;
    if (m == (uint64_t{1} << (f.mantBits + 1))) {
      m >>= 1;
      ++ee;
    }
    uint64_t expField = static_cast<uint64_t>(ee + bias(f));
    field = (expField << f.mantBits) | (m & mantAll);
  }
  if (field > maxField) return sign | infField;
  return sign | static_cast<uint32_t>(field);
}

double decodeSmall(const SmallFloat& f, uint32_t bits) {
  const uint32_t expAll = (1u << f.expBits) - 1;
  const uint32_t mantAll = (1u << f.mantBits) - 1;
  bool neg = (bits >> (f.expBits + f.mantBits)) & 1;
  uint32_t expField = (bits >> f.mantBits) & expAll;
  uint32_t mant = bits & mantAll;
  double v;
  if (f.ieeeSpecials && expField == expAll) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieeeSpecials && expField == expAll && mant == mantAll) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (expField == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias(f) - f.mantBits);
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << f.mantBits)),
                   static_cast<int>(expField) - bias(f) - f.mantBits);
  }
  return neg ? -v : v;
}

const SmallFloat* smallFormat(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return &kHalf;
    case ncclBfloat16: return &kBf16;
    case ncclFloat8e4m3: return &kE4m3;
    case ncclFloat8e5m2: return &kE5m2;
    default: return nullptr;
  }
}

template <typename T>
void storeInt(double v, void* dst) {
  double lo = static_cast<double>(std::numeric_limits<T>::min());
  double hi = static_cast<double>(std::numeric_limits<T>::max());
  T x;
  if (std::isnan(v)) x = 0;
  else if (v <= lo) x = std::numeric_limits<T>::min();
  else if (v >= hi) x = std::numeric_limits<T>::max();
  else x = static_cast<T>(std::nearbyint(v));
  std::memcpy(dst, &x, sizeof(T));
}

template <typename T>
double loadAs(const void* src) {
  T x;
  std::memcpy(&x, src, sizeof(T));
  return static_cast<double>(x);
}

constexpr double kMaxI64Exact = 9007199254740992.0;  // 2^53: doubles carry the values

const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, false, 127, 64},
    {ncclUint8, "uint8", 1, false, 255, 128},
    {ncclInt32, "int32", 4, false, 2147483647.0, 1073741824.0},
    {ncclUint32, "uint32", 4, false, 4294967295.0, 2147483648.0},
    {ncclInt64, "int64", 8, false, kMaxI64Exact, 4611686018427387904.0},
    {ncclUint64, "uint64", 8, false, kMaxI64Exact, 9223372036854775808.0},
    {ncclFloat16, "half", 2, true, 2048, 32768},
    {ncclFloat32, "float", 4, true, 16777216.0, 1.7014118346046923e38},
    {ncclFloat64, "double", 8, true, kMaxI64Exact, 8.98846567431158e307},
    {ncclBfloat16, "bfloat16", 2, true, 256, 1.7014118346046923e38},
    {ncclFloat8e4m3, "f8e4m3", 1, true, 16, 256},
    {ncclFloat8e5m2, "f8e5m2", 1, true, 8, 32768},
};

const char* const kOpNames[kNumOps] = {"sum", "prod", "max", "min", "avg", "mulsum"};

}  // namespace

std::span<const TypeInfo> allTypes() { return kTypes; }

const TypeInfo& typeInfo(ncclDataType_t type) {
  // Asked once per timed call: the table is in enum order, so the entry is usually at `type`.
  const unsigned at = static_cast<unsigned>(type);
  if (at < sizeof kTypes / sizeof kTypes[0] && kTypes[at].type == type) return kTypes[at];
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // callers only pass types from the table; float keeps them safe
}

const TypeInfo* typeByName(std::string_view name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

const char* opName(OpKind op) { return kOpNames[static_cast<int>(op)]; }

std::optional<OpKind> opByName(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOpNames[i]) return static_cast<OpKind>(i);
  return std::nullopt;
}

void encodeValue(ncclDataType_t type, double v, void* dst) {
  if (const SmallFloat* f = smallFormat(type)) {
    uint32_t bits = encodeSmall(*f, v);
    if (typeInfo(type).size == 1) {
      uint8_t b = static_cast<uint8_t>(bits);
      std::memcpy(dst, &b, 1);
    } else {
      uint16_t b = static_cast<uint16_t>(bits);
      std::memcpy(dst, &b, 2);
    }
    return;
  }
  switch (type) {
    case ncclInt8: storeInt<int8_t>(v, dst); break;
    case ncclUint8: storeInt<uint8_t>(v, dst); break;
    case ncclInt32: storeInt<int32_t>(v, dst); break;
    case ncclUint32: storeInt<uint32_t>(v, dst); break;
    case ncclInt64: storeInt<int64_t>(v, dst); break;
    case ncclUint64: storeInt<uint64_t>(v, dst); break;
    case ncclFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    default: std::memcpy(dst, &v, 8); break;  // float64
  }
}

double decodeValue(ncclDataType_t type, const void* src) {
  if (const SmallFloat* f = smallFormat(type)) {
    if (typeInfo(type).size == 1) {
      uint8_t b;
      std::memcpy(&b, src, 1);
      return decodeSmall(*f, b);
    }
    uint16_t b;
    std::memcpy(&b, src, 2);
    return decodeSmall(*f, b);
  }
  switch (type) {
    case ncclInt8: return loadAs<int8_t>(src);
    case ncclUint8: return loadAs<uint8_t>(src);
    case ncclInt32: return loadAs<int32_t>(src);
    case ncclUint32: return loadAs<uint32_t>(src);
    case ncclInt64: return loadAs<int64_t>(src);
    case ncclUint64: return loadAs<uint64_t>(src);
    case ncclFloat32: return loadAs<float>(src);
    default: return loadAs<double>(src);
  }
}

double ulpAt(ncclDataType_t type, double value) {
  int mantBits;
  switch (type) {
    case ncclFloat16: mantBits = 10; break;
    case ncclBfloat16: mantBits = 7; break;
    case ncclFloat8e4m3: mantBits = 3; break;
    case ncclFloat8e5m2: mantBits = 2; break;
    case ncclFloat32: mantBits = 23; break;
    case ncclFloat64: mantBits = 52; break;
    default: return 1.0;
  }
  double a = std::fabs(value);
  if (a == 0) return 0;
  int e2;
  std::frexp(a, &e2);
  return std::ldexp(1.0, e2 - 1 - mantBits);
}

}  // namespace ringcc::bench
