// Bad arguments to every entry point: ncclInvalidArgument with a WARN that names the
// argument, never a crash, and the communicator stays usable.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "support/test_env.h"

using ringcc::test::CapturedLog;
using ringcc::test::ScopedEnv;

namespace {

ncclUniqueId someId() {
  ncclUniqueId id{};
  ncclGetUniqueId(&id);
  return id;
}

}  // namespace

TEST_CASE("NULL communicators are refused everywhere", "[api_args]") {
  int i;
  ncclResult_t r;
  ncclComm_t out;
  float buf[4];
  EXPECT_REFUSED(ncclCommCount(nullptr, &i), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommUserRank(nullptr, &i), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommCuDevice(nullptr, &i), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommGetAsyncError(nullptr, &r), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommFinalize(nullptr), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommRevoke(nullptr, 0), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommSplit(nullptr, 0, 0, &out, nullptr), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommShrink(nullptr, nullptr, 0, &out, nullptr, 0), ncclInvalidArgument,
                 "comm is NULL");
  EXPECT_REFUSED(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, nullptr, nullptr),
                 ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclBroadcast(buf, buf, 4, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument,
                 "comm is NULL");
  EXPECT_REFUSED(ncclSend(buf, 4, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument,
                 "comm is NULL");
  EXPECT_REFUSED(ncclCommRegister(nullptr, buf, 16, nullptr), ncclInvalidArgument, "comm is NULL");
  ncclRedOp_t op;
  float scalar = 2;
  EXPECT_REFUSED(
      ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, nullptr),
      ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclRedOpDestroy(ncclNumOps, nullptr), ncclInvalidArgument, "comm is NULL");
}

