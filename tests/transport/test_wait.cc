#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "support/test_env.h"
#include "transports/fifo_host.h"

using namespace ringcc;
using namespace ringcc::test;
using namespace std::chrono_literals;

namespace {

double threadCpuSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint32_t waitersOf(FifoCounter* c) { return std::atomic_ref<uint32_t>(c->waiters).load(); }

// Polls until someone sleeps on `c` (at most 10 s).
bool awaitSleeper(FifoCounter* c) {
  auto giveUp = WaitClock::now() + 10s;
  while (waitersOf(c) == 0 && WaitClock::now() < giveUp) std::this_thread::sleep_for(1ms);
  return waitersOf(c) != 0;
}

}  // namespace

TEST_CASE("counterReached is wrap-aware", "[wait]") {
  CHECK(counterReached(5, 5));
  CHECK(counterReached(6, 5));
  CHECK_FALSE(counterReached(4, 5));
  CHECK(counterReached(0x10, 0xFFFFFFF0u));  // wrapped past the target
  CHECK_FALSE(counterReached(0xFFFFFFF0u, 0x10));
  CHECK(counterReached(0, 0xFFFFFFFFu));
}

TEST_CASE("a counter already at its target returns at once with the value seen", "[wait]") {
  FifoCounter c{};
  c.value = 9;
  uint32_t seen = 0;
  WaitOptions o;
  o.deadline = WaitClock::now();  // already passed: must not matter
  CHECK(waitForCounter(&c, 7, o, &seen) == ncclSuccess);
  CHECK(seen == 9);
  CHECK(c.waiters == 0);
}

TEST_CASE("a waiter nobody wakes sleeps instead of spinning, then times out", "[wait]") {
  FifoCounter c{};
  CapturedLog log;
  WaitOptions o;  // default spin count, 5 ms sleeps
  o.what = "test wait";
  ncclResult_t r = ncclSuccess;
  double wall = 0, cpu = 0;
  std::thread waiter([&] {
    double cpu0 = threadCpuSeconds();
    auto t0 = WaitClock::now();
    o.deadline = t0 + 200ms;
    r = waitForCounter(&c, 1, o);
    wall = std::chrono::duration<double>(WaitClock::now() - t0).count();
    cpu = threadCpuSeconds() - cpu0;
  });
  // Sleeping is observable: the waiter announces itself in `waiters` before each futex sleep.
  CHECK(awaitSleeper(&c));
  waiter.join();
  CHECK(r == ncclRemoteError);
  CHECK(wall >= 0.2);
  CHECK(c.waiters == 0);
  CHECK(log.contains("test wait"));
  CHECK(log.contains("timed out"));
  // CPU time is a measurement, not an assertion (it depends on the machine's load).
  WARN("200 ms wait: " << wall * 1e3 << " ms wall, " << cpu * 1e3 << " ms CPU");
}

TEST_CASE("a sleeping waiter is woken by publishCounter, not by its timeout", "[wait]") {
  FifoCounter c{};
  WaitOptions o;
  o.spinCount = 0;
  o.sleepMicros = 10 * 1000 * 1000;  // only a FUTEX_WAKE can end the sleep soon
  o.deadline = WaitClock::now() + 20s;
  ncclResult_t r = ncclInternalError;
  uint32_t seen = 0;
  WaitClock::time_point woke;
  std::thread waiter([&] {
    r = waitForCounter(&c, 3, o, &seen);
    woke = WaitClock::now();
  });
  REQUIRE(awaitSleeper(&c));
  std::this_thread::sleep_for(20ms);
  publishCounter(&c, 1);  // not enough: the waiter goes back to sleep
  std::this_thread::sleep_for(20ms);
  CHECK(r == ncclInternalError);
  REQUIRE(awaitSleeper(&c));
  auto t0 = WaitClock::now();
  publishCounter(&c, 3);
  waiter.join();
  CHECK(r == ncclSuccess);
  CHECK(seen == 3);
  double latency = std::chrono::duration<double>(woke - t0).count();
  CHECK(latency < 1.0);
  CHECK(c.waiters == 0);
  WARN("futex wake latency: " << latency * 1e6 << " us");
}

TEST_CASE("wakeCounter makes no FUTEX_WAKE while the waiters word is 0", "[wait]") {
  // A thread sleeps on the counter's futex without announcing itself in `waiters`. While
  // `waiters` is 0, wakeCounter calls (every 5 ms) must not wake it: it sleeps its full
  // timeout. Once `waiters` is 1, the next wakeCounter wakes it at once. So the futex system
  // call happens exactly when someone is registered as sleeping.
  FifoCounter c{};
  c.value = 4;
  auto sleepOnFutex = [&](int timeoutMs) {
    struct timespec ts = {timeoutMs / 1000, (timeoutMs % 1000) * 1000000L};
    long rc = syscall(SYS_futex, &c.value, FUTEX_WAIT, 4, &ts, nullptr, 0);
    return rc == 0 ? 0 : errno;
  };
  std::atomic<bool> done{false};
  int result = -1;
  std::thread sleeper([&] {
    result = sleepOnFutex(300);
    done = true;
  });
  while (!done) {
    wakeCounter(&c);
    std::this_thread::sleep_for(5ms);
  }
  sleeper.join();
  CHECK(result == ETIMEDOUT);  // never woken: no FUTEX_WAKE was made
  CHECK(c.value == 4);

  done = false;
  result = -1;
  std::atomic_ref<uint32_t>(c.waiters).store(1);
  auto t0 = WaitClock::now();
  std::thread sleeper2([&] {
    result = sleepOnFutex(10000);
    done = true;
  });
  while (!done) {
    wakeCounter(&c);
    std::this_thread::sleep_for(5ms);
  }
  sleeper2.join();
  CHECK(result == 0);  // woken by a FUTEX_WAKE, long before its 10 s timeout
  CHECK(std::chrono::duration<double>(WaitClock::now() - t0).count() < 5.0);
}

TEST_CASE("the abort flag ends a wait with an error", "[wait]") {
  FifoCounter c{};
  std::atomic<bool> abort{false};
  WaitOptions o;
  o.abort = &abort;
  o.deadline = WaitClock::now() + 20s;
  ncclResult_t r = ncclSuccess;
  WaitClock::time_point ended;
  std::thread waiter([&] {
    r = waitForCounter(&c, 1, o);
    ended = WaitClock::now();
  });
  REQUIRE(awaitSleeper(&c));
  auto t0 = WaitClock::now();
  abort.store(true);
  waiter.join();
  CHECK(r == ncclInvalidUsage);
  CHECK(ended - t0 < 1s);  // noticed at the next short sleep's end
  CHECK(c.waiters == 0);

  // An abort does not turn a completed step into a failure.
  c.value = 1;
  CHECK(waitForCounter(&c, 1, o) == ncclSuccess);
}

TEST_CASE("defaultWaitOptions reads SPIN_COUNT and TIMEOUT", "[wait]") {
  ScopedEnv a("NCCL_SPIN_COUNT", "17"), b("NCCL_TIMEOUT", "1500");
  std::atomic<bool> abort{false};
  auto before = WaitClock::now();
  WaitOptions o = defaultWaitOptions(&abort, nullptr);
  CHECK(o.spinCount == 17);
  CHECK(o.abort == &abort);
  CHECK(o.deadline >= before + 1500ms);
  CHECK(o.deadline <= WaitClock::now() + 1500ms);
}
