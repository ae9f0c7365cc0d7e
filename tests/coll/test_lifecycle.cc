// Communicator lifecycle through the public API: init (threads, processes, groups,
// non-blocking), queries, split, shrink, finalize, revoke, destroy and abort.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "nccl.h"
#include "ringcc.h"
#include "src/core/comm.h"
#include "support/ranks.h"

using ringcc::test::newUniqueId;
using ringcc::test::runProcesses;
using ringcc::test::runThreads;
using ringcc::test::waitCommReady;

TEST_CASE("ncclCommInitAll makes one communicator per rank", "[lifecycle]") {
  for (int n : {1, 2, 4}) {
    std::vector<ncclComm_t> comms(n, nullptr);
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = 10 + i;
    REQUIRE(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess);
    for (int i = 0; i < n; ++i) {
      int count = -1, rank = -1, dev = -1;
      CHECK(ncclCommCount(comms[i], &count) == ncclSuccess);
      CHECK(ncclCommUserRank(comms[i], &rank) == ncclSuccess);
      CHECK(ncclCommCuDevice(comms[i], &dev) == ncclSuccess);
      CHECK(count == n);
      CHECK(rank == i);
      CHECK(dev == 10 + i);
      ringccMemKind_t kind;
      CHECK(ringccCommMemoryKind(comms[i], &kind) == ncclSuccess);
      CHECK(kind == ringccMemHost);
    }
    for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
}

TEST_CASE("ncclCommInitRank from threads with one unique id", "[lifecycle]") {
  const int n = 4;
  ncclUniqueId id = newUniqueId();
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<ncclResult_t> results(n);
  runThreads(n, [&](int r) { results[r] = ncclCommInitRank(&comms[r], n, id, r); });
  for (int r = 0; r < n; ++r) {
    REQUIRE(results[r] == ncclSuccess);
    int rank = -1;
    CHECK(ncclCommUserRank(comms[r], &rank) == ncclSuccess);
    CHECK(rank == r);
  }
  runThreads(n, [&](int r) { results[r] = ncclCommDestroy(comms[r]); });
  for (int r = 0; r < n; ++r) CHECK(results[r] == ncclSuccess);
}

TEST_CASE("ncclCommInitRank from forked processes", "[lifecycle_fork]") {
  for (int n : {2, 4}) {
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int r) {
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) return 10;
      int count = 0, rank = -1;
      ncclCommCount(comm, &count);
      ncclCommUserRank(comm, &rank);
      if (count != n || rank != r) return 11;
      return ncclCommDestroy(comm) == ncclSuccess ? 0 : 12;
    });
    CHECK(failed == 0);
  }
}

