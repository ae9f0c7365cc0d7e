// ringccAllReduceAdasum against a straightforward reference of its definition (include/ringcc.h,
// docs/adasum.md): the tree of pairwise combinations computed in double on every rank's whole
// input, segment by segment. Each element must lie within a tolerance of its segment's root
// mean square: 1e-12 (float64), 1e-5 (float32), a few roundings of the type per tree level
// for float16 and bfloat16. 1..9 ranks as threads, 2..5 as forked processes; segments, zero
// vectors, in and out of place; bad arguments.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "nccl.h"
#include "ringcc.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

using Vec = std::vector<double>;

// Small connection buffers (slot boundaries inside the test's sizes) and a bounded timeout.
struct TestEnv {
  ScopedEnv buffsize{"NCCL_BUFFSIZE", "65536"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "20000"};
};

// adasum(a, b) of the definition, over [lo, hi), into a.
void refCombine(Vec& a, const Vec& b, size_t lo, size_t hi) {
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
Vec reference(std::vector<Vec> v, const std::vector<size_t>& segs) {
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

size_t typeSize(ncclDataType_t t) { return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2; }

double load(ncclDataType_t t, const uint8_t* p) {
  switch (t) {
    case ncclFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case ncclFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case ncclFloat16: { ringcc::Half h; std::memcpy(&h, p, 2); return ringcc::halfToFloat(h); }
    default: { ringcc::BFloat16 b; std::memcpy(&b, p, 2); return ringcc::bf16ToFloat(b); }
  }
}

void store(ncclDataType_t t, double v, uint8_t* p) {
  switch (t) {
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case ncclFloat16: { auto h = ringcc::floatToHalf(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    default: { auto b = ringcc::floatToBf16(static_cast<float>(v)); std::memcpy(p, &b, 2); break; }
  }
}

// Per-segment tolerance relative to the segment's RMS.
double tolerance(ncclDataType_t t, int nranks) {
  int levels = 1;
  for (int p = 1; p < nranks; p *= 2) ++levels;
  if (t == ncclFloat64) return 1e-12;
  if (t == ncclFloat32) return 1e-5;
  double eps = t == ncclFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  return 8 * levels * eps;  // a rounding per level, elements up to a few RMS
}

// One test case: every rank's input (as the type holds it), the segments, the expectation.
struct Case {
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
  Case(ncclDataType_t t, int n, std::vector<size_t> s, bool inPlace, uint64_t seed)
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
  ncclResult_t call(ncclComm_t comm, Buffers& b, const size_t* list = nullptr) const {
    const bool several = segs.size() > 1;
    return ringccAllReduceAdasum(b.send.data(), inPlace ? b.send.data() : b.recv.data(), count(),
                                 type, several ? (list ? list : segs.data()) : nullptr,
                                 several ? static_cast<int>(segs.size()) : 0, comm, nullptr);
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

constexpr ncclDataType_t kTypes[] = {ncclFloat64, ncclFloat32, ncclFloat16, ncclBfloat16};

std::vector<Case> casesFor(int n) {
  std::vector<Case> cases;
  uint64_t seed = 100 * n;
  for (ncclDataType_t t : kTypes) {
    cases.emplace_back(t, n, std::vector<size_t>{1000}, false, ++seed);
    cases.emplace_back(t, n, std::vector<size_t>{333, 100, 64, 1, 4099}, true, ++seed);
  }
  // A single element, fewer elements than ranks, and a large buffer.
  cases.emplace_back(ncclFloat32, n, std::vector<size_t>{1}, false, ++seed);
  cases.emplace_back(ncclFloat64, n, std::vector<size_t>{3}, true, ++seed);
  cases.emplace_back(ncclFloat32, n, std::vector<size_t>{300000, 5, 7}, false, ++seed);
  return cases;
}

}  // namespace

TEST_CASE("adasum: the reference's own arithmetic", "[adasum]") {
  Vec a{1, 2, 3}, b{1, 2, 3};
  refCombine(a, b, 0, 3);
  CHECK(a == Vec{1, 2, 3});  // aligned: averaged
  Vec c{1, 0, 0}, d{0, 2, 0};
  refCombine(c, d, 0, 3);
  CHECK(c == Vec{1, 2, 0});  // orthogonal: added
  Vec z{0, 0}, e{3, 4};
  refCombine(z, e, 0, 2);
  CHECK(z == Vec{3, 4});  // a zero vector contributes nothing
}

TEST_CASE("adasum: every type, segments and zero vectors on 1..9 ranks, threads", "[adasum]") {
  TestEnv env;
  for (int n = 1; n <= 9; ++n) {
    std::vector<ncclComm_t> comms(n);
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
    for (const Case& c : casesFor(n)) {
      std::vector<std::string> errors(n);
      runThreads(n, [&](int r) { errors[r] = c.run(comms[r], r); });
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(errors[r] == "");
      }
    }
    for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  }
}

TEST_CASE("adasum: identical inputs come back unchanged, bit for bit", "[adasum]") {
  // adasum(a, a) = a/2 + a/2 = a exactly, at every level of the tree: a check with no
  // tolerance, for a power of two and for a count of ranks with extra ones.
  for (int n : {2, 4, 5}) {
    std::vector<ncclComm_t> comms(n);
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
    std::vector<float> in(777);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 13) - 6.5f;
    std::vector<std::vector<float>> out(n, std::vector<float>(in.size(), -1));
    std::vector<ncclResult_t> rc(n);
    runThreads(n, [&](int r) {
      rc[r] = ringccAllReduceAdasum(in.data(), out[r].data(), in.size(), ncclFloat32, nullptr, 0,
                                    comms[r], nullptr);
    });
    for (int r = 0; r < n; ++r) {
      CHECK(rc[r] == ncclSuccess);
      CHECK(out[r] == in);
    }
    for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  }
}

TEST_CASE("adasum: forked processes over shm, 2..5 ranks", "[adasum_fork]") {
  TestEnv env;
  for (int n = 2; n <= 5; ++n) {
    std::vector<Case> cases = casesFor(n);
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      int bad = 0;
      for (const Case& c : cases) {
        std::string e = c.run(comm, rank);
        if (!e.empty()) {
          std::fprintf(stderr, "rank %d: %s\n", rank, e.c_str());
          ++bad;
        }
      }
      ncclCommDestroy(comm);
      return bad;
    });
    INFO(n << " processes");
    CHECK(failed == 0);
  }
}

TEST_CASE("adasum: inside a group, one thread driving every rank, beside an all-reduce",
          "[adasum]") {
  // Every case of casesFor(n) in one group per rank, after an all-reduce: the calls run at
  // ncclGroupEnd, each rank's in call order and the ranks concurrently (one thread cannot run
  // rank 0's steps to the end before rank 1's start). The segment lists are overwritten
  // before ncclGroupEnd: the call must have kept its own copy.
  TestEnv env;
  for (int n : {1, 2, 4, 5}) {
    std::vector<ncclComm_t> comms(n);
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
    const std::vector<Case> cases = casesFor(n);
    std::vector<std::vector<Case::Buffers>> bufs(cases.size());
    std::vector<std::vector<std::vector<size_t>>> lists(cases.size());
    std::vector<std::vector<int>> sums(n, std::vector<int>(100));
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 100; ++i) sums[r][i] = r + i;
      CHECK(ncclAllReduce(sums[r].data(), sums[r].data(), 100, ncclInt32, ncclSum, comms[r],
                          nullptr) == ncclSuccess);
    }
    for (size_t c = 0; c < cases.size(); ++c) {
      for (int r = 0; r < n; ++r) {
        bufs[c].push_back(cases[c].buffers(r));
        lists[c].push_back(cases[c].segs);
      }
      for (int r = 0; r < n; ++r)
        CHECK(cases[c].call(comms[r], bufs[c][r], lists[c][r].data()) == ncclSuccess);
    }
    for (auto& perCase : lists)
      for (auto& list : perCase) std::fill(list.begin(), list.end(), size_t{7});
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    for (int r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      for (int i = 0; i < 100; ++i) CHECK(sums[r][i] == n * i + n * (n - 1) / 2);
      for (size_t c = 0; c < cases.size(); ++c) CHECK(cases[c].verify(r, bufs[c][r]) == "");
    }
    for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  }
}

