#include "coll/coll_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "kernels/dtypes.h"

namespace ringcc::test {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A per-(seed, rank) key, then one mix per element.
uint64_t keyOf(uint64_t seed, uint64_t a) { return mix(seed ^ mix(a * 0x100000001b3ull + 0x51)); }
uint64_t hashAt(uint64_t key, uint64_t index) { return mix(key + index * 0xd1342543de82ef95ull); }
uint64_t hashOf(uint64_t seed, uint64_t a, uint64_t b) { return hashAt(keyOf(seed, a), b); }

bool isPow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

bool typeSigned(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || typeIsFloat(t);
}

// Largest magnitude up to which every integer is exact in a float type.
double exactLimit(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return 2048;
    case ncclBfloat16:
      return 256;
    case ncclFloat8e4m3:
      return 16;
    case ncclFloat8e5m2:
      return 8;
    case ncclFloat32:
      return 16777216.0;
    default:
      return 1e15;  // float64 (2^53), kept well inside
  }
}

// ---- element codecs ---------------------------------------------------------------------

double decodeFloat(ncclDataType_t t, const void* p) {
  switch (t) {
    case ncclFloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return halfToFloat(Half{b});
    }
    case ncclBfloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16ToFloat(BFloat16{b});
    }
    case ncclFloat8e4m3:
      return fp8e4m3ToFloat(Fp8E4M3{*static_cast<const uint8_t*>(p)});
    case ncclFloat8e5m2:
      return fp8e5m2ToFloat(Fp8E5M2{*static_cast<const uint8_t*>(p)});
    case ncclFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
}

// Rounds to the type (through float for the narrow formats, as the library computes).
void encodeFloat(ncclDataType_t t, double v, void* p) {
  switch (t) {
    case ncclFloat16: {
      uint16_t b = floatToHalf(static_cast<float>(v)).bits;
      std::memcpy(p, &b, 2);
      break;
    }
    case ncclBfloat16: {
      uint16_t b = floatToBf16(static_cast<float>(v)).bits;
      std::memcpy(p, &b, 2);
      break;
    }
    case ncclFloat8e4m3:
      *static_cast<uint8_t*>(p) = floatToFp8e4m3(static_cast<float>(v)).bits;
      break;
    case ncclFloat8e5m2:
      *static_cast<uint8_t*>(p) = floatToFp8e5m2(static_cast<float>(v)).bits;
      break;
    case ncclFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    default:
      std::memcpy(p, &v, 8);
      break;
  }
}

double roundToType(ncclDataType_t t, double v) {
  uint8_t buf[8];
  encodeFloat(t, v, buf);
  return decodeFloat(t, buf);
}

// The product the library's pre step forms before rounding to the type: in double for
// float64, in float for every other float type.
double computeMul(ncclDataType_t t, double a, double b) {
  if (t == ncclFloat64) return a * b;
  return static_cast<double>(static_cast<float>(a) * static_cast<float>(b));
}

// Integer element, sign- or zero-extended to 64 bits.
uint64_t decodeInt(ncclDataType_t t, const void* p) {
  switch (t) {
    case ncclInt8:
      return static_cast<uint64_t>(static_cast<int64_t>(*static_cast<const int8_t*>(p)));
    case ncclUint8:
      return *static_cast<const uint8_t*>(p);
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case ncclUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

void encodeInt(ncclDataType_t t, uint64_t v, void* p) { std::memcpy(p, &v, typeSize(t)); }

bool isFinite(ncclDataType_t t, const void* p) { return std::isfinite(decodeFloat(t, p)); }

// Integer range [lo, hi] drawn uniformly from h.
int64_t drawInt(uint64_t h, int64_t lo, int64_t hi) {
  // In unsigned arithmetic: hi - lo overflows int64 for the widest ranges. The high half of
  // h * span maps h onto [0, span) without a division (the soak draws billions of these).
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  const uint64_t off =
      span == 0 ? h : static_cast<uint64_t>((static_cast<unsigned __int128>(h) * span) >> 64);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + off);
}

// Random bits for element `index` of `size` bytes: a slice of the hash of the 8-byte word
// that holds it, so that narrow types cost one hash per word rather than one per element.
void randomBits(uint64_t key, uint64_t index, size_t size, void* out) {
  const uint64_t byte = index * size;
  const uint64_t h = hashAt(key, byte / 8);
  std::memcpy(out, reinterpret_cast<const uint8_t*>(&h) + byte % 8, size);
}

// Elements [first, first + count) of random bits, a word at a time (same bits as randomBits).
void randomBitsRange(uint64_t key, uint64_t first, size_t count, size_t size, uint8_t* out) {
  uint64_t byte = first * size;
  const uint64_t end = (first + count) * size;
  while (byte < end) {
    const uint64_t h = hashAt(key, byte / 8);
    const size_t from = byte % 8;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(8 - from, end - byte));
    std::memcpy(out, reinterpret_cast<const uint8_t*>(&h) + from, n);
    out += n;
    byte += n;
  }
}

}  // namespace

