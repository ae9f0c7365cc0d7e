// The perf run's watchdog thread (one per process, for the run's duration). Apart from the
// timing loop because it watches that loop from outside: it sees only run.progress, which the
// loop bumps once per operation, and the run's failure flags.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// Watches a running benchmark: ends it with "timeout" when no operation completes for -T
// seconds, and aborts the communicators when threads stay blocked after a failure (in a
// collective waiting for a rank that gave up). If threads still do not return after an abort,
// the process exits rather than hang.
class Watchdog {
 public:
  explicit Watchdog(Run& run) : run_(run), thread_([this] { loop(); }) {}
  ~Watchdog() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop();

  Run& run_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace ringcc::bench::perf
