// The rank launcher's fork safety (tests/support/ranks.h): making a unique id starts no thread
// in the test process, its id works for forked ranks, and another thread is seen, by name.
// A tag of its own, so that nothing else has run threads in this process.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "nccl.h"
#include "support/ranks.h"

using namespace ringcc::test;

TEST_CASE("ranks: ids start no thread here, serve forked ranks, and threads are seen", "[ranks]") {
  REQUIRE(otherThreads() == "");
  const ncclUniqueId id = newUniqueId();
  CHECK(otherThreads() == "");  // its root runs in a helper process
  int failed = runProcesses(3, [&](int r) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 3, id, r) != ncclSuccess) return 1;
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 2;
  });
  CHECK(failed == 0);

  // What runProcesses checks before forking: a running thread is listed, a joined one is not.
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  const std::string seen = otherThreads();
  stop = true;
  t.join();
  CHECK(seen.find("thread ") != std::string::npos);
  CHECK(otherThreads() == "");
}
