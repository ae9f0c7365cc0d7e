// Ranks that die or leave while the others are inside collectives: forked processes over shm.
//
// Standards checked here: a dead or departed peer gives the survivors an error (ncclRemoteError)
// in bounded time, never a hang, and ncclCommGetAsyncError reports it; abort and destroy then
// return; the survivors can shrink the dead rank out and carry on; nothing is left in
// /dev/shm, not even when every rank is killed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

// 4 Mi floats (16 MiB) on three channels (Env), so that the first collective also makes
// connections, and long enough that a peer dies while the others are inside it.
constexpr size_t kCount = size_t{4} << 20;
// A survivor must see the error this soon after its peer died (peers are polled every 20 ms;
// the slack is for 4 processes on 2 busy cores).
constexpr double kErrorBoundMs = 3000;
// Each scenario's hard limit: its children are killed after it.
constexpr int kScenarioLimitS = 25;

struct Env {
  ScopedEnv bootstrapTimeout{"NCCL_BOOTSTRAP_TIMEOUT", "5000"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "60000"};  // a peer check must find it, not the deadline
  ScopedEnv p2p{"NCCL_P2P_DISABLE", std::nullopt};
  ScopedEnv channels{"NCCL_MIN_NCHANNELS", "3"};
};

// Runs all-reduces until one fails or maxIter succeeded, checking each result exactly.
// beforeIter(it) runs just before iteration it calls ncclAllReduce. Returns the failing call's
// code, or ncclSuccess.
ncclResult_t allReduceLoop(ncclComm_t comm, int nranks, int rank, int maxIter, RankReport& rep,
                           const std::function<void(int)>& beforeIter = nullptr) {
  std::vector<float> send(kCount), recv(kCount);
  for (int it = 0; it < maxIter; ++it) {
    fillInput(send, rank, it);
    if (beforeIter) beforeIter(it);
    int64_t t0 = nowNs();
    ncclResult_t rc =
        ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
    int64_t t1 = nowNs();
    if (rc != ncclSuccess) {
      rep.failResult = rc;
      rep.failStartNs = t0;
      rep.failEndNs = t1;
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      rep.asyncError = async;
      return rc;
    }
    if (isSumOfInputs(recv, nranks, it))
      ++rep.iterations;
    else
      ++rep.badResults;
  }
  return ncclSuccess;
}

// Kills this process `ms` from now, from another thread, noting the moment in rep.eventNs.
void dieSoon(RankReport& rep, int ms) {
  std::thread([&rep, ms] {
    sleepMs(ms);
    rep.eventNs = nowNs();
    kill(getpid(), SIGKILL);
  }).detach();
}

// The checks every survivor of a dead or departed peer must pass.
void checkSurvivor(const RankReport& rep, int status, int minIterations, int64_t faultNs,
                   const char* scenario, int rank) {
  INFO(scenario << ": survivor rank " << rank);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(rep.initResult == ncclSuccess);
  CHECK(rep.badResults == 0);
  CHECK(rep.iterations >= minIterations);  // everything before the fault completed, exactly
  CHECK(rep.failResult == ncclRemoteError);
  CHECK(rep.asyncError == ncclRemoteError);
  REQUIRE(faultNs > 0);
  REQUIRE(rep.failEndNs > 0);
  double errorMs = msBetween(faultNs, rep.failEndNs);
  CHECK(errorMs < kErrorBoundMs);
  CHECK(rep.endResult == ncclSuccess);
  CHECK(msBetween(rep.endStartNs, rep.endEndNs) < 2000);
  std::printf(
      "%s: rank %d failed %.0f ms after the fault (in a call that began %.0f ms %s it, "
      "after %d good ones), ended in %.1f ms\n",
      scenario, rank, errorMs, std::abs(msBetween(rep.failStartNs, faultNs)),
      rep.failStartNs <= faultNs ? "before" : "after", rep.iterations,
      msBetween(rep.endStartNs, rep.endEndNs));
}

void checkNoSegments(const SharedArray<RankReport>& reps) {
  CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], reps.size()))) == "nothing");
}

}  // namespace

TEST_CASE("a rank SIGKILLed mid-all-reduce: the survivors fail in bounded time, then abort",
          "[fault_kill]") {
  Env env;
  const int n = 4, victim = 2, killIter = 2;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        RankReport& rep = reps[r];
        rep.pid = getpid();
        ncclComm_t comm = nullptr;
        rep.initResult = ncclCommInitRank(&comm, n, id, r);
        if (rep.initResult != ncclSuccess) return 10;
        allReduceLoop(comm, n, r, 1000, rep, [&](int it) {
          if (r == victim && it == killIter) dieSoon(rep, 2);
        });
        if (r == victim) pause();  // the killer fires
        rep.endStartNs = nowNs();
        rep.endResult = ncclCommAbort(comm);
        rep.endEndNs = nowNs();
        return 0;
      },
      kScenarioLimitS);
  INFO("victim status " << status[victim]);
  CHECK(WIFSIGNALED(status[victim]));
  CHECK(reps[victim].iterations >= killIter);
  for (int r = 0; r < n; ++r)
    if (r != victim)
      checkSurvivor(reps[r], status[r], killIter, reps[victim].eventNs, "fault_kill", r);
  checkNoSegments(reps);
}