TEST_CASE("NULL out-pointers are refused", "[api_args]") {
  EXPECT_REFUSED(ncclGetVersion(nullptr), ncclInvalidArgument, "version is NULL");
  EXPECT_REFUSED(ncclGetUniqueId(nullptr), ncclInvalidArgument, "uniqueId is NULL");
  EXPECT_REFUSED(ncclCommInitRank(nullptr, 1, someId(), 0), ncclInvalidArgument,
                 "comm (output pointer) is NULL");
  EXPECT_REFUSED(ncclCommInitAll(nullptr, 1, nullptr), ncclInvalidArgument, "comms is NULL");
  EXPECT_REFUSED(ncclMemAlloc(nullptr, 16), ncclInvalidArgument, "ptr is NULL");

  ncclComm_t comm;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  EXPECT_REFUSED(ncclCommCount(comm, nullptr), ncclInvalidArgument, "count is NULL");
  EXPECT_REFUSED(ncclCommUserRank(comm, nullptr), ncclInvalidArgument, "rank is NULL");
  EXPECT_REFUSED(ncclCommCuDevice(comm, nullptr), ncclInvalidArgument, "device is NULL");
  EXPECT_REFUSED(ncclCommGetAsyncError(comm, nullptr), ncclInvalidArgument, "asyncError is NULL");
  EXPECT_REFUSED(ncclCommSplit(comm, 0, 0, nullptr, nullptr), ncclInvalidArgument,
                 "newcomm (output pointer) is NULL");
  EXPECT_REFUSED(ncclCommShrink(comm, nullptr, 0, nullptr, nullptr, 0), ncclInvalidArgument,
                 "newcomm (output pointer) is NULL");
  float scalar = 1;
  EXPECT_REFUSED(
      ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat, ncclScalarHostImmediate, comm),
      ncclInvalidArgument, "op (output pointer) is NULL");
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("ranks, counts and configs out of range are refused", "[api_args]") {
  ncclComm_t comm = nullptr;
  ncclUniqueId id = someId();
  EXPECT_REFUSED(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks 0");
  EXPECT_REFUSED(ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, "nranks -3");
  EXPECT_REFUSED(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank 2 is out of range");
  EXPECT_REFUSED(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument,
                 "rank -1 is out of range");
  EXPECT_REFUSED(ncclCommInitAll(&comm, 0, nullptr), ncclInvalidArgument, "ndev 0");
  EXPECT_REFUSED(ncclCommInitRankScalable(&comm, 2, 0, 0, &id, nullptr), ncclInvalidArgument,
                 "nId 0");
  CHECK(comm == nullptr);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;  // not made with NCCL_CONFIG_INITIALIZER
  EXPECT_REFUSED(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
                 "NCCL_CONFIG_INITIALIZER");
  ncclConfig_t garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_REFUSED(ncclCommInitRankConfig(&comm, 1, id, 0, &garbage), ncclInvalidArgument, "magic");
  config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  EXPECT_REFUSED(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
                 "blocking must be 0 or 1");

  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  ncclComm_t out;
  EXPECT_REFUSED(ncclCommSplit(comm, -5, 0, &out, nullptr), ncclInvalidArgument, "color -5");
  int self = 0;
  EXPECT_REFUSED(ncclCommShrink(comm, &self, 1, &out, nullptr, 0), ncclInvalidArgument,
                 "excludeRanksCount 1");
  EXPECT_REFUSED(ncclCommShrink(comm, nullptr, 0, &out, nullptr, 0x40), ncclInvalidArgument,
                 "shrinkFlags");
  EXPECT_REFUSED(ncclCommRevoke(comm, 3), ncclInvalidArgument, "revokeFlags");
  // The communicator is still fine after all of that.
  int count = 0;
  CHECK(ncclCommCount(comm, &count) == ncclSuccess);
  CHECK(count == 1);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("collective arguments are checked and refusals leave the comm usable", "[api_args]") {
  ncclComm_t comm;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  float buf[8] = {};
  EXPECT_REFUSED(
      ncclAllReduce(buf, buf, 8, static_cast<ncclDataType_t>(12), ncclSum, comm, nullptr),
      ncclInvalidArgument, "datatype 12");
  EXPECT_REFUSED(ncclAllReduce(buf, buf, 8, ncclFloat, static_cast<ncclRedOp_t>(9), comm, nullptr),
                 ncclInvalidArgument, "op 9");
  EXPECT_REFUSED(ncclAllReduce(buf, buf, 8, ncclFloat, static_cast<ncclRedOp_t>(-1), comm, nullptr),
                 ncclInvalidArgument, "op -1");
  EXPECT_REFUSED(ncclBroadcast(buf, buf, 8, ncclFloat, 1, comm, nullptr), ncclInvalidArgument,
                 "root 1 is out of range");
  EXPECT_REFUSED(ncclReduce(buf, buf, 8, ncclFloat, ncclSum, -1, comm, nullptr),
                 ncclInvalidArgument, "root -1 is out of range");
  EXPECT_REFUSED(ncclSend(buf, 8, ncclFloat, 3, comm, nullptr), ncclInvalidArgument,
                 "peer 3 is out of range");
  EXPECT_REFUSED(ncclRecv(buf, 8, ncclFloat, -2, comm, nullptr), ncclInvalidArgument,
                 "peer -2 is out of range");
  EXPECT_REFUSED(ncclAllReduce(nullptr, buf, 8, ncclFloat, ncclSum, comm, nullptr),
                 ncclInvalidArgument, "sendbuff is NULL");
  EXPECT_REFUSED(ncclAllGather(buf, nullptr, 8, ncclFloat, comm, nullptr), ncclInvalidArgument,
                 "recvbuff is NULL");
  EXPECT_REFUSED(ncclAllReduce(buf, buf, SIZE_MAX / 2, ncclFloat, ncclSum, comm, nullptr),
                 ncclInvalidArgument, "overflows");
  ncclRedOp_t premul;
  double scalar = 2;
  REQUIRE(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat64, ncclScalarHostImmediate, comm) ==
          ncclSuccess);
  EXPECT_REFUSED(ncclAllReduce(buf, buf, 8, ncclFloat, premul, comm, nullptr), ncclInvalidArgument,
                 "created for datatype");
  CHECK(ncclRedOpDestroy(premul, comm) == ncclSuccess);
  EXPECT_REFUSED(ncclRedOpDestroy(premul, comm), ncclInvalidArgument, "not a live operator");
  EXPECT_REFUSED(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in");
  // Count 0 with NULL buffers is fine and does nothing.
  CHECK(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess);
  ncclResult_t async;
  CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess);
  CHECK(async == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("group misuse and device API calls answer clearly", "[api_args]") {
  EXPECT_REFUSED(ncclGroupEnd(), ncclInvalidUsage, "no group is open");
  ncclWindow_t win;
  char buf[64];
  ncclComm_t comm;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  // Windows work on host communicators (tests/coll/test_rma.cc); bad flags are refused.
  EXPECT_REFUSED(ncclCommWindowRegister(comm, buf, 64, &win, 0x40), ncclInvalidArgument,
                 "winFlags 0x40 has unknown bits");
  REQUIRE(ncclCommWindowRegister(comm, buf, 64, &win, 0) == ncclSuccess);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  void* handle = nullptr;
  CHECK(ncclCommRegister(comm, buf, sizeof(buf), &handle) == ncclSuccess);
  CHECK(ncclCommDeregister(comm, handle) == ncclSuccess);
  void* mem = nullptr;
  CHECK(ncclMemAlloc(&mem, 1000) == ncclSuccess);
  CHECK(mem != nullptr);
  CHECK(ncclMemFree(mem) == ncclSuccess);
  EXPECT_REFUSED(ncclMemFree(buf), ncclInvalidArgument, "not allocated by ncclMemAlloc");
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("ncclGetLastError repeats the root cause", "[api_args]") {
  CHECK(ncclCommCount(nullptr, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("comm is NULL") != std::string::npos);
}

TEST_CASE("ncclGetLastError answers each thread with its own last error", "[api_args]") {
  // Two threads, each refused on its own communicator, strictly one after the other: with
  // one text for the whole process the first would read the second's message.
  ncclComm_t comms[2];
  REQUIRE(ncclCommInitAll(&comms[0], 1, nullptr) == ncclSuccess);
  REQUIRE(ncclCommInitAll(&comms[1], 1, nullptr) == ncclSuccess);
  std::atomic<int> turn{0};
  auto waitTurn = [&](int t) {
    while (turn.load() < t) std::this_thread::yield();
  };
  float buf[8] = {};
  ncclResult_t results[2];
  std::string seen[2], seenWithComm[2];
  std::thread first([&] {
    results[0] =
        ncclAllReduce(buf, buf, 8, static_cast<ncclDataType_t>(12), ncclSum, comms[0], nullptr);
    turn = 1;
    waitTurn(2);
    seen[0] = ncclGetLastError(nullptr);
    seenWithComm[0] = ncclGetLastError(comms[1]);  // the thread's own error comes first
  });
  std::thread second([&] {
    waitTurn(1);
    results[1] = ncclBroadcast(buf, buf, 8, ncclFloat, 5, comms[1], nullptr);
    turn = 2;
    seen[1] = ncclGetLastError(nullptr);
    seenWithComm[1] = ncclGetLastError(comms[0]);
  });
  first.join();
  second.join();
  CHECK(results[0] == ncclInvalidArgument);
  CHECK(results[1] == ncclInvalidArgument);
  INFO("first thread saw: " << seen[0] << "\nsecond thread saw: " << seen[1]);
  CHECK(seen[0].find("datatype 12") != std::string::npos);
  CHECK(seen[1].find("root 5 is out of range") != std::string::npos);
  CHECK(seenWithComm[0] == seen[0]);
  CHECK(seenWithComm[1] == seen[1]);

  // A thread that raised nothing reads "", as NCCL does without an error; refused arguments
  // are no error of the communicator, so naming one changes nothing.
  std::string fresh = "unset", freshWithComm = "unset";
  std::thread([&] {
    fresh = ncclGetLastError(nullptr);
    freshWithComm = ncclGetLastError(comms[0]);
  }).join();
  CHECK(fresh.empty());
  CHECK(freshWithComm.empty());
  // A stale handle is no error either: ncclGetLastError never raises one.
  CHECK(ncclCommDestroy(comms[1]) == ncclSuccess);
  std::thread([&] { fresh = ncclGetLastError(comms[1]); }).join();
  CHECK(fresh.empty());
  CHECK(ncclCommDestroy(comms[0]) == ncclSuccess);
}

TEST_CASE("an init that fails on helper threads tells the calling thread why", "[api_args]") {
  // ncclCommInitAll, and inits grouped by one thread, run each rank on a helper thread; the
  // cause is raised there. Fresh threads, so that no earlier error can pass for it.
  ScopedEnv device("RINGCC_DEVICE", "bogus");
  ncclResult_t all = ncclSuccess, grouped = ncclSuccess;
  std::string afterAll, afterGroup;
  std::thread([&] {
    ncclComm_t comms[2];
    all = ncclCommInitAll(comms, 2, nullptr);
    afterAll = ncclGetLastError(nullptr);
  }).join();
  std::thread([&] {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclComm_t comms[2];
    ncclGroupStart();
    ncclCommInitRank(&comms[0], 2, id, 0);
    ncclCommInitRank(&comms[1], 2, id, 1);
    grouped = ncclGroupEnd();
    afterGroup = ncclGetLastError(nullptr);
  }).join();
  CHECK(all == ncclInvalidArgument);
  CHECK(afterAll.find("RINGCC_DEVICE=bogus") != std::string::npos);
  CHECK(grouped == ncclInvalidArgument);
  CHECK(afterGroup.find("RINGCC_DEVICE=bogus") != std::string::npos);
}