const char* typeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "half";
    case ncclFloat32:
      return "float";
    case ncclFloat64:
      return "double";
    case ncclBfloat16:
      return "bf16";
    case ncclFloat8e4m3:
      return "fp8e4m3";
    case ncclFloat8e5m2:
      return "fp8e5m2";
    default:
      return "?";
  }
}

const char* opName(Op op) {
  switch (op) {
    case Op::Copy:
      return "copy";
    case Op::Sum:
      return "sum";
    case Op::Prod:
      return "prod";
    case Op::Max:
      return "max";
    case Op::Min:
      return "min";
    case Op::Avg:
      return "avg";
    case Op::PreMulHost:
      return "premulsum(host)";
    case Op::PreMulDevice:
      return "premulsum(device)";
  }
  return "?";
}

size_t typeSize(ncclDataType_t type) { return dataTypeSize(type); }
bool typeIsFloat(ncclDataType_t type) { return dataTypeIsFloat(type); }

double defaultScalar(Op op, ncclDataType_t type) {
  bool f = typeIsFloat(type);
  if (op == Op::PreMulHost) return f ? -2.0 : 3.0;
  return f ? 0.5 : 5.0;
}

namespace {

void genElemKeyed(const DataSpec& s, int rank, uint64_t key, uint64_t index, void* out) {
  const ncclDataType_t t = s.type;
  const size_t size = typeSize(t);
  const uint64_t h = hashAt(key, index);
  const bool f = typeIsFloat(t);
  const int n = s.nranks;
  auto putInt = [&](int64_t v) {
    if (f)
      encodeFloat(t, static_cast<double>(v), out);
    else
      encodeInt(t, static_cast<uint64_t>(v), out);
  };
  switch (s.op) {
    case Op::Copy:
      randomBits(key, index, size, out);
      return;
    case Op::Sum:
    case Op::PreMulHost:
    case Op::PreMulDevice: {
      if (!f) {
        randomBits(key, index, size, out);
        return;
      }
      double scale = s.op == Op::Sum ? 1.0 : std::max(1.0, std::fabs(s.scalar));
      int64_t m = std::max<int64_t>(1, static_cast<int64_t>(exactLimit(t) / (n * scale)));
      putInt(drawInt(h, -m, m));
      return;
    }
    case Op::Prod: {
      if (!f) {
        putInt(typeSigned(t) ? drawInt(h, -3, 3) : drawInt(h, 0, 3));
        return;
      }
      static const double kFactors[] = {-2, -1, -0.5, 0.5, 1, 2};
      encodeFloat(t, kFactors[h % 6], out);
      return;
    }
    case Op::Max:
    case Op::Min: {
      if (!f) {
        randomBits(key, index, size, out);
        return;
      }
      uint64_t bits = h;
      std::memcpy(out, &bits, size);
      while (f && !isFinite(t, out)) {
        bits = mix(bits);
        std::memcpy(out, &bits, size);
      }
      return;
    }
    case Op::Avg: {
      if (!f) {
        int bitsWide = static_cast<int>(size * 8);
        if (typeSigned(t)) {
          int64_t maxPos = static_cast<int64_t>((uint64_t{1} << (bitsWide - 1)) - 1);
          putInt(drawInt(h, -maxPos / n, maxPos / n));
        } else {
          uint64_t maxU = bitsWide == 64 ? ~uint64_t{0} : (uint64_t{1} << bitsWide) - 1;
          encodeInt(t, (h % (maxU / n)), out);
        }
        return;
      }
      const int64_t lim = static_cast<int64_t>(std::min(exactLimit(t), 1e6));
      if (isPow2(n)) {
        int64_t m = std::max<int64_t>(1, lim / n);
        putInt(drawInt(h, -m, m));
        return;
      }
      // Non power of two: a pattern shared by all ranks, chosen per element.
      const uint64_t he = hashOf(s.seed ^ 0xa5a5, 0xffff, index);
      if (n <= 3 && he % 4 == 0) {
        putInt(drawInt(mix(he), -lim, lim));  // every rank the same value
      } else {
        int owner = static_cast<int>(he % n);
        putInt(rank == owner ? drawInt(mix(he), -lim, lim) : 0);
      }
      return;
    }
  }
}

}  // namespace

