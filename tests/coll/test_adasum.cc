// ringccAllReduceAdasum on host communicators against the reference of its definition
// (coll/adasum_case.h): 1..9 ranks as threads, 2..5 as forked processes; segments, zero
// vectors, in and out of place; bad arguments.
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "coll/adasum_case.h"
#include "nccl.h"
#include "ringcc.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

// Small connection buffers (slot boundaries inside the test's sizes) and a bounded timeout.
struct TestEnv {
  ScopedEnv buffsize{"NCCL_BUFFSIZE", "65536"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "20000"};
};

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
    for (const AdasumCase& c : adasumCases(n)) {
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
    std::vector<AdasumCase> cases = adasumCases(n);
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      int bad = 0;
      for (const AdasumCase& c : cases) {
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
  // Every case of adasumCases(n) in one group per rank, after an all-reduce: the calls run at
  // ncclGroupEnd, each rank's in call order and the ranks concurrently (one thread cannot run
  // rank 0's steps to the end before rank 1's start). The segment lists are overwritten
  // before ncclGroupEnd: the call must have kept its own copy.
  TestEnv env;
  for (int n : {1, 2, 4, 5}) {
    std::vector<ncclComm_t> comms(n);
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
    const std::vector<AdasumCase> cases = adasumCases(n);
    std::vector<std::vector<AdasumCase::Buffers>> bufs(cases.size());
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
    const std::vector<AdasumCase> cases = {AdasumCase(ncclFloat32, n, {5000}, false, 7),
                                     AdasumCase(ncclFloat64, n, {333, 100, 64, 1, 4099}, true, 8)};
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      AdasumCase::Buffers b0 = cases[0].buffers(rank), b1 = cases[1].buffers(rank);
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