TEST_CASE("ncclCommInitRank inside a group from one thread", "[lifecycle]") {
  const int n = 3;
  ncclUniqueId id = newUniqueId();
  std::vector<ncclComm_t> comms(n, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(ncclCommInitRank(&comms[r], n, id, r) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    REQUIRE(comms[r] != nullptr);
    CHECK(ncclCommUserRank(comms[r], &rank) == ncclSuccess);
    CHECK(rank == r);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}

TEST_CASE("non-blocking init answers ncclInProgress and becomes ready", "[lifecycle]") {
  const int n = 2;
  ncclUniqueId id = newUniqueId();
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<ncclResult_t> first(n), ready(n);
  runThreads(n, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    first[r] = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
    ready[r] = waitCommReady(comms[r]);
  });
  for (int r = 0; r < n; ++r) {
    CHECK((first[r] == ncclInProgress || first[r] == ncclSuccess));
    CHECK(ready[r] == ncclSuccess);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}

TEST_CASE("a config from a newer, larger header is read by its size", "[lifecycle]") {
  // A later NCCL appends fields to 2.32's ncclConfig_t (120 bytes); they are ignored.
  struct NewerConfig {
    ncclConfig_t base;
    int fieldOfALaterNccl;
  } config;
  config.base = NCCL_CONFIG_INITIALIZER;
  config.base.size = sizeof(config);
  config.fieldOfALaterNccl = 12345;
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRankConfig(&comm, 1, newUniqueId(), 0, &config.base) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("configs of older headers (2.27, 2.28, 2.30) are read up to their size",
          "[lifecycle]") {
  // 2.27's struct ended after nvlsCTAs (72 bytes), 2.28's after nvlinkCentricSched (80),
  // 2.30's after graphStreamOrdering (96). Bytes past `size` are garbage here: a binary built
  // against that header has no such fields, so they must not be read.
  for (size_t size : {size_t{72}, size_t{80}, size_t{96}}) {
    INFO("size " << size);
    unsigned char bytes[sizeof(ncclConfig_t)];
    std::memset(bytes, 0x7f, sizeof(bytes));  // every int past `size` reads as 0x7f7f7f7f
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    std::memcpy(bytes, &init, size);
    auto* config = reinterpret_cast<ncclConfig_t*>(bytes);
    config->size = size;
    config->version = size == 72 ? 22707 : size == 80 ? 22800 : 23007;
    config->blocking = 1;
    if (size >= 80) config->nChannelsPerNetPeer = 2;
    if (size >= 96) config->graphUsageMode = 1;
    ncclComm_t comm = nullptr;
    REQUIRE(ncclCommInitRankConfig(&comm, 1, newUniqueId(), 0, config) == ncclSuccess);
    const ringcc::CommConfig& read = comm->config;
    CHECK(read.nChannelsPerNetPeer == (size >= 80 ? 2 : 0));
    CHECK(read.graphUsageMode == (size >= 96 ? 1 : NCCL_CONFIG_UNDEF_INT));
    CHECK(read.hostCftMode == NCCL_CONFIG_UNDEF_INT);  // 2.31's, past every size here
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
  }
}

TEST_CASE("ncclCommSplit groups by color and orders by key", "[split]") {
  const int n = 4;
  std::vector<ncclComm_t> comms(n, nullptr);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  std::vector<ncclComm_t> sub(n, nullptr);
  std::vector<ncclResult_t> results(n);
  // Ranks 0 and 2 form color 0, rank 1 color 1 alone, rank 3 opts out; keys reverse order.
  const int colors[n] = {0, 1, 0, NCCL_SPLIT_NOCOLOR};
  runThreads(n,
             [&](int r) { results[r] = ncclCommSplit(comms[r], colors[r], -r, &sub[r], nullptr); });
  for (int r = 0; r < n; ++r) REQUIRE(results[r] == ncclSuccess);
  CHECK(sub[3] == nullptr);
  int count = 0, rank = -1;
  REQUIRE(sub[0] != nullptr);
  CHECK(ncclCommCount(sub[0], &count) == ncclSuccess);
  CHECK(count == 2);
  CHECK(ncclCommUserRank(sub[0], &rank) == ncclSuccess);
  CHECK(rank == 1);  // key 0 sorts after rank 2's key -2
  CHECK(ncclCommUserRank(sub[2], &rank) == ncclSuccess);
  CHECK(rank == 0);
  CHECK(ncclCommCount(sub[1], &count) == ncclSuccess);
  CHECK(count == 1);
  for (ncclComm_t c : sub) CHECK(ncclCommDestroy(c) == ncclSuccess);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("ncclCommShrink leaves out excluded ranks, which do not take part", "[shrink]") {
  const int n = 4;
  std::vector<ncclComm_t> comms(n, nullptr);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  std::vector<ncclComm_t> sub(n, nullptr);
  std::vector<ncclResult_t> results(n, ncclSuccess);
  int exclude[] = {1};
  runThreads(n, [&](int r) {
    if (r == 1) return;  // the excluded rank might be dead: it does not call
    results[r] = ncclCommShrink(comms[r], exclude, 1, &sub[r], nullptr, NCCL_SHRINK_DEFAULT);
  });
  const int expectedRank[n] = {0, -1, 1, 2};
  for (int r : {0, 2, 3}) {
    REQUIRE(results[r] == ncclSuccess);
    int count = 0, rank = -1;
    CHECK(ncclCommCount(sub[r], &count) == ncclSuccess);
    CHECK(count == 3);
    CHECK(ncclCommUserRank(sub[r], &rank) == ncclSuccess);
    CHECK(rank == expectedRank[r]);
    CHECK(ncclCommDestroy(sub[r]) == ncclSuccess);
  }
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("abort from another thread ends an init that waits for missing peers", "[abort]") {
  ncclUniqueId id = newUniqueId();
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // Two ranks announced, one shows up: init can never finish.
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
  REQUIRE(r == ncclInProgress);
  REQUIRE(comm != nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ncclResult_t state;
  CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
  CHECK(state == ncclInProgress);
  auto start = std::chrono::steady_clock::now();
  ncclResult_t aborted = ncclInternalError;
  std::thread t([&] { aborted = ncclCommAbort(comm); });
  t.join();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  CHECK(aborted == ncclSuccess);
  CHECK(ms < 5000);
  // The handle is gone: using it again is an argument error, not a crash.
  int count;
  CHECK(ncclCommCount(comm, &count) == ncclInvalidArgument);
}

TEST_CASE("finalize and revoke forbid further operations", "[lifecycle]") {
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  CHECK(ncclCommRevoke(comm, 5) == ncclInvalidArgument);
  CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess);
  CHECK(ncclCommFinalize(comm) == ncclInvalidUsage);  // finalize after revoke is invalid
  ncclComm_t child = nullptr;
  CHECK(ncclCommSplit(comm, 0, 0, &child, nullptr) == ncclInvalidUsage);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);

  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  CHECK(ncclCommFinalize(comm) == ncclSuccess);
  CHECK(ncclCommSplit(comm, 0, 0, &child, nullptr) == ncclInvalidUsage);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
  CHECK(ncclCommDestroy(nullptr) == ncclSuccess);
}

TEST_CASE("ncclGetVersion and error strings", "[lifecycle]") {
  int version = 0;
  CHECK(ncclGetVersion(&version) == ncclSuccess);
  CHECK(version == NCCL_VERSION(2, 32, 3));  // the API level; ringccGetVersion tells ringcc
  CHECK(std::strlen(ncclGetErrorString(ncclRemoteError)) > 0);
  CHECK(std::strlen(ncclGetErrorString(ncclTimeout)) > 0);
}
