#include "bench/perf/data_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ringcc::bench {
namespace {

constexpr double kValueCap = 1 << 20;  // keeps every value and sum far inside a double's 2^53

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t seed, uint64_t a, uint64_t b) {
  return mix(seed ^ mix(a * 0x100000001b3ull + 0x51ed27) ^ mix(b + 0x2545f4914f6cdd1dull));
}

bool reduces(CollKind kind) {
  return kind == CollKind::AllReduce || kind == CollKind::Reduce ||
         kind == CollKind::ReduceScatter;
}

// Largest input such that nranks * maxScalar inputs still sum exactly.
double sumBound(const CheckSetup& s, double maxScalar) {
  double exact = std::min(typeInfo(s.type).maxExactInt, kValueCap);
  return std::floor(exact / (s.nranks * maxScalar));
}

// How many inputs of an element may be 2 in a product.
int prodFactors(const CheckSetup& s) {
  double limit = std::min(typeInfo(s.type).maxPowerOfTwo, 65536.0);
  int k = static_cast<int>(std::floor(std::log2(limit)));
  return std::min(k, s.nranks);
}

double copyValue(const CheckSetup& s, int rank, size_t index) {
  double top = std::min(typeInfo(s.type).maxExactInt, kValueCap);
  return static_cast<double>(hash3(s.seed, static_cast<uint64_t>(rank), index) %
                             static_cast<uint64_t>(top + 1));
}

double reduceInput(const CheckSetup& s, int rank, size_t index) {
  uint64_t h = hash3(s.seed, static_cast<uint64_t>(rank), index);
  switch (s.op) {
    case OpKind::Prod: {
      // A window of w consecutive ranks (from an index-chosen start) contributes 2, others 1.
      uint64_t hi = hash3(s.seed, 0xffffffffull, index);
      int n = s.nranks;
      int start = static_cast<int>(hi % static_cast<uint64_t>(n));
      int width = static_cast<int>((hi >> 32) % static_cast<uint64_t>(prodFactors(s) + 1));
      return ((rank - start + n) % n) < width ? 2.0 : 1.0;
    }
    case OpKind::Max:
    case OpKind::Min: return copyValue(s, rank, index);
    default: {  // sum, avg, mulsum
      double bound = sumBound(s, s.op == OpKind::MulSum ? 2.0 : 1.0);
      if (bound >= 1) return static_cast<double>(h % static_cast<uint64_t>(bound + 1));
      uint64_t hi = hash3(s.seed, 0xfffffffeull, index);
      return rank == static_cast<int>(hi % static_cast<uint64_t>(s.nranks)) ? 1.0 : 0.0;
    }
  }
}

// The reduction over every rank's input at `index`.
double reduced(const CheckSetup& s, size_t index) {
  double acc = 0;
  for (int r = 0; r < s.nranks; ++r) {
    double v = reduceInput(s, r, index);
    switch (s.op) {
      case OpKind::Sum:
      case OpKind::Avg: acc = r == 0 ? v : acc + v; break;
      case OpKind::Prod: acc = r == 0 ? v : acc * v; break;
      case OpKind::Max: acc = r == 0 ? v : std::max(acc, v); break;
      case OpKind::Min: acc = r == 0 ? v : std::min(acc, v); break;
      case OpKind::MulSum: acc = r == 0 ? v * premulScalar(r) : acc + v * premulScalar(r); break;
    }
  }
  if (s.op == OpKind::Avg) {
    acc = typeInfo(s.type).isFloat ? acc / s.nranks : std::floor(acc / s.nranks);
  }
  return acc;
}

}  // namespace

double premulScalar(int rank) { return 1.0 + (rank & 1); }

double inputValue(const CheckSetup& s, int rank, size_t index) {
  return reduces(s.kind) ? reduceInput(s, rank, index) : copyValue(s, rank, index);
}

void fillInput(const CheckSetup& s, void* input) {
  if (s.kind == CollKind::Broadcast && s.rank != s.root) return;
  size_t elt = typeInfo(s.type).size;
  char* out = static_cast<char*>(input);
  for (size_t i = 0; i < s.counts.sendCount; ++i) encodeValue(s.type, inputValue(s, s.rank, i), out + i * elt);
}

void fillExpected(const CheckSetup& s, void* expected, const void* regionBefore) {
  size_t elt = typeInfo(s.type).size;
  char* out = static_cast<char*>(expected);
  const CollCounts& c = s.counts;
  switch (s.kind) {
    case CollKind::AllReduce:
      for (size_t i = 0; i < c.recvCount; ++i) encodeValue(s.type, reduced(s, i), out + i * elt);
      break;
    case CollKind::Reduce:
      if (s.rank != s.root) {
        if (regionBefore) std::memcpy(out, regionBefore, c.recvCount * elt);
        break;
      }
      for (size_t i = 0; i < c.recvCount; ++i) encodeValue(s.type, reduced(s, i), out + i * elt);
      break;
    case CollKind::ReduceScatter: {
      size_t base = static_cast<size_t>(s.rank) * c.recvCount;
      for (size_t i = 0; i < c.recvCount; ++i)
        encodeValue(s.type, reduced(s, base + i), out + i * elt);
      break;
    }
    case CollKind::AllGather:
      for (int q = 0; q < s.nranks; ++q)
        for (size_t i = 0; i < c.sendCount; ++i)
          encodeValue(s.type, copyValue(s, q, i), out + (q * c.sendCount + i) * elt);
      break;
    case CollKind::Broadcast:
      for (size_t i = 0; i < c.recvCount; ++i)
        encodeValue(s.type, copyValue(s, s.root, i), out + i * elt);
      break;
    case CollKind::AlltoAll: {
      // Block p of my output is block `rank` of rank p's input.
      size_t part = c.paramCount;
      for (int p = 0; p < s.nranks; ++p)
        for (size_t i = 0; i < part; ++i)
          encodeValue(s.type, copyValue(s, p, s.rank * part + i), out + (p * part + i) * elt);
      break;
    }
    case CollKind::SendRecv: {
      int from = (s.rank - 1 + s.nranks) % s.nranks;
      for (size_t i = 0; i < c.recvCount; ++i)
        encodeValue(s.type, copyValue(s, from, i), out + i * elt);
      break;
    }
  }
}

double checkTolerance(const CheckSetup& s) {
  bool reduceKind = s.kind == CollKind::AllReduce || s.kind == CollKind::Reduce ||
                    s.kind == CollKind::ReduceScatter;
  if (!reduceKind || s.op != OpKind::Avg || !typeInfo(s.type).isFloat) return 0;
  if ((s.nranks & (s.nranks - 1)) == 0) return 0;  // power of two: 1/n is exact
  double largest = std::max(1.0, sumBound(s, 1.0));
  return s.nranks * ulpAt(s.type, largest);
}

int64_t countWrong(ncclDataType_t type, const void* got, const void* expected, size_t count,
                   double tolerance) {
  size_t elt = typeInfo(type).size;
  const char* g = static_cast<const char*>(got);
  const char* e = static_cast<const char*>(expected);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * elt, e + i * elt, elt) == 0) continue;
    if (tolerance > 0) {
      double gv = decodeValue(type, g + i * elt);
      double ev = decodeValue(type, e + i * elt);
      if (std::fabs(gv - ev) <= tolerance) continue;
    }
    ++wrong;
  }
  return wrong;
}

bool checksPlacement(CollKind kind, bool inPlace) {
  return !(inPlace && (kind == CollKind::AlltoAll || kind == CollKind::SendRecv));
}

}  // namespace ringcc::bench
