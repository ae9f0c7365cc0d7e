// ncclCommGetUniqueId + ncclCommGrow: existing ranks and new ones (threads of this process,
// forked processes) form a larger communicator, a full one: exact collectives over every rank.
// The id is single-use; grow works inside a group and with non-blocking configs; the existing
// ranks agree before anyone joins (no coordinator, two, nRanks that differ: every existing rank
// fails at once); a new rank that never comes fails the others at NCCL_BOOTSTRAP_TIMEOUT.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "src/core/comm.h"
#include "support/ranks.h"
#include "support/test_env.h"

using ringcc::test::CapturedLog;
using ringcc::test::newUniqueId;
using ringcc::test::runProcesses;
using ringcc::test::runThreads;
using ringcc::test::ScopedEnv;
using ringcc::test::SharedArray;
using ringcc::test::waitCommReady;

namespace {

constexpr size_t kCount = 3000;  // not a multiple of any slot: the last slice is partial

// Rank r's input: integers, so sums are exact in any order.
int32_t inputOf(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + i % 997); }

// The sum over ranks 0..n-1 of inputOf(r, i).
int64_t sumOfInputs(int n, size_t i) {
  int64_t sum = 0;
  for (int r = 0; r < n; ++r) sum += inputOf(r, i);
  return sum;
}

// Failures of the collectives on one rank of an n-rank communicator: all-reduce (sum),
// all-gather, broadcast from the last rank, reduce-scatter; each result checked element by
// element. Called by every rank (threads or processes).
int collectiveFailures(ncclComm_t comm, int n, int rank) {
  int failures = 0;
  std::vector<int32_t> send(kCount), recv(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) send[i] = inputOf(rank, i);
  if (ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, nullptr) !=
      ncclSuccess)
    return 1000;
  for (size_t i = 0; i < kCount; ++i) failures += recv[i] != sumOfInputs(n, i);
  std::vector<int32_t> gathered(kCount * n, -1);
  if (ncclAllGather(send.data(), gathered.data(), kCount, ncclInt32, comm, nullptr) != ncclSuccess)
    return 1000;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < kCount; ++i) failures += gathered[r * kCount + i] != inputOf(r, i);
  std::vector<int32_t> bcast(kCount, rank == n - 1 ? 7 : -1);
  if (ncclBroadcast(bcast.data(), bcast.data(), kCount, ncclInt32, n - 1, comm, nullptr) !=
      ncclSuccess)
    return 1000;
  for (int32_t v : bcast) failures += v != 7;
  std::vector<int32_t> block(kCount * n), mine(kCount, -1);
  for (size_t i = 0; i < block.size(); ++i) block[i] = inputOf(rank, i);
  if (ncclReduceScatter(block.data(), mine.data(), kCount, ncclInt32, ncclSum, comm, nullptr) !=
      ncclSuccess)
    return 1000;
  for (size_t i = 0; i < kCount; ++i) failures += mine[i] != sumOfInputs(n, rank * kCount + i);
  return failures;
}

// Count and rank of a communicator, as one value to compare.
std::pair<int, int> shape(ncclComm_t comm) {
  int count = -1, rank = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &rank);
  return {count, rank};
}

// The grow call of rank r of the grown communicator: ranks below old.size() are existing
// (old[r] is theirs), rank 0 the coordinator; the others are new.
ncclResult_t growRank(const std::vector<ncclComm_t>& old, int nRanks, const ncclUniqueId& id, int r,
                      ncclComm_t* out, ncclConfig_t* config = nullptr) {
  const int n = static_cast<int>(old.size());
  if (r < n) return ncclCommGrow(old[r], nRanks, r == 0 ? &id : nullptr, -1, out, config);
  return ncclCommGrow(nullptr, nRanks, &id, r, out, config);
}

// n communicators of one process (ncclCommInitAll) and a grow id from rank 0's.
std::vector<ncclComm_t> parentWithGrowId(int n, ncclUniqueId* id) {
  std::vector<ncclComm_t> old(n, nullptr);
  REQUIRE(ncclCommInitAll(old.data(), n, nullptr) == ncclSuccess);
  REQUIRE(ncclCommGetUniqueId(old[0], id) == ncclSuccess);
  return old;
}

void destroyAll(const std::vector<ncclComm_t>& comms) {
  for (ncclComm_t c : comms)
    if (c) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

}  // namespace