void genElem(const DataSpec& spec, int rank, uint64_t index, void* out) {
  genElemKeyed(spec, rank, keyOf(spec.seed, static_cast<uint64_t>(rank)), index, out);
}

void genInput(const DataSpec& spec, int rank, uint64_t first, size_t count, void* out) {
  const size_t size = typeSize(spec.type);
  const uint64_t key = keyOf(spec.seed, static_cast<uint64_t>(rank));
  uint8_t* p = static_cast<uint8_t*>(out);
  const bool bits =
      spec.op == Op::Copy ||
      (!typeIsFloat(spec.type) && (spec.op == Op::Sum || spec.op == Op::Max || spec.op == Op::Min ||
                                   spec.op == Op::PreMulHost || spec.op == Op::PreMulDevice));
  if (bits) {
    randomBitsRange(key, first, count, size, p);
    return;
  }
  for (size_t k = 0; k < count; ++k) genElemKeyed(spec, rank, key, first + k, p + k * size);
}

void scalarBytes(const DataSpec& spec, void* out) {
  std::memset(out, 0, 8);
  if (typeIsFloat(spec.type))
    encodeFloat(spec.type, spec.scalar, out);
  else
    encodeInt(spec.type, static_cast<uint64_t>(static_cast<int64_t>(spec.scalar)), out);
}

void reduceInto(const DataSpec& s, const std::vector<const uint8_t*>& inputs, size_t first,
                size_t count, void* outv) {
  const ncclDataType_t t = s.type;
  const size_t size = typeSize(t);
  const int n = s.nranks;
  uint8_t* out = static_cast<uint8_t*>(outv);
  if (!typeIsFloat(t)) {
    uint8_t sb[8];
    scalarBytes(s, sb);
    const uint64_t scalar = decodeInt(t, sb);
    const bool sgn = typeSigned(t);
    for (size_t k = 0; k < count; ++k) {
      const size_t at = (first + k) * size;
      uint64_t acc = decodeInt(t, inputs[0] + at);
      if (s.op == Op::PreMulHost || s.op == Op::PreMulDevice) acc *= scalar;
      for (int b = 1; b < n; ++b) {
        uint64_t v = decodeInt(t, inputs[b] + at);
        switch (s.op) {
          case Op::Prod:
            acc *= v;
            break;
          case Op::Max:
            if (sgn ? static_cast<int64_t>(v) > static_cast<int64_t>(acc) : v > acc) acc = v;
            break;
          case Op::Min:
            if (sgn ? static_cast<int64_t>(v) < static_cast<int64_t>(acc) : v < acc) acc = v;
            break;
          case Op::PreMulHost:
          case Op::PreMulDevice:
            acc += v * scalar;
            break;
          default:
            acc += v;
            break;  // sum, avg
        }
      }
      if (s.op == Op::Avg) {
        // Wrap to the type first, then divide (sign-extended for signed types).
        uint8_t tmp[8];
        encodeInt(t, acc, tmp);
        uint64_t v = decodeInt(t, tmp);
        acc =
            sgn ? static_cast<uint64_t>(static_cast<int64_t>(v) / n) : v / static_cast<uint64_t>(n);
      }
      encodeInt(t, acc, out + k * size);
    }
    return;
  }
  // Floats. The inputs make every partial result exact, so double arithmetic is exact too.
  double preScalar = 0;
  bool hasPre = false;
  if (s.op == Op::PreMulHost || s.op == Op::PreMulDevice) {
    preScalar = roundToType(t, s.scalar);
    hasPre = true;
  } else if (s.op == Op::Avg) {
    double inv = 1.0 / n;
    preScalar = t == ncclFloat64 ? inv : roundToType(t, static_cast<float>(inv));
    hasPre = true;
  }
  for (size_t k = 0; k < count; ++k) {
    const size_t at = (first + k) * size;
    double acc = 0;
    for (int b = 0; b < n; ++b) {
      double v = decodeFloat(t, inputs[b] + at);
      if (hasPre) v = roundToType(t, computeMul(t, v, preScalar));
      if (b == 0) {
        acc = v;
        continue;
      }
      switch (s.op) {
        case Op::Prod:
          acc *= v;
          break;
        case Op::Max:
          if (v > acc || (v == acc && !std::signbit(v))) acc = v;
          break;
        case Op::Min:
          if (v < acc || (v == acc && std::signbit(v))) acc = v;
          break;
        default:
          acc += v;
          break;  // sum, avg, premulsum
      }
    }
    if (s.op == Op::Max || s.op == Op::Min) {
      // The winning input's bits, untouched (no round trip through double needed).
      for (int b = 0; b < n; ++b) {
        double v = decodeFloat(t, inputs[b] + at);
        if (v == acc && std::signbit(v) == std::signbit(acc)) {
          std::memcpy(out + k * size, inputs[b] + at, size);
          break;
        }
      }
      continue;
    }
    encodeFloat(t, acc, out + k * size);
  }
}

