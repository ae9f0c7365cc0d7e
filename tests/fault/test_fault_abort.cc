// A rank blocked in a collective whose peer never joins: ncclCommAbort and ncclCommRevoke from
// another thread end the call, and NCCL_TIMEOUT ends it on its own, saying where it waited.
//
// The ranks are threads of one forked child (so a hang is killed at the scenario's limit, never
// left to hang the suite), connected by p2p, or by shm with NCCL_P2P_DISABLE=1. Rank 0 calls
// ncclAllReduce alone: a small one runs on the ring made at init, a large one first has to make
// the connections of its extra channels, which waits on the peer in a different place.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

constexpr int kScenarioLimitS = 20;
// How long rank 0 is left blocked before the abort or revoke.
constexpr int kBlockedMs = 300;
// Abort, revoke and the calls they end must return this soon.
constexpr double kPromptMs = 1000;

struct Shape {
  const char* name;
  size_t count;             // floats
  const char* minChannels;  // NCCL_MIN_NCHANNELS
};
// 4 Ki floats on one channel; 4 Mi floats on three channels, two of them connected on first
// use (only channel 0's ring is connected at init).
constexpr Shape kShapes[] = {{"small", 4096, "1"}, {"large", size_t{4} << 20, "3"}};

struct Transport {
  const char* name;
  const char* p2pDisable;
};
constexpr Transport kTransports[] = {{"p2p", "0"}, {"shm", "1"}};

// Rank 0's lonely all-reduce on its own thread, timed into rep.
class LonelyCall {
 public:
  LonelyCall(ncclComm_t comm, size_t count, RankReport& rep)
      : send_(count, 1.0f), recv_(count), rep_(rep) {
    thread_ = std::thread([this, comm, count] {
      rep_.failStartNs = nowNs();
      rep_.failResult =
          ncclAllReduce(send_.data(), recv_.data(), count, ncclFloat, ncclSum, comm, nullptr);
      rep_.failEndNs = nowNs();
    });
  }
  void join() { thread_.join(); }

 private:
  std::vector<float> send_, recv_;
  RankReport& rep_;
  std::thread thread_;
};

std::string label(const Shape& s, const Transport& t) {
  return std::string(s.name) + " all-reduce over " + t.name;
}

void checkEndedByEvent(const RankReport& rep, const std::string& what) {
  INFO(what);
  CHECK(rep.initResult == ncclSuccess);
  CHECK(rep.failResult == ncclInvalidUsage);  // stopped on purpose, by this rank
  REQUIRE(rep.eventNs > 0);
  REQUIRE(rep.failEndNs > 0);
  CHECK(msBetween(rep.failStartNs, rep.eventNs) >= kBlockedMs - 50);  // it really was blocked
  CHECK(msBetween(rep.eventNs, rep.failEndNs) < kPromptMs);
  CHECK(rep.endResult == ncclSuccess);
  CHECK(msBetween(rep.eventNs, rep.endEndNs) < kPromptMs);
}

}  // namespace

TEST_CASE("ncclCommAbort from another thread ends a collective whose peer never calls",
          "[fault_abort]") {
  for (const Transport& t : kTransports) {
    for (const Shape& s : kShapes) {
      ScopedEnv p2p("NCCL_P2P_DISABLE", t.p2pDisable);
      ScopedEnv channels("NCCL_MIN_NCHANNELS", s.minChannels);
      SharedArray<RankReport> reps(1);
      REQUIRE(reps.ok());
      int failed = runProcesses(
          1,
          [&](int) {
            RankReport& rep = reps[0];
            rep.pid = getpid();
            ncclComm_t comms[2] = {};
            rep.initResult = ncclCommInitAll(comms, 2, nullptr);
            if (rep.initResult != ncclSuccess) return 10;
            LonelyCall call(comms[0], s.count, rep);
            sleepMs(kBlockedMs);
            rep.eventNs = nowNs();
            rep.endResult = ncclCommAbort(comms[0]);
            rep.endEndNs = nowNs();
            call.join();
            rep.extraResult = ncclCommDestroy(comms[1]);
            return 0;
          },
          kScenarioLimitS);
      std::string what = label(s, t);
      INFO(what);
      CHECK(failed == 0);
      checkEndedByEvent(reps[0], what);
      CHECK(reps[0].extraResult == ncclSuccess);
      std::printf("fault_abort %s: call ended %.1f ms after the abort, abort took %.1f ms\n",
                  what.c_str(), msBetween(reps[0].eventNs, reps[0].failEndNs),
                  msBetween(reps[0].eventNs, reps[0].endEndNs));
      CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], 1))) == "nothing");
    }
  }
}