TEST_CASE("2 ranks grow to 4 (threads): old ranks kept, new ones after; collectives exact",
          "[grow]") {
  for (auto [n, nRanks] : {std::pair{2, 4}, std::pair{1, 3}, std::pair{3, 4}}) {
    INFO(n << " ranks grow to " << nRanks);
    ncclUniqueId id;
    std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
    std::vector<ncclComm_t> big(nRanks, nullptr);
    std::vector<ncclResult_t> results(nRanks, ncclInternalError);
    std::vector<int> failures(nRanks, -1);
    runThreads(nRanks, [&](int r) {
      results[r] = growRank(old, nRanks, id, r, &big[r]);
      if (results[r] == ncclSuccess) failures[r] = collectiveFailures(big[r], nRanks, r);
    });
    for (int r = 0; r < nRanks; ++r) {
      INFO("rank " << r);
      REQUIRE(results[r] == ncclSuccess);
      CHECK(shape(big[r]) == std::pair{nRanks, r});
      CHECK(failures[r] == 0);
    }
    // The parent is still a communicator of its own until destroyed (NCCL: destroy it after).
    runThreads(n, [&](int r) { failures[r] = collectiveFailures(old[r], n, r); });
    for (int r = 0; r < n; ++r) CHECK(failures[r] == 0);
    destroyAll(old);
    destroyAll(big);
  }
}

TEST_CASE("a grow id is single-use; one id at a time per communicator", "[grow]") {
  const int n = 2, nRanks = 3;
  ncclUniqueId id, other;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  EXPECT_REFUSED(ncclCommGetUniqueId(old[0], &other), ncclInvalidUsage, "not consumed yet");
  std::vector<ncclComm_t> big(nRanks, nullptr);
  std::vector<ncclResult_t> results(nRanks, ncclInternalError);
  runThreads(nRanks, [&](int r) { results[r] = growRank(old, nRanks, id, r, &big[r]); });
  for (int r = 0; r < nRanks; ++r) REQUIRE(results[r] == ncclSuccess);
  destroyAll(big);

  {
    // The existing ranks again with the consumed id: both refuse at once, the coordinator
    // naming the cause; a new rank with it is refused by the id's root.
    CapturedLog log;
    std::vector<ncclComm_t> again(nRanks, nullptr);
    runThreads(nRanks, [&](int r) { results[r] = growRank(old, nRanks, id, r, &again[r]); });
    INFO(log.text());
    for (int r = 0; r < nRanks; ++r) {
      CHECK(results[r] == ncclInvalidUsage);
      CHECK(again[r] == nullptr);
    }
    CHECK(log.contains("uniqueId was consumed by an earlier grow"));
    CHECK(log.contains("rank 0's uniqueId was refused there"));
    CHECK(log.contains("already completed"));
  }
  // A fresh id grows again; an id this communicator did not give is refused on every rank.
  ncclUniqueId second;
  REQUIRE(ncclCommGetUniqueId(old[1], &second) == ncclSuccess);
  {
    CapturedLog log;
    std::vector<ncclComm_t> wrong(n, nullptr);
    runThreads(n, [&](int r) {
      // Rank 0 coordinates with rank 1's id: not what its communicator gave.
      results[r] = ncclCommGrow(old[r], nRanks, r == 0 ? &second : nullptr, -1, &wrong[r], nullptr);
    });
    INFO(log.text());
    for (int r = 0; r < n; ++r) CHECK(results[r] == ncclInvalidUsage);
    CHECK(log.contains("not the id ncclCommGetUniqueId gave this communicator"));
  }
  std::vector<ncclComm_t> third(nRanks, nullptr);
  runThreads(nRanks, [&](int r) {
    if (r < n)
      results[r] = ncclCommGrow(old[r], nRanks, r == 1 ? &second : nullptr, -1, &third[r], nullptr);
    else
      results[r] = ncclCommGrow(nullptr, nRanks, &second, r, &third[r], nullptr);
  });
  for (int r = 0; r < nRanks; ++r) {
    REQUIRE(results[r] == ncclSuccess);
    CHECK(shape(third[r]) == std::pair{nRanks, r});
  }
  destroyAll(third);
  destroyAll(old);
}