TEST_CASE("a rank that destroys its communicator mid-sequence: the others fail, then destroy",
          "[fault_exit]") {
  Env env;
  const int n = 3, leaver = 1, leaveAfter = 2;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        RankReport& rep = reps[r];
        rep.pid = getpid();
        ncclComm_t comm = nullptr;
        rep.initResult = ncclCommInitRank(&comm, n, id, r);
        if (rep.initResult != ncclSuccess) return 10;
        allReduceLoop(comm, n, r, r == leaver ? leaveAfter : 1000, rep);
        if (r == leaver) rep.eventNs = nowNs();
        rep.endStartNs = nowNs();
        rep.endResult = ncclCommDestroy(comm);
        rep.endEndNs = nowNs();
        return 0;  // the leaver exits normally
      },
      kScenarioLimitS);
  CHECK(WIFEXITED(status[leaver]));
  CHECK(WEXITSTATUS(status[leaver]) == 0);
  CHECK(reps[leaver].iterations == leaveAfter);
  CHECK(reps[leaver].endResult == ncclSuccess);
  for (int r = 0; r < n; ++r)
    if (r != leaver)
      checkSurvivor(reps[r], status[r], leaveAfter, reps[leaver].eventNs, "fault_exit", r);
  for (int r = 0; r < n; ++r)
    if (r != leaver) CHECK(reps[r].iterations == leaveAfter);
  checkNoSegments(reps);
}

TEST_CASE("after a rank died, the survivors shrink it out and all-reduce exactly",
          "[fault_shrink]") {
  Env env;
  const int n = 4, victim = 0, killIter = 1, afterIters = 3;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        RankReport& rep = reps[r];
        rep.pid = getpid();
        ncclComm_t comm = nullptr;
        rep.initResult = ncclCommInitRank(&comm, n, id, r);
        if (rep.initResult != ncclSuccess) return 10;
        allReduceLoop(comm, n, r, 1000, rep, [&](int it) {
          if (r == victim && it == killIter) dieSoon(rep, 2);
        });
        if (r == victim) pause();
        // Survivors: shrink the dead rank out, drop the old communicator, carry on.
        int exclude[] = {victim};
        ncclComm_t small = nullptr;
        rep.extraResult = ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT);
        rep.endStartNs = nowNs();
        rep.endResult = ncclCommAbort(comm);
        rep.endEndNs = nowNs();
        if (rep.extraResult != ncclSuccess || small == nullptr) return 11;
        int count = 0, rank = -1;
        ncclCommCount(small, &count);
        ncclCommUserRank(small, &rank);
        if (count != n - 1 || rank != r - 1) return 12;
        RankReport after{};
        if (allReduceLoop(small, n - 1, rank, afterIters, after) != ncclSuccess) return 13;
        rep.extraIterations = after.iterations;
        return ncclCommDestroy(small) == ncclSuccess ? 0 : 14;
      },
      kScenarioLimitS);
  CHECK(WIFSIGNALED(status[victim]));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    checkSurvivor(reps[r], status[r], killIter, reps[victim].eventNs, "fault_shrink", r);
    CHECK(reps[r].extraResult == ncclSuccess);
    CHECK(reps[r].extraIterations == afterIters);
  }
  checkNoSegments(reps);
}

TEST_CASE("connected shm segments have no name left; killing every rank leaves nothing",
          "[fault_shm]") {
  Env env;
  const int n = 3;
  SharedArray<RankReport> reps(n);
  REQUIRE(reps.ok());
  ncclUniqueId id = newUniqueId();
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) {
        RankReport& rep = reps[r];
        rep.pid = getpid();
        ncclComm_t comm = nullptr;
        rep.initResult = ncclCommInitRank(&comm, n, id, r);
        if (rep.initResult != ncclSuccess) return 10;
        // Ring connections on every channel, and point-to-point ones to every peer.
        if (allReduceLoop(comm, n, r, 1, rep) != ncclSuccess) return 11;
        std::vector<int> a2aSend(n * 1024, r), a2aRecv(n * 1024, -1);
        if (ncclAlltoAll(a2aSend.data(), a2aRecv.data(), 1024, ncclInt32, comm, nullptr) !=
            ncclSuccess)
          return 12;
        for (int p = 0; p < n; ++p)
          if (a2aRecv[p * 1024] != p) return 13;
        // Every connection this rank receives on has carried data, so its sender has attached and
        // unlinked the name: the segments live on as mappings only.
        if (!shmSegmentsOf({static_cast<int>(getpid())}).empty()) return 14;
        // Then every rank dies at a different moment inside the next collectives.
        allReduceLoop(comm, n, r, 1000, rep, [&](int it) {
          if (it == 0) dieSoon(rep, 5 + 7 * r);
        });
        pause();
        return 15;
      },
      kScenarioLimitS);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " status " << status[r]);
    CHECK(WIFSIGNALED(status[r]));
    CHECK(reps[r].eventNs > 0);
  }
  checkNoSegments(reps);
}