namespace {
std::atomic<bool> gRegionsFromNccl{false};
}  // namespace

void setRegionsFromNcclMemAlloc(bool on) { gRegionsFromNccl.store(on); }

RegionAlloc::RegionAlloc() : fromNccl(gRegionsFromNccl.load()) {}

uint8_t* RegionAlloc::allocate(size_t n) {
  if (!fromNccl) return static_cast<uint8_t*>(::operator new(n));
  void* p = nullptr;
  if (ncclMemAlloc(&p, n) != ncclSuccess) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

void RegionAlloc::deallocate(uint8_t* p, size_t n) {
  if (!fromNccl)
    ::operator delete(p, n);
  else
    (void)ncclMemFree(p);
}

void fillGarbage(uint64_t seed, void* out, size_t bytes) {
  uint8_t* p = static_cast<uint8_t*>(out);
  const uint64_t base = mix(seed ^ 0x6a09e667f3bcc908ull);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t h = mix(base + i);  // independent words: the loop pipelines
    std::memcpy(p + i, &h, std::min<size_t>(8, bytes - i));
  }
}

std::string describeElem(ncclDataType_t type, const void* elem) {
  char buf[96];
  uint64_t bits = 0;
  std::memcpy(&bits, elem, typeSize(type));
  if (typeIsFloat(type))
    std::snprintf(buf, sizeof buf, "0x%llx (%.9g)", static_cast<unsigned long long>(bits),
                  decodeFloat(type, elem));
  else
    std::snprintf(buf, sizeof buf, "0x%llx (%lld)", static_cast<unsigned long long>(bits),
                  static_cast<long long>(decodeInt(type, elem)));
  return buf;
}

// ---- regions ----------------------------------------------------------------------------

Region::Region(std::string r, size_t size, ncclDataType_t t, uint64_t seed)
    : bytes(size + 2 * kGuard), role(std::move(r)), type(t) {
  fillGarbage(seed, bytes.data(), bytes.size());
  snapshot();
}

std::string Region::compare() const {
  if (std::equal(bytes.begin(), bytes.end(), expect.begin(), expect.end())) return "";
  size_t i = 0;
  while (bytes[i] == expect[i]) ++i;
  size_t bad = 0;
  for (size_t j = i; j < bytes.size(); ++j) bad += bytes[j] != expect[j];
  char buf[256];
  if (i < kGuard || i >= kGuard + size()) {
    long off = static_cast<long>(i) - static_cast<long>(kGuard);
    std::snprintf(buf, sizeof buf, "%s: guard byte %ld (size %zu) overwritten (%zu bytes differ)",
                  role.c_str(), off, size(), bad);
    return buf;
  }
  const size_t es = typeSize(type);
  const size_t elem = (i - kGuard) / es;
  const size_t at = kGuard + elem * es;
  std::snprintf(buf, sizeof buf, "%s: element %zu of %zu is %s, expected %s (%zu bytes differ)",
                role.c_str(), elem, size() / es, describeElem(type, &bytes[at]).c_str(),
                describeElem(type, &expect[at]).c_str(), bad);
  return buf;
}