TEST_CASE("adasum: inside a group in forked processes, beside an all-reduce", "[adasum_fork]") {
  TestEnv env;
  for (int n : {2, 3}) {
    const std::vector<Case> cases = {Case(ncclFloat32, n, {5000}, false, 7),
                                     Case(ncclFloat64, n, {333, 100, 64, 1, 4099}, true, 8)};
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      Case::Buffers b0 = cases[0].buffers(rank), b1 = cases[1].buffers(rank);
      std::vector<float> ones(64, 1.0f);
      int bad = 0;
      bad += ncclGroupStart() != ncclSuccess;
      bad += cases[0].call(comm, b0) != ncclSuccess;
      bad += ncclAllReduce(ones.data(), ones.data(), ones.size(), ncclFloat32, ncclSum, comm,
                           nullptr) != ncclSuccess;
      bad += cases[1].call(comm, b1) != ncclSuccess;
      bad += ncclGroupEnd() != ncclSuccess;
      for (const std::string& e : {cases[0].verify(rank, b0), cases[1].verify(rank, b1)}) {
        if (e.empty()) continue;
        std::fprintf(stderr, "rank %d: %s\n", rank, e.c_str());
        ++bad;
      }
      bad += ones != std::vector<float>(64, static_cast<float>(n));
      ncclCommDestroy(comm);
      return bad;
    });
    INFO(n << " processes");
    CHECK(failed == 0);
  }
}

