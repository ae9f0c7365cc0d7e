#include "bench/perf/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace ringcc::bench::perf {

using Clock = std::chrono::steady_clock;

void Watchdog::loop() {
  constexpr auto kFailGrace = std::chrono::seconds(2);
  constexpr auto kAbortGrace = std::chrono::seconds(10);
  uint64_t last = run_.progress.load();
  auto lastChange = Clock::now();
  Clock::time_point failedAt{}, abortedAt{};
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (done_) break;
    auto now = Clock::now();
    uint64_t p = run_.progress.load();
    if (p != last) {
      last = p;
      lastChange = now;
    }
    int limit = run_.opt.timeoutSec;
    if (limit > 0 && !run_.timedOut && now - lastChange >= std::chrono::seconds(limit)) {
      run_.timedOut = true;
      std::fprintf(run_.io.out, "%s: Test timeout (%ds)\n", hostName().c_str(), limit);
      std::fflush(run_.io.out);
      fail(run_, kPerfTimeout);
      abortComms(run_);
    }
    if (run_.failed && !run_.commsAborted) {
      if (failedAt == Clock::time_point{}) failedAt = now;
      if (now - failedAt >= kFailGrace) abortComms(run_);
    }
    if (run_.commsAborted) {
      if (abortedAt == Clock::time_point{}) abortedAt = now;
      if (now - abortedAt >= kAbortGrace) {
        std::fprintf(run_.io.err, "%s: threads did not return after abort; exiting\n",
                     run_.program.c_str());
        std::fflush(nullptr);
        std::_Exit(run_.timedOut ? kPerfTimeout : kPerfNcclError);
      }
    }
  }
}

}  // namespace ringcc::bench::perf