TEST_CASE("grow inside a group: one thread drives the existing and the new ranks", "[grow]") {
  const int n = 2, nRanks = 4;
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  std::vector<ncclComm_t> big(nRanks, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < nRanks; ++r) REQUIRE(growRank(old, nRanks, id, r, &big[r]) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  std::vector<int32_t> send(nRanks * kCount), recv(nRanks * kCount, -1);
  for (int r = 0; r < nRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) send[r * kCount + i] = inputOf(r, i);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < nRanks; ++r) {
    REQUIRE(big[r] != nullptr);
    CHECK(shape(big[r]) == std::pair{nRanks, r});
    REQUIRE(ncclAllReduce(&send[r * kCount], &recv[r * kCount], kCount, ncclInt32, ncclSum, big[r],
                          nullptr) == ncclSuccess);
  }
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  int wrong = 0;
  for (int r = 0; r < nRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) wrong += recv[r * kCount + i] != sumOfInputs(nRanks, i);
  CHECK(wrong == 0);
  destroyAll(big);
  destroyAll(old);
}

TEST_CASE("non-blocking grow answers ncclInProgress and becomes ready", "[grow]") {
  const int n = 2, nRanks = 3;
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  std::vector<ncclComm_t> big(nRanks, nullptr);
  std::vector<ncclResult_t> first(nRanks), ready(nRanks);
  std::vector<int> failures(nRanks, -1);
  std::vector<int> blocking(nRanks, -1);
  runThreads(nRanks, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    first[r] = growRank(old, nRanks, id, r, &big[r], &config);
    ready[r] = big[r] ? waitCommReady(big[r]) : ncclInternalError;
    if (ready[r] == ncclSuccess) {
      blocking[r] = big[r]->config.blocking;
      // Host operations of a non-blocking communicator still complete before they return.
      failures[r] = collectiveFailures(big[r], nRanks, r);
    }
  });
  for (int r = 0; r < nRanks; ++r) {
    INFO("rank " << r);
    CHECK((first[r] == ncclInProgress || first[r] == ncclSuccess));
    CHECK(ready[r] == ncclSuccess);
    CHECK(blocking[r] == 0);
    CHECK(failures[r] == 0);
  }
  destroyAll(big);
  destroyAll(old);
}