TEST_CASE("ncclCommRevoke ends a blocked collective, refuses later ones, and destroy works",
          "[fault_revoke]") {
  for (const Transport& t : kTransports) {
    for (const Shape& s : kShapes) {
      ScopedEnv p2p("NCCL_P2P_DISABLE", t.p2pDisable);
      ScopedEnv channels("NCCL_MIN_NCHANNELS", s.minChannels);
      SharedArray<RankReport> reps(2);
      REQUIRE(reps.ok());
      int failed = runProcesses(
          1,
          [&](int) {
            RankReport& rep = reps[0];
            RankReport& peer = reps[1];
            rep.pid = getpid();
            ncclComm_t comms[2] = {};
            rep.initResult = ncclCommInitAll(comms, 2, nullptr);
            if (rep.initResult != ncclSuccess) return 10;
            LonelyCall call(comms[0], s.count, rep);
            sleepMs(kBlockedMs);
            rep.eventNs = nowNs();
            rep.extraResult = ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT);
            call.join();
            std::vector<float> buf(s.count, 1.0f);
            rep.laterResult = ncclAllReduce(buf.data(), buf.data(), s.count, ncclFloat, ncclSum,
                                            comms[0], nullptr);
            // The peer that joins late finds the revoked rank gone instead of waiting for it.
            peer.failStartNs = nowNs();
            peer.failResult = ncclAllReduce(buf.data(), buf.data(), s.count, ncclFloat, ncclSum,
                                            comms[1], nullptr);
            peer.failEndNs = nowNs();
            rep.endResult = ncclCommDestroy(comms[0]);
            rep.endEndNs = nowNs();
            peer.endResult = ncclCommDestroy(comms[1]);
            return 0;
          },
          kScenarioLimitS);
      std::string what = label(s, t);
      INFO(what);
      CHECK(failed == 0);
      checkEndedByEvent(reps[0], what);
      CHECK(reps[0].extraResult == ncclSuccess);
      CHECK(reps[0].laterResult == ncclInvalidUsage);
      CHECK(reps[1].failResult == ncclRemoteError);
      CHECK(msBetween(reps[1].failStartNs, reps[1].failEndNs) < kPromptMs);
      CHECK(reps[1].endResult == ncclSuccess);
      std::printf(
          "fault_revoke %s: call ended %.1f ms after the revoke; the late peer failed in "
          "%.1f ms\n",
          what.c_str(), msBetween(reps[0].eventNs, reps[0].failEndNs),
          msBetween(reps[1].failStartNs, reps[1].failEndNs));
      CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], 1))) == "nothing");
    }
  }
}

TEST_CASE("NCCL_TIMEOUT ends a collective whose peer never joins, naming channel and peer",
          "[fault_timeout]") {
  ScopedEnv timeout("NCCL_TIMEOUT", "500");
  for (const Transport& t : kTransports) {
    for (const Shape& s : kShapes) {
      ScopedEnv p2p("NCCL_P2P_DISABLE", t.p2pDisable);
      ScopedEnv channels("NCCL_MIN_NCHANNELS", s.minChannels);
      CapturedLog log;
      SharedArray<RankReport> reps(1);
      REQUIRE(reps.ok());
      int failed = runProcesses(
          1,
          [&](int) {
            RankReport& rep = reps[0];
            rep.pid = getpid();
            ncclComm_t comms[2] = {};
            rep.initResult = ncclCommInitAll(comms, 2, nullptr);
            if (rep.initResult != ncclSuccess) return 10;
            LonelyCall call(comms[0], s.count, rep);
            call.join();
            ncclCommGetAsyncError(comms[0], reinterpret_cast<ncclResult_t*>(&rep.asyncError));
            rep.endResult = ncclCommDestroy(comms[0]);
            rep.extraResult = ncclCommDestroy(comms[1]);
            return 0;
          },
          kScenarioLimitS);
      std::string what = label(s, t);
      INFO(what);
      CHECK(failed == 0);
      const RankReport& rep = reps[0];
      CHECK(rep.initResult == ncclSuccess);
      CHECK(rep.failResult == ncclRemoteError);
      CHECK(rep.asyncError == ncclRemoteError);
      double ms = msBetween(rep.failStartNs, rep.failEndNs);
      CHECK(ms >= 450);
      CHECK(ms < 2500);
      CHECK(rep.endResult == ncclSuccess);
      CHECK(rep.extraResult == ncclSuccess);
      std::string text = log.text();
      INFO("log:\n" << text);
      CHECK(text.find("NCCL_TIMEOUT") != std::string::npos);
      CHECK(text.find("peer 1") != std::string::npos);
      CHECK(text.find(s.count > 4096 ? "channel 1" : "channel 0") != std::string::npos);
      std::printf("fault_timeout %s: failed after %.0f ms\n", what.c_str(), ms);
      CHECK(describeSegments(shmSegmentsOf(scenarioPids(&rep, 1))) == "nothing");
    }
  }
}

