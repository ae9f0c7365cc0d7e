// ncclCommSuspend(NCCL_SUSPEND_MEM) / ncclCommResume on host communicators: a suspended
// communicator has closed its connections (ncclCommMemStats counts no connection memory and
// says it is suspended), refuses operations with an error that says so, and after the resume
// runs exact collectives again on connections made anew. Threads of one process (p2p) and
// forked processes (shm; under RINGCC_NET=ucx, UCX).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "support/ranks.h"
#include "support/test_env.h"

using ringcc::test::CapturedLog;
using ringcc::test::newUniqueId;
using ringcc::test::runProcesses;
using ringcc::test::runThreads;

namespace {

constexpr size_t kCount = 5000;  // several slots, a partial last one

int32_t inputOf(int rank, size_t i, int round) {
  return static_cast<int32_t>((rank + 1) * 100 + i % 331 + round);
}

// All-reduce (sum) of inputOf on this rank; the number of wrong elements.
int allReduceRound(ncclComm_t comm, int rank, int nranks, int round) {
  std::vector<int32_t> buf(kCount);
  for (size_t i = 0; i < kCount; ++i) buf[i] = inputOf(rank, i, round);
  if (ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr) !=
      ncclSuccess)
    return static_cast<int>(kCount);
  int bad = 0;
  for (size_t i = 0; i < kCount; ++i) {
    int64_t want = 0;
    for (int r = 0; r < nranks; ++r) want += inputOf(r, i, round);
    bad += buf[i] == want ? 0 : 1;
  }
  return bad;
}

uint64_t stat(ncclComm_t comm, ncclCommMemStat_t which) {
  uint64_t v = ~uint64_t{0};
  return ncclCommMemStats(comm, which, &v) == ncclSuccess ? v : ~uint64_t{0};
}

// One rank's whole scenario; a failure count (0: all held). Two suspend/resume cycles, so the
// connections made after a resume are themselves released by the next suspend.
int suspendScenario(ncclComm_t comm, int rank, int nranks, std::string* why) {
  auto no = [&](const std::string& what) {
    *why += "rank " + std::to_string(rank) + ": " + what + "; ";
    return 1;
  };
  int bad = 0;
  for (int cycle = 0; cycle < 2; ++cycle) {
    if (allReduceRound(comm, rank, nranks, 2 * cycle) != 0) bad += no("all-reduce before suspend");
    const uint64_t before = stat(comm, ncclStatGpuMemSuspend);
    if (before == 0 || before == ~uint64_t{0}) bad += no("no connection memory counted");
    if (stat(comm, ncclStatGpuMemTotal) != before + stat(comm, ncclStatGpuMemPersist))
      bad += no("total is not suspendable + persistent");
    if (stat(comm, ncclStatGpuMemSuspended) != 0) bad += no("suspended before suspend");
    if (ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclSuccess) return bad + no("suspend failed");
    if (stat(comm, ncclStatGpuMemSuspended) != 1) bad += no("not suspended after suspend");
    if (stat(comm, ncclStatGpuMemSuspend) != 0) bad += no("connection memory kept");
    int32_t x = 1;
    if (ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) != ncclInvalidUsage)
      bad += no("an all-reduce ran while suspended");
    if (ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclInvalidUsage)
      bad += no("suspended twice");
    if (ncclCommResume(comm) != ncclSuccess) return bad + no("resume failed");
    if (ncclCommResume(comm) != ncclInvalidUsage) bad += no("resumed a communicator not suspended");
    if (stat(comm, ncclStatGpuMemSuspended) != 0) bad += no("suspended after resume");
    if (allReduceRound(comm, rank, nranks, 2 * cycle + 1) != 0) bad += no("all-reduce after resume");
    if (stat(comm, ncclStatGpuMemSuspend) == 0) bad += no("no connections after resume");
  }
  return bad;
}

}  // namespace

TEST_CASE("suspend frees the connections, refuses operations, resume runs again: threads",
          "[suspend]") {
  const int n = 3;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  std::vector<int> bad(n, 0);
  std::vector<std::string> why(n);
  // Each rank on its own thread: suspend is collective (a barrier of the ranks).
  runThreads(n, [&](int r) { bad[r] = suspendScenario(comms[r], r, n, &why[r]); });
  for (int r = 0; r < n; ++r) {
    INFO(why[r]);
    CHECK(bad[r] == 0);
  }
  {
    CapturedLog log;
    int32_t x = 1;
    REQUIRE(ncclCommSuspend(comms[0], 0) == ncclSuccess);  // flags 0: suspended, memory kept
    CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comms[0], nullptr) == ncclInvalidUsage);
    CHECK(log.contains("communicator is suspended (ncclCommSuspend): call ncclCommResume first"));
    REQUIRE(ncclCommResume(comms[0]) == ncclSuccess);
  }
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("suspend and resume in forked processes", "[suspend_fork]") {
  const int n = 3;
  ncclUniqueId id = newUniqueId();
  int failed = runProcesses(n, [&](int rank) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
    std::string why;
    const int bad = suspendScenario(comm, rank, n, &why);
    if (bad) std::fprintf(stderr, "[suspend fork] %s\n", why.c_str());
    // Every rank is done with its data before any destroys (the last all-reduce's sends).
    int32_t x = 0;
    if (ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) return 11;
    if (ncclCommDestroy(comm) != ncclSuccess) return 12;
    return bad ? 1 : 0;
  });
  CHECK(failed == 0);
}