std::string RankRun::check() const {
  for (const auto& r : regions) {
    std::string why = r->compare();
    if (!why.empty()) return why;
  }
  return "";
}

// ---- collectives ------------------------------------------------------------------------

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce:
      return "allreduce";
    case Coll::Broadcast:
      return "broadcast";
    case Coll::Bcast:
      return "bcast";
    case Coll::Reduce:
      return "reduce";
    case Coll::AllGather:
      return "allgather";
    case Coll::ReduceScatter:
      return "reducescatter";
    case Coll::AlltoAll:
      return "alltoall";
    case Coll::Gather:
      return "gather";
    case Coll::Scatter:
      return "scatter";
  }
  return "?";
}

bool collReduces(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

bool collRooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Bcast || c == Coll::Reduce || c == Coll::Gather ||
         c == Coll::Scatter;
}

std::string CollCase::describe(int nranks) const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s %s n=%d count=%zu%s%s root=%d seed=%llu", collName(coll),
                typeName(type), collReduces(coll) ? opName(op) : "", nranks, count,
                inPlace ? " in-place" : "", nullUnused ? " null-unused" : "", root,
                static_cast<unsigned long long>(seed));
  return buf;
}

CaseData::CaseData(const CollCase& cc, int n) : c(cc), nranks(n) {
  spec.type = c.type;
  spec.op = collReduces(c.coll) ? c.op : Op::Copy;
  spec.nranks = n;
  spec.seed = c.seed;
  if (spec.op == Op::PreMulHost || spec.op == Op::PreMulDevice)
    spec.scalar = c.scalar != 0 ? c.scalar : defaultScalar(spec.op, c.type);
  const size_t es = typeSize(c.type);
  input.resize(n);
  for (int b = 0; b < n; ++b) {
    input[b].resize(sendElems() * es);
    genInput(spec, b, 0, sendElems(), input[b].data());
  }
  if (collReduces(c.coll)) {
    std::vector<const uint8_t*> ins;
    for (auto& v : input) ins.push_back(v.data());
    reduced.resize(sendElems() * es);
    reduceInto(spec, ins, 0, sendElems(), reduced.data());
  }
}

size_t CaseData::sendElems() const {
  switch (c.coll) {
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Scatter:
      return c.count * nranks;
    default:
      return c.count;
  }
}

size_t CaseData::recvElems() const {
  switch (c.coll) {
    case Coll::AllGather:
    case Coll::AlltoAll:
    case Coll::Gather:
      return c.count * nranks;
    default:
      return c.count;
  }
}

