// Communicators that fail at the same time keep their errors apart: each failing thread reads
// its own cause from ncclGetLastError, each communicator keeps its own first error, and a
// communicator that did not fail, or a thread that raised nothing, reads "".
//
// Two communicators in one forked child (so that a hang is killed at the scenario's limit):
// A with 2 ranks and B with 3, made under different NCCL_TIMEOUT values. Only rank 0 of each
// calls an all-reduce, so each fails on its own with ncclRemoteError, and the timeout in the
// message ("no progress for 300 ms") tells whose error a text is.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

constexpr int kScenarioLimitS = 30;
constexpr size_t kCount = 1024;  // floats: one slot, on the ring connected at init
constexpr size_t kText = 512;

// What was seen about one communicator's failure; written by the child, read by the parent.
struct Seen {
  int result;                  // the failing call
  int asyncError;              // ncclCommGetAsyncError afterwards
  char own[kText];             // ncclGetLastError(NULL) on the thread that made the call
  char ownNamingOther[kText];  // ncclGetLastError(the other communicator) on that thread
  char comm[kText];  // ncclGetLastError(this communicator) on a thread that raised nothing
};

struct Report {
  Seen a, b;
  char fresh[kText];   // ncclGetLastError(NULL) on that thread
  int untouchedAsync;  // A's rank 1, which never called anything
  char untouched[kText];
  int destroyed;  // communicators destroyed without error
};

void keep(char* dst, const char* text) { snprintf(dst, kText, "%s", text ? text : "(null)"); }

bool has(const char* text, const char* needle) { return std::strstr(text, needle) != nullptr; }

// The two communicators, A made with NCCL_TIMEOUT=timeoutA ms and B with timeoutB.
struct Comms {
  ncclComm_t a[2] = {};
  ncclComm_t b[3] = {};
  bool make(const char* timeoutA, const char* timeoutB) {
    {
      ScopedEnv t("NCCL_TIMEOUT", timeoutA);
      if (ncclCommInitAll(a, 2, nullptr) != ncclSuccess) return false;
    }
    ScopedEnv t("NCCL_TIMEOUT", timeoutB);
    return ncclCommInitAll(b, 3, nullptr) == ncclSuccess;
  }
  int destroy() {
    int ok = 0;
    for (ncclComm_t c : a) ok += ncclCommDestroy(c) == ncclSuccess;
    for (ncclComm_t c : b) ok += ncclCommDestroy(c) == ncclSuccess;
    return ok;
  }
};

ncclResult_t lonelyAllReduce(ncclComm_t comm) {
  std::vector<float> buf(kCount, 1.0f);
  return ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat, ncclSum, comm, nullptr);
}

// On a thread that raised nothing: the communicators' own errors and the untouched rank.
void lookFromCleanThread(const Comms& c, Report& rep) {
  std::thread([&] {
    ncclCommGetAsyncError(c.a[0], reinterpret_cast<ncclResult_t*>(&rep.a.asyncError));
    ncclCommGetAsyncError(c.b[0], reinterpret_cast<ncclResult_t*>(&rep.b.asyncError));
    ncclCommGetAsyncError(c.a[1], reinterpret_cast<ncclResult_t*>(&rep.untouchedAsync));
    keep(rep.a.comm, ncclGetLastError(c.a[0]));
    keep(rep.b.comm, ncclGetLastError(c.b[0]));
    keep(rep.untouched, ncclGetLastError(c.a[1]));
    keep(rep.fresh, ncclGetLastError(nullptr));
  }).join();
}

void checkClean(const Report& rep) {
  CHECK(rep.a.asyncError == ncclRemoteError);
  CHECK(rep.b.asyncError == ncclRemoteError);
  CHECK(std::string(rep.fresh).empty());
  CHECK(rep.untouchedAsync == ncclSuccess);
  CHECK(std::string(rep.untouched).empty());
  CHECK(rep.destroyed == 5);
}

}  // namespace

