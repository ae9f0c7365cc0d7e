#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"
#include "support/test_env.h"

using namespace ringcc;
using ringcc::test::CapturedLog;
using ringcc::test::ScopedEnv;

TEST_CASE("NCCL_DEBUG_SUBSYS parses lists, ALL and ^ exclusion", "[log]") {
  CHECK(parseSubsysMask("INIT") == kLogInit);
  CHECK(parseSubsysMask("INIT,coll") == (kLogInit | kLogColl));
  CHECK(parseSubsysMask("ALL") == kLogAll);
  CHECK(parseSubsysMask("^INIT") == ~uint64_t{kLogInit});
  CHECK(parseSubsysMask("") == 0);
}

TEST_CASE("NCCL_DEBUG_FILE expands %h and %p", "[log]") {
  char host[64] = "";
  gethostname(host, sizeof(host) - 1);
  CHECK(expandLogFileName("/tmp/x.%h.%p") ==
        std::string("/tmp/x.") + host + "." + std::to_string(getpid()));
  CHECK(expandLogFileName("plain") == "plain");
}

TEST_CASE("levels filter messages and the prefix names host, pid and rank", "[log]") {
  CapturedLog log;
  {
    LogRankScope scope(5);
    LOG_WARN("first %d", 1);
    LOG_INFO(kLogInit, "info is below WARN");
  }
  std::string text = log.text();
  CHECK(text.find("first 1") != std::string::npos);
  CHECK(text.find("info is below WARN") == std::string::npos);
  CHECK(text.find(":" + std::to_string(getpid()) + ":") != std::string::npos);
  CHECK(text.find("[5] ringcc WARN") != std::string::npos);
}

TEST_CASE("INFO follows NCCL_DEBUG_SUBSYS", "[log]") {
  CapturedLog log;
  ScopedEnv level("NCCL_DEBUG", "INFO");
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "^INIT");
  resetLogging();
  LOG_INFO(kLogInit, "init message");
  LOG_INFO(kLogColl, "coll message");
  CHECK_FALSE(log.contains("init message"));
  CHECK(log.contains("coll message"));
}

TEST_CASE("fail() logs the root cause and keeps it as the last error", "[errors]") {
  CapturedLog log;
  ncclResult_t r = failPeer(ncclRemoteError, 3, "bootstrap", "connection closed");
  CHECK(r == ncclRemoteError);
  CHECK(lastErrorMessage() == "bootstrap: connection closed (peer rank 3)");
  CHECK(log.contains("bootstrap: connection closed (peer rank 3)"));
}

TEST_CASE("every result code has its own string", "[errors]") {
  std::set<std::string> seen;
  for (int c = 0; c < ncclNumResults; ++c)
    CHECK(seen.insert(errorString(static_cast<ncclResult_t>(c))).second);
  CHECK(std::string(errorString(static_cast<ncclResult_t>(99))) == "unknown result code");
}

namespace {

// Keeps what it hears.
class Collect final : public ErrorScope {
 public:
  void onError(const ErrorCause& cause) override { heard.push_back(cause); }
  std::vector<ErrorCause> heard;
};

}  // namespace

TEST_CASE("the last error is the calling thread's own", "[errors]") {
  CapturedLog log;
  fail(ncclSystemError, "here", "main thread's error");
  std::string other = "unset", otherAfter;
  std::thread([&] {
    other = lastErrorMessage();
    fail(ncclInternalError, "there", "second thread's error");
    otherAfter = lastErrorMessage();
  }).join();
  CHECK(other.empty());
  CHECK(otherAfter == "there: second thread's error");
  CHECK(lastErrorMessage() == "here: main thread's error");
  adoptError(ErrorCause{ncclRemoteError, "engine", "adopted", 2, "engine: adopted (peer rank 2)"});
  CHECK(lastErrorMessage() == "engine: adopted (peer rank 2)");
}

TEST_CASE("the innermost ErrorScope of the raising thread hears about an error", "[errors]") {
  CapturedLog log;
  Collect outer;
  failPeer(ncclRemoteError, 4, "outer", "first");
  {
    Collect inner;
    fail(ncclInvalidUsage, "inner", "second");
    // Another thread's errors are its own business.
    std::thread([] { fail(ncclInternalError, "elsewhere", "third"); }).join();
    REQUIRE(inner.heard.size() == 1);
    CHECK(inner.heard[0].code == ncclInvalidUsage);
    CHECK(inner.heard[0].where == "inner");
    CHECK(inner.heard[0].what == "second");
    CHECK(inner.heard[0].peer == -1);
    CHECK(inner.heard[0].message == "inner: second");
  }
  fail(ncclSystemError, "outer", "fourth");
  REQUIRE(outer.heard.size() == 2);
  CHECK(outer.heard[0].peer == 4);
  CHECK(outer.heard[0].message == "outer: first (peer rank 4)");
  CHECK(outer.heard[1].what == "fourth");
}

TEST_CASE("NCCL_DEBUG=VERSION prints the version line at the first init", "[log]") {
  ringcc::test::CapturedLog log;
  ringcc::test::ScopedEnv debug("NCCL_DEBUG", "VERSION");
  ringcc::resetLogging();
  ncclComm_t comm = nullptr;
  int dev = 0;
  REQUIRE(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
  INFO(log.text());
  CHECK(log.contains("NCCL version 2.32.3 (ringcc)"));
  CHECK_FALSE(log.contains("Init COMPLETE"));  // INFO lines stay quiet at VERSION
}