CollRank::CollRank(const CaseData& d, int rank, ncclComm_t comm)
    : data_(d), rank_(rank), comm_(comm) {
  const CollCase& c = d.c;
  const int n = d.nranks;
  const size_t es = typeSize(c.type);
  const size_t cnt = c.count;
  const size_t blk = cnt * es;  // bytes of one block
  const bool isRoot = rank == c.root;
  const uint64_t gseed = c.seed * 131 + static_cast<uint64_t>(rank) * 7 + 3;
  const std::vector<uint8_t>& mine = d.input[rank];
  const std::vector<uint8_t>& rootIn = d.input[c.root];
  auto copyIn = [](Region* r, size_t off, const uint8_t* src, size_t bytes) {
    if (bytes) std::memcpy(r->data() + off, src, bytes);
  };
  auto expectAt = [](Region* r, size_t off, const uint8_t* src, size_t bytes) {
    if (bytes) std::memcpy(r->expected() + off, src, bytes);
  };

  // The buffers each collective writes, by layout. "S" and "R" are separate regions (out of
  // place); in place one region holds both at NCCL's offsets.
  const bool inPlace = c.inPlace && c.coll != Coll::AlltoAll;
  switch (c.coll) {
    case Coll::AllReduce: {
      Region* s = run_.add("sendbuff", blk, c.type, gseed);
      copyIn(s, 0, mine.data(), blk);
      s->snapshot();
      if (inPlace) {
        s->role = "buff (in place)";
        expectAt(s, 0, d.reduced.data(), blk);
        send_ = recv_ = s->data();
      } else {
        Region* r = run_.add("recvbuff", blk, c.type, gseed + 1);
        expectAt(r, 0, d.reduced.data(), blk);
        send_ = s->data();
        recv_ = r->data();
      }
      break;
    }
    case Coll::Broadcast:
    case Coll::Bcast: {
      if (inPlace || c.coll == Coll::Bcast) {
        Region* b = run_.add("buff (in place)", blk, c.type, gseed);
        if (isRoot) copyIn(b, 0, rootIn.data(), blk);
        b->snapshot();
        expectAt(b, 0, rootIn.data(), blk);
        send_ = recv_ = b->data();
      } else {
        Region* r = run_.add("recvbuff", blk, c.type, gseed + 1);
        expectAt(r, 0, rootIn.data(), blk);
        recv_ = r->data();
        if (isRoot || !c.nullUnused) {  // non-root: garbage that must stay unread and untouched
          Region* s = run_.add("sendbuff", blk, c.type, gseed);
          if (isRoot) copyIn(s, 0, rootIn.data(), blk);
          s->snapshot();
          send_ = s->data();
        }
      }
      break;
    }
    case Coll::Reduce: {
      Region* s = run_.add(inPlace ? "buff (in place)" : "sendbuff", blk, c.type, gseed);
      copyIn(s, 0, mine.data(), blk);
      s->snapshot();
      send_ = s->data();
      if (inPlace) {
        recv_ = s->data();
        if (isRoot) expectAt(s, 0, d.reduced.data(), blk);
      } else if (isRoot || !c.nullUnused) {
        // A non-root recvbuff is a canary: it must not be written.
        Region* r =
            run_.add(isRoot ? "recvbuff" : "recvbuff (non-root canary)", blk, c.type, gseed + 1);
        if (isRoot) expectAt(r, 0, d.reduced.data(), blk);
        recv_ = r->data();
      }
      break;
    }
    case Coll::AllGather: {
      Region* r =
          run_.add(inPlace ? "recvbuff (in place)" : "recvbuff", blk * n, c.type, gseed + 1);
      if (inPlace) {
        copyIn(r, rank * blk, mine.data(), blk);
        r->snapshot();
        send_ = r->data() + rank * blk;
      } else {
        Region* s = run_.add("sendbuff", blk, c.type, gseed);
        copyIn(s, 0, mine.data(), blk);
        s->snapshot();
        send_ = s->data();
      }
      for (int b = 0; b < n; ++b) expectAt(r, b * blk, d.input[b].data(), blk);
      recv_ = r->data();
      break;
    }
    case Coll::ReduceScatter: {
      Region* s = run_.add(inPlace ? "sendbuff (in place)" : "sendbuff", blk * n, c.type, gseed);
      copyIn(s, 0, mine.data(), blk * n);
      s->snapshot();
      send_ = s->data();
      if (inPlace) {
        recv_ = s->data() + rank * blk;
        expectAt(s, rank * blk, d.reduced.data() + rank * blk, blk);
      } else {
        Region* r = run_.add("recvbuff", blk, c.type, gseed + 1);
        expectAt(r, 0, d.reduced.data() + rank * blk, blk);
        recv_ = r->data();
      }
      break;
    }
    case Coll::AlltoAll: {
      Region* s = run_.add("sendbuff", blk * n, c.type, gseed);
      copyIn(s, 0, mine.data(), blk * n);
      s->snapshot();
      Region* r = run_.add("recvbuff", blk * n, c.type, gseed + 1);
      for (int b = 0; b < n; ++b) expectAt(r, b * blk, d.input[b].data() + rank * blk, blk);
      send_ = s->data();
      recv_ = r->data();
      break;
    }
    case Coll::Gather: {
      if (inPlace && isRoot) {
        Region* r = run_.add("recvbuff (in place)", blk * n, c.type, gseed + 1);
        copyIn(r, rank * blk, mine.data(), blk);
        r->snapshot();
        for (int b = 0; b < n; ++b) expectAt(r, b * blk, d.input[b].data(), blk);
        send_ = r->data() + rank * blk;
        recv_ = r->data();
        break;
      }
      Region* s = run_.add("sendbuff", blk, c.type, gseed);
      copyIn(s, 0, mine.data(), blk);
      s->snapshot();
      send_ = s->data();
      if (isRoot || !c.nullUnused) {
        Region* r = run_.add(isRoot ? "recvbuff" : "recvbuff (non-root canary)", blk * n, c.type,
                             gseed + 1);
        if (isRoot)
          for (int b = 0; b < n; ++b) expectAt(r, b * blk, d.input[b].data(), blk);
        recv_ = r->data();
      }
      break;
    }
    case Coll::Scatter: {
      if (inPlace && isRoot) {
        Region* s = run_.add("sendbuff (in place)", blk * n, c.type, gseed);
        copyIn(s, 0, rootIn.data(), blk * n);
        s->snapshot();
        send_ = s->data();
        recv_ = s->data() + rank * blk;
        break;
      }
      Region* r = run_.add("recvbuff", blk, c.type, gseed + 1);
      expectAt(r, 0, rootIn.data() + rank * blk, blk);
      recv_ = r->data();
      if (isRoot || !c.nullUnused) {
        Region* s =
            run_.add(isRoot ? "sendbuff" : "sendbuff (non-root canary)", blk * n, c.type, gseed);
        if (isRoot) copyIn(s, 0, rootIn.data(), blk * n);
        s->snapshot();
        send_ = s->data();
      }
      break;
    }
  }
  if (cnt == 0 && c.nullUnused) send_ = recv_ = nullptr;

  if (collReduces(c.coll)) {
    switch (c.op) {
      case Op::Sum:
        op_ = ncclSum;
        break;
      case Op::Prod:
        op_ = ncclProd;
        break;
      case Op::Max:
        op_ = ncclMax;
        break;
      case Op::Min:
        op_ = ncclMin;
        break;
      case Op::Avg:
        op_ = ncclAvg;
        break;
      case Op::PreMulHost:
      case Op::PreMulDevice: {
        scalarBytes(d.spec, scalar_);
        ncclScalarResidence_t res =
            c.op == Op::PreMulHost ? ncclScalarHostImmediate : ncclScalarDevice;
        if (ncclRedOpCreatePreMulSum(&op_, scalar_, c.type, res, comm) == ncclSuccess)
          userOp_ = true;
        if (c.op == Op::PreMulHost)
          std::memset(scalar_, 0xee, sizeof scalar_);  // copied at creation
        break;
      }
      case Op::Copy:
        break;
    }
  }
}