TEST_CASE("threads failing at once on two communicators each read their own error",
          "[fault_errors]") {
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "1");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "1");
  SharedArray<Report> reps(1);
  REQUIRE(reps.ok());
  int failed = runProcesses(
      1,
      [&](int) {
        Report& rep = reps[0];
        Comms c;
        if (!c.make("300", "700")) return 10;
        // Both calls run side by side; A fails first. Each thread reads its error only once
        // both have failed, so a text shared by the process would show B's to A's thread.
        std::atomic<int> done{0};
        auto call = [&](ncclComm_t comm, ncclComm_t other, Seen& seen) {
          seen.result = lonelyAllReduce(comm);
          ++done;
          while (done.load() < 2) sleepMs(1);
          keep(seen.own, ncclGetLastError(nullptr));
          keep(seen.ownNamingOther, ncclGetLastError(other));
        };
        std::thread x(call, c.a[0], c.b[0], std::ref(rep.a));
        std::thread y(call, c.b[0], c.a[0], std::ref(rep.b));
        x.join();
        y.join();
        lookFromCleanThread(c, rep);
        rep.destroyed = c.destroy();
        return 0;
      },
      kScenarioLimitS);
  CHECK(failed == 0);
  const Report& rep = reps[0];
  INFO("A's thread: " << rep.a.own << "\nB's thread: " << rep.b.own << "\nA: " << rep.a.comm
                      << "\nB: " << rep.b.comm);
  CHECK(rep.a.result == ncclRemoteError);
  CHECK(rep.b.result == ncclRemoteError);
  CHECK(has(rep.a.own, "no progress for 300 ms"));
  CHECK(has(rep.b.own, "no progress for 700 ms"));
  // The text is complete without the log: it names a lane, what it waits for and the peer.
  CHECK(has(rep.a.own, "waiting to receive from peer"));
  CHECK(has(rep.b.own, "channel 0 lane 0"));
  // The thread's own error comes before the communicator it names.
  CHECK(std::string(rep.a.ownNamingOther) == rep.a.own);
  CHECK(std::string(rep.b.ownNamingOther) == rep.b.own);
  // A's first error is still its own after B failed.
  CHECK(has(rep.a.comm, "no progress for 300 ms"));
  CHECK(has(rep.b.comm, "no progress for 700 ms"));
  checkClean(rep);
}

TEST_CASE(
    "a group failing on two communicators (A on its engine thread, B on the caller's) "
    "keeps their errors apart",
    "[fault_errors]") {
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "1");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "1");
  SharedArray<Report> reps(1);
  REQUIRE(reps.ok());
  int failed = runProcesses(
      1,
      [&](int) {
        Report& rep = reps[0];
        Comms c;
        // A, waited for first, fails last: a cause read from "the latest error" would be A's
        // for both.
        if (!c.make("700", "300")) return 10;
        std::thread([&] {
          ncclGroupStart();
          std::vector<float> bufA(kCount, 1.0f), bufB(kCount, 1.0f);
          ncclAllReduce(bufA.data(), bufA.data(), kCount, ncclFloat, ncclSum, c.a[0], nullptr);
          ncclAllReduce(bufB.data(), bufB.data(), kCount, ncclFloat, ncclSum, c.b[0], nullptr);
          rep.a.result = ncclGroupEnd();
          keep(rep.a.own, ncclGetLastError(nullptr));
        }).join();
        lookFromCleanThread(c, rep);
        rep.destroyed = c.destroy();
        return 0;
      },
      kScenarioLimitS);
  CHECK(failed == 0);
  const Report& rep = reps[0];
  INFO("calling thread: " << rep.a.own << "\nA: " << rep.a.comm << "\nB: " << rep.b.comm);
  CHECK(rep.a.result == ncclRemoteError);
  // Each communicator's first error is its own: the engine thread's cause where the engine
  // thread works in a CommScope, else a text that names the communicator by its size.
  CHECK((has(rep.a.comm, "no progress for 700 ms") || has(rep.a.comm, "rank 0 of 2 ")));
  CHECK((has(rep.b.comm, "no progress for 300 ms") || has(rep.b.comm, "rank 0 of 3 ")));
  CHECK_FALSE(has(rep.a.comm, "300 ms"));
  CHECK_FALSE(has(rep.b.comm, "700 ms"));
  // The calling thread's last error is the cause of what ncclGroupEnd returned: A's.
  CHECK(std::string(rep.a.own) == rep.a.comm);
  checkClean(rep);
}
