// A peer that dies while the others are inside ncclCommInitRank: they get an error within
// NCCL_BOOTSTRAP_TIMEOUT (set small here), never a hang; and a rank killed at any moment of
// init gives either an init error or, if init was already done, an error in the first
// collective, both in bounded time.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

constexpr int kBootstrapTimeoutMs = 1000;
// Init must fail within the bootstrap timeout plus this slack (2 busy cores).
constexpr double kSlackMs = 1500;
constexpr int kScenarioLimitS = 15;

struct Env {
  ScopedEnv bootstrapTimeout{"NCCL_BOOTSTRAP_TIMEOUT", std::to_string(kBootstrapTimeoutMs)};
  ScopedEnv timeout{"NCCL_TIMEOUT", "60000"};
  ScopedEnv p2p{"NCCL_P2P_DISABLE", std::nullopt};
};

// Survivor body: a timed ncclCommInitRank, then (if init worked) one all-reduce, then abort.
int initThenAllReduce(const ncclUniqueId& id, int n, int r, RankReport& rep) {
  rep.pid = getpid();
  ncclComm_t comm = nullptr;
  rep.failStartNs = nowNs();
  rep.initResult = ncclCommInitRank(&comm, n, id, r);
  rep.failEndNs = nowNs();
  rep.failResult = rep.initResult;
  if (rep.initResult != ncclSuccess) return 0;
  std::vector<float> buf(1 << 16, 1.0f);
  rep.failStartNs = nowNs();
  rep.failResult =
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
  rep.failEndNs = nowNs();
  rep.endResult = ncclCommAbort(comm);
  return 0;
}

void checkSurvivors(const SharedArray<RankReport>& reps, const std::vector<int>& status, int victim,
                    double boundMs, const char* scenario) {
  for (int r = 0; r < static_cast<int>(reps.size()); ++r) {
    if (r == victim) continue;
    const RankReport& rep = reps[r];
    INFO(scenario << ": rank " << r << " init " << rep.initResult << " result " << rep.failResult);
    CHECK(WIFEXITED(status[r]));
    CHECK(WEXITSTATUS(status[r]) == 0);
    CHECK(rep.failResult != ncclSuccess);
    CHECK(rep.failResult != ncclInProgress);
    REQUIRE(rep.failEndNs > 0);
    double ms = msBetween(rep.failStartNs, rep.failEndNs);
    CHECK(ms < boundMs);
    CHECK(rep.endResult == ncclSuccess);
    std::printf("%s: rank %d %s failed (%d) after %.0f ms\n", scenario, r,
                rep.initResult != ncclSuccess ? "init" : "all-reduce", rep.failResult, ms);
  }
}

}  // namespace

TEST_CASE("a rank that never joins: ncclCommInitRank fails within NCCL_BOOTSTRAP_TIMEOUT",
          "[fault_init]") {
  Env env;
  const int n = 3, victim = 2;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        if (r == victim) return 0;  // exits before it ever reaches the rendezvous
        return initThenAllReduce(id, n, r, reps[r]);
      },
      kScenarioLimitS);
  checkSurvivors(reps, status, victim, kBootstrapTimeoutMs + kSlackMs, "fault_init never joins");
  for (int r = 0; r < n; ++r)
    if (r != victim) CHECK(reps[r].initResult == ncclRemoteError);
  CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], n))) == "nothing");
}

TEST_CASE("a rank that dies after the rendezvous: ncclCommInitRank fails in bounded time",
          "[fault_init]") {
  Env env;
  const int n = 3, victim = 1;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        if (r != victim) return initThenAllReduce(id, n, r, reps[r]);
        // The victim does what init does first, joining the rendezvous and the bootstrap ring,
        // then dies before the peer-info exchange that the others are waiting in.
        reps[r].pid = getpid();
        std::unique_ptr<ringcc::Bootstrap> b;
        if (ringcc::Bootstrap::create(id, r, n, nullptr, &b) != ncclSuccess) return 3;
        reps[r].eventNs = nowNs();
        kill(getpid(), SIGKILL);
        return 4;
      },
      kScenarioLimitS);
  CHECK(WIFSIGNALED(status[victim]));
  checkSurvivors(reps, status, victim, kBootstrapTimeoutMs + kSlackMs, "fault_init dies");
  for (int r = 0; r < n; ++r)
    if (r != victim) CHECK(reps[r].initResult == ncclRemoteError);
  CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], n))) == "nothing");
}

TEST_CASE("a rank killed at any moment of init: an init or collective error, never a hang",
          "[fault_init]") {
  Env env;
  const int n = 3, victim = 2;
  for (int delayMs : {0, 2, 5, 10, 20, 40}) {
    SharedArray<RankReport> reps(n);
    REQUIRE(reps.ok());
    ncclUniqueId id = newUniqueId();
    std::vector<int> status = runProcessesStatus(
        n,
        [&](int r) {
          if (r != victim) return initThenAllReduce(id, n, r, reps[r]);
          reps[r].pid = getpid();
          std::thread([&, delayMs] {
            sleepMs(delayMs);
            reps[r].eventNs = nowNs();
            kill(getpid(), SIGKILL);
          }).detach();
          ncclComm_t comm = nullptr;
          if (ncclCommInitRank(&comm, n, id, r) == ncclSuccess) reps[r].initResult = 1;
          pause();
          return 5;
        },
        kScenarioLimitS);
    INFO("killed " << delayMs << " ms into init; pids " << reps[0].pid << " " << reps[1].pid << " "
                   << reps[2].pid << ", victim init " << reps[victim].initResult);
    CHECK(WIFSIGNALED(status[victim]));
    std::string scenario = "fault_init killed at " + std::to_string(delayMs) + " ms";
    checkSurvivors(reps, status, victim, kBootstrapTimeoutMs + kSlackMs, scenario.c_str());
    CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], n))) == "nothing");
  }
}