TEST_CASE("a peer that finished its part with us and left is not a fault", "[fault_exit]") {
  // Rank 0 sends to rank 1 and receives from rank 2 in one group. Rank 1 takes its message and
  // destroys its communicator at once; rank 2 sends only later. Rank 0 waits on rank 2 alone,
  // so rank 1 leaving must not fail it.
  for (const Transport& t : kTransports) {
    ScopedEnv p2p("NCCL_P2P_DISABLE", t.p2pDisable);
    SharedArray<RankReport> reps(3);
    REQUIRE(reps.ok());
    int failed = runProcesses(
        1,
        [&](int) {
          reps[0].pid = getpid();
          ncclComm_t comms[3] = {};
          if (ncclCommInitAll(comms, 3, nullptr) != ncclSuccess) return 10;
          const size_t count = 1 << 16;
          runThreads(3, [&](int r) {
            RankReport& rep = reps[r];
            std::vector<int> out(count, 100 + r), in(count, -1);
            if (r == 0) {
              ncclGroupStart();
              ncclSend(out.data(), count, ncclInt32, 1, comms[0], nullptr);
              ncclRecv(in.data(), count, ncclInt32, 2, comms[0], nullptr);
              rep.failResult = ncclGroupEnd();
              rep.iterations = in == std::vector<int>(count, 102) ? 1 : 0;
            } else if (r == 1) {
              rep.failResult = ncclRecv(in.data(), count, ncclInt32, 0, comms[1], nullptr);
              rep.iterations = in == std::vector<int>(count, 100) ? 1 : 0;
              rep.eventNs = nowNs();
              rep.endResult = ncclCommDestroy(comms[1]);
            } else {
              sleepMs(kBlockedMs);
              rep.failResult = ncclSend(out.data(), count, ncclInt32, 0, comms[2], nullptr);
              rep.iterations = 1;
            }
          });
          reps[0].endResult = ncclCommDestroy(comms[0]);
          reps[2].endResult = ncclCommDestroy(comms[2]);
          return 0;
        },
        kScenarioLimitS);
    INFO(t.name);
    CHECK(failed == 0);
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r);
      CHECK(reps[r].failResult == ncclSuccess);
      CHECK(reps[r].iterations == 1);
      CHECK(reps[r].endResult == ncclSuccess);
    }
    CHECK(describeSegments(shmSegmentsOf(scenarioPids(&reps[0], 1))) == "nothing");
  }
}

TEST_CASE("split children keep working after their parents are aborted", "[fault_abort]") {
  // The children's bootstraps must not watch (or point into) the parents, which abort frees.
  ScopedEnv channels("NCCL_MIN_NCHANNELS", "3");
  SharedArray<RankReport> reps(3);
  REQUIRE(reps.ok());
  int failed = runProcesses(
      1,
      [&](int) {
        reps[0].pid = getpid();
        ncclComm_t parents[3] = {}, children[3] = {};
        if (ncclCommInitAll(parents, 3, nullptr) != ncclSuccess) return 10;
        runThreads(3, [&](int r) {
          RankReport& rep = reps[r];
          rep.extraResult = ncclCommSplit(parents[r], 0, r, &children[r], nullptr);
          if (rep.extraResult != ncclSuccess) return;
          rep.endResult = ncclCommAbort(parents[r]);
          // Three channels: the child connects two of them through its bootstrap now.
          std::vector<float> send(size_t{4} << 20), recv(send.size());
          for (int it = 0; it < 2; ++it) {
            fillInput(send, r, it);
            rep.failResult = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat,
                                           ncclSum, children[r], nullptr);
            if (rep.failResult != ncclSuccess) return;
            if (isSumOfInputs(recv, 3, it)) ++rep.iterations;
          }
          rep.laterResult = ncclCommDestroy(children[r]);
        });
        return 0;
      },
      kScenarioLimitS);
  CHECK(failed == 0);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(reps[r].extraResult == ncclSuccess);
    CHECK(reps[r].endResult == ncclSuccess);
    CHECK(reps[r].failResult == ncclSuccess);
    CHECK(reps[r].iterations == 2);
    CHECK(reps[r].laterResult == ncclSuccess);
  }
}