CollRank::~CollRank() {
  if (userOp_) ncclRedOpDestroy(op_, comm_);
}

ncclResult_t CollRank::issue() {
  const CollCase& c = data_.c;
  if (collReduces(c.coll) && (c.op == Op::PreMulHost || c.op == Op::PreMulDevice) && !userOp_)
    return ncclInternalError;
  switch (c.coll) {
    case Coll::AllReduce:
      return ncclAllReduce(send_, recv_, c.count, c.type, op_, comm_, stream_);
    case Coll::Broadcast:
      return ncclBroadcast(send_, recv_, c.count, c.type, c.root, comm_, stream_);
    case Coll::Bcast:
      return ncclBcast(recv_, c.count, c.type, c.root, comm_, stream_);
    case Coll::Reduce:
      return ncclReduce(send_, recv_, c.count, c.type, op_, c.root, comm_, stream_);
    case Coll::AllGather:
      return ncclAllGather(send_, recv_, c.count, c.type, comm_, stream_);
    case Coll::ReduceScatter:
      return ncclReduceScatter(send_, recv_, c.count, c.type, op_, comm_, stream_);
    case Coll::AlltoAll:
      return ncclAlltoAll(send_, recv_, c.count, c.type, comm_, stream_);
    case Coll::Gather:
      return ncclGather(send_, recv_, c.count, c.type, c.root, comm_, stream_);
    case Coll::Scatter:
      return ncclScatter(send_, recv_, c.count, c.type, c.root, comm_, stream_);
  }
  return ncclInternalError;
}

}  // namespace ringcc::test