TEST_CASE("existing ranks that disagree all fail at once, naming the disagreement", "[grow]") {
  const int n = 2;
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  std::vector<ncclResult_t> results(n, ncclInternalError);
  std::vector<ncclComm_t> out(n, nullptr);
  struct Case {
    const char* what;
    bool withId[2];
    int nRanks[2];
    const char* needle;
  };
  const Case cases[] = {
      {"no coordinator", {false, false}, {3, 3}, "no rank of the 2-rank communicator passed"},
      {"nRanks differ", {true, false}, {3, 4}, "passed nRanks"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CapturedLog log;
    runThreads(n, [&](int r) {
      results[r] =
          ncclCommGrow(old[r], c.nRanks[r], c.withId[r] ? &id : nullptr, -1, &out[r], nullptr);
    });
    INFO(log.text());
    for (int r = 0; r < n; ++r) {
      CHECK(results[r] == ncclInvalidUsage);
      CHECK(out[r] == nullptr);
    }
    CHECK(log.contains(c.needle));
  }
  destroyAll(old);
}

TEST_CASE("a new rank that never comes: the others fail at NCCL_BOOTSTRAP_TIMEOUT",
          "[grow_timeout]") {
  ScopedEnv timeout{"NCCL_BOOTSTRAP_TIMEOUT", "1500"};
  const int n = 2, nRanks = 4;  // rank 3 never calls
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  std::vector<ncclComm_t> big(nRanks, nullptr);
  std::vector<ncclResult_t> results(nRanks, ncclInternalError);
  CapturedLog log;
  runThreads(nRanks - 1, [&](int r) { results[r] = growRank(old, nRanks, id, r, &big[r]); });
  INFO(log.text());
  for (int r = 0; r < nRanks - 1; ++r) {
    CHECK(results[r] == ncclRemoteError);
    CHECK(big[r] == nullptr);
  }
  CHECK(log.contains("after 1500 ms"));  // the root's or a rank's own wait: the timeout
  // The parent is untouched: it still works, and can grow again with a new id.
  std::vector<int> failures(n, -1);
  runThreads(n, [&](int r) { failures[r] = collectiveFailures(old[r], n, r); });
  for (int r = 0; r < n; ++r) CHECK(failures[r] == 0);
  REQUIRE(ncclCommGetUniqueId(old[0], &id) == ncclSuccess);
  const int smaller = 3;
  runThreads(smaller, [&](int r) { results[r] = growRank(old, smaller, id, r, &big[r]); });
  for (int r = 0; r < smaller; ++r) CHECK(results[r] == ncclSuccess);
  destroyAll(big);
  destroyAll(old);
}

TEST_CASE("2 processes grow to 4 with 2 new processes; a second use of the id is refused",
          "[grow_fork]") {
  const int n = 2, nRanks = 4;
  ncclUniqueId initId = newUniqueId();
  struct Shared {
    int ready;  // __atomic builtins: std::atomic is not trivially copyable
    ncclUniqueId id;
  };
  SharedArray<Shared> shared(1);
  REQUIRE(shared.ok());
  int failed = runProcesses(nRanks, [&](int r) {
    ncclComm_t old = nullptr, big = nullptr;
    ncclUniqueId id;
    if (r < n) {
      if (ncclCommInitRank(&old, n, initId, r) != ncclSuccess) return 10;
      if (r == 0) {
        if (ncclCommGetUniqueId(old, &id) != ncclSuccess) return 11;
        shared[0].id = id;  // out of band: the new processes read it
        __atomic_store_n(&shared[0].ready, 1, __ATOMIC_RELEASE);
      }
      if (ncclCommGrow(old, nRanks, r == 0 ? &id : nullptr, -1, &big, nullptr) != ncclSuccess)
        return 12;
    } else {
      auto ready = [&] { return __atomic_load_n(&shared[0].ready, __ATOMIC_ACQUIRE) != 0; };
      for (int i = 0; i < 20000 && !ready(); ++i) ringcc::test::sleepMs(1);
      if (!ready()) return 13;
      id = shared[0].id;
      if (ncclCommGrow(nullptr, nRanks, &id, r, &big, nullptr) != ncclSuccess) return 14;
    }
    if (shape(big) != std::pair{nRanks, r}) return 15;
    if (collectiveFailures(big, nRanks, r) != 0) return 16;
    // A new process (rank 2) uses the id again: the coordinator's process still serves it,
    // to refuse it (the rendezvous completed). The collective after it keeps that process
    // alive until the answer came.
    if (r == 2) {
      ncclComm_t again = nullptr;
      if (ncclCommGrow(nullptr, nRanks, &id, r, &again, nullptr) != ncclInvalidUsage) return 17;
      if (again != nullptr) return 18;
    }
    if (collectiveFailures(big, nRanks, r) != 0) return 19;
    if (ncclCommDestroy(big) != ncclSuccess) return 20;
    if (old && ncclCommDestroy(old) != ncclSuccess) return 21;
    return 0;
  });
  CHECK(failed == 0);
}

TEST_CASE("a non-blocking grow whose new rank never comes: the error shows in the async state",
          "[grow_timeout]") {
  ScopedEnv timeout{"NCCL_BOOTSTRAP_TIMEOUT", "1500"};
  const int n = 2, nRanks = 3;  // rank 2 never calls
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(n, &id);
  std::vector<ncclComm_t> big(n, nullptr);
  std::vector<ncclResult_t> first(n), state(n);
  runThreads(n, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    first[r] = growRank(old, nRanks, id, r, &big[r], &config);
    state[r] = big[r] ? waitCommReady(big[r]) : ncclInternalError;
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK((first[r] == ncclInProgress || first[r] == ncclRemoteError));
    CHECK(state[r] == ncclRemoteError);
    // The failed communicator refuses work and says why: the grow's root (its own wait timed
    // out, or the root gave up first and said so).
    int x = 0;
    CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, big[r], nullptr) != ncclSuccess);
    const std::string why = ncclGetLastError(big[r]);
    INFO(why);
    CHECK(why.find("has an error from earlier: bootstrap") != std::string::npos);
    CHECK(why.find("root") != std::string::npos);
  }
  for (ncclComm_t c : big) CHECK(ncclCommAbort(c) == ncclSuccess);
  destroyAll(old);
}

TEST_CASE("abort ends a non-blocking grow that waits for a missing new rank", "[grow]") {
  // The default NCCL_BOOTSTRAP_TIMEOUT (30 s): only the abort can end the wait this soon.
  ncclUniqueId id;
  std::vector<ncclComm_t> old = parentWithGrowId(1, &id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t big = nullptr;
  REQUIRE(ncclCommGrow(old[0], 2, &id, -1, &big, &config) == ncclInProgress);
  REQUIRE(big != nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ncclResult_t state;
  CHECK(ncclCommGetAsyncError(big, &state) == ncclSuccess);
  CHECK(state == ncclInProgress);
  auto start = std::chrono::steady_clock::now();
  CHECK(ncclCommAbort(big) == ncclSuccess);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  CHECK(ms < 5000);
  destroyAll(old);
}