TEST_CASE("adasum: ncclGroupSimulateEnd counts it as an all-reduce and runs nothing",
          "[adasum]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
  const size_t count = 1 << 18;
  std::vector<std::vector<float>> in(2, std::vector<float>(count)), out(2, std::vector<float>(count, -1.0f));
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>((i + r) % 7);
  auto simulate = [&](bool adasum) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < 2; ++r)
      REQUIRE((adasum ? ringccAllReduceAdasum(in[r].data(), out[r].data(), count, ncclFloat32,
                                              nullptr, 0, comms[r], nullptr)
                      : ncclAllReduce(in[r].data(), out[r].data(), count, ncclFloat32, ncclSum,
                                      comms[r], nullptr)) == ncclSuccess);
    REQUIRE(ncclGroupSimulateEnd(&info) == ncclSuccess);
    return info.estimatedTime;
  };
  const float adasum = simulate(true), allReduce = simulate(false);
  CHECK(adasum > 0);
  CHECK(adasum == allReduce);
  for (int r = 0; r < 2; ++r) CHECK(out[r] == std::vector<float>(count, -1.0f));
  // The dropped calls left nothing queued: a group with nothing in it runs nothing.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < 2; ++r) CHECK(out[r] == std::vector<float>(count, -1.0f));
  for (ncclComm_t c : comms) REQUIRE(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("adasum: bad arguments get a clear error and leave the communicator usable",
          "[adasum]") {
  std::vector<ncclComm_t> comms(1);
  REQUIRE(ncclCommInitAll(comms.data(), 1, nullptr) == ncclSuccess);
  ncclComm_t comm = comms[0];
  std::vector<float> buf(10, 1.0f);
  size_t segs[] = {4, 5};
  CapturedLog log;
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclInt32, nullptr, 0, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(log.contains("datatype 2: Adasum takes"));
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, segs, 2, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(log.contains("sum to 9 elements, not count (10)"));
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, nullptr, 2, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(log.contains("segments (with nsegments > 0)"));
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, segs, -1, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(log.contains("nsegments is -1"));
  CHECK(ringccAllReduceAdasum(nullptr, buf.data(), 10, ncclFloat32, nullptr, 0, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(log.contains("sendbuff"));
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, nullptr, 0, nullptr,
                              nullptr) == ncclInvalidArgument);
  // Inside a group the arguments are checked at the call, as outside.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, segs, 2, comm, nullptr) ==
        ncclInvalidArgument);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  // Still usable: one rank's Adasum is the identity.
  CHECK(ringccAllReduceAdasum(buf.data(), buf.data(), 10, ncclFloat32, nullptr, 0, comm, nullptr) ==
        ncclSuccess);
  CHECK(buf == std::vector<float>(10, 1.0f));
  ncclCommDestroy(comm);
}
