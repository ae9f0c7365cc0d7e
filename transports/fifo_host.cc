// Spin, then futex sleep with a short timeout; see fifo_host.h for the ordering argument.
#include "transports/fifo_host.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "transports/transport.h"

namespace ringcc {
namespace {

static_assert(std::atomic_ref<uint32_t>::is_always_lock_free,
              "FIFO counters must be lock-free to work across processes");

std::atomic_ref<uint32_t> valueRef(FifoCounter* c) { return std::atomic_ref<uint32_t>(c->value); }
std::atomic_ref<uint32_t> waitersRef(FifoCounter* c) {
  return std::atomic_ref<uint32_t>(c->waiters);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Sleeps while *addr == expected, at most `micros`; spurious returns are fine.
void futexWait(uint32_t* addr, uint32_t expected, int64_t micros) {
  struct timespec ts;
  ts.tv_sec = micros / 1000000;
  ts.tv_nsec = (micros % 1000000) * 1000;
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

}  // namespace

WaitOptions defaultWaitOptions(const std::atomic<bool>* abort, const Connector* conn) {
  WaitOptions o;
  o.spinCount = static_cast<int>(paramInt("SPIN_COUNT"));
  int64_t ms = paramInt("TIMEOUT");
  if (ms > 0) o.deadline = WaitClock::now() + std::chrono::milliseconds(ms);
  o.abort = abort;
  o.conn = conn;
  return o;
}

uint32_t loadCounter(const FifoCounter* counter) {
  return std::atomic_ref<uint32_t>(const_cast<FifoCounter*>(counter)->value)
      .load(std::memory_order_acquire);
}

void wakeCounter(FifoCounter* counter) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waitersRef(counter).load(std::memory_order_relaxed) == 0) return;
  syscall(SYS_futex, &counter->value, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  if (counter->wakeFd > 0) {
    // A proxy sleeping in poll(): an eventfd write cannot be lost (it stays readable).
    uint64_t one = 1;
    ssize_t n = write(counter->wakeFd - 1, &one, sizeof(one));
    (void)n;  // EAGAIN only when the count is saturated: it is readable then anyway
  }
}

void publishCounter(FifoCounter* counter, uint32_t value) {
  valueRef(counter).store(value, std::memory_order_release);
  wakeCounter(counter);
}

ncclResult_t waitForCounter(FifoCounter* counter, uint32_t target, const WaitOptions& opts,
                            uint32_t* observed) {
  auto value = valueRef(counter);
  uint32_t v = value.load(std::memory_order_acquire);
  for (int i = 0; i < opts.spinCount && !counterReached(v, target); ++i) {
    cpuRelax();
    v = value.load(std::memory_order_acquire);
  }

  const int peer = opts.conn ? opts.conn->peerRank() : -1;
  while (!counterReached(v, target)) {
    // Failures are checked in order of who caused them: us (abort), time, then the peer. Each
    // re-reads the counter first, so a step completed just before the failure still counts.
    if (opts.abort && opts.abort->load(std::memory_order_acquire)) {
      v = value.load(std::memory_order_acquire);
      if (counterReached(v, target)) break;
      LOG_INFO(kLogColl, "%s: aborted while waiting for counter %u (at %u), peer %d", opts.what,
               target, v, peer);
      return ncclInvalidUsage;
    }
    auto now = WaitClock::now();
    if (now >= opts.deadline) {
      v = value.load(std::memory_order_acquire);
      if (counterReached(v, target)) break;
      return failPeer(ncclRemoteError, peer, opts.what,
                      "timed out waiting for counter to reach %u (it is at %u); the peer made "
                      "no progress (NCCL_TIMEOUT)",
                      target, v);
    }
    if (opts.conn) {
      PeerState st = opts.conn->peerState();
      if (st != PeerState::Open) {
        v = value.load(std::memory_order_acquire);
        if (counterReached(v, target)) break;
        return failPeer(ncclRemoteError, peer, opts.what,
                        "the peer's side of the %s connection is %s while waiting for counter "
                        "to reach %u (it is at %u)",
                        opts.conn->transportName(), peerStateName(st), target, v);
      }
    }

    int64_t micros = opts.sleepMicros > 0 ? opts.sleepMicros : 1;
    if (opts.deadline != WaitClock::time_point::max()) {
      auto left =
          std::chrono::duration_cast<std::chrono::microseconds>(opts.deadline - now).count() + 1;
      if (left < micros) micros = left;
    }
    auto waiters = waitersRef(counter);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    v = value.load(std::memory_order_seq_cst);
    if (!counterReached(v, target)) futexWait(&counter->value, v, micros);
    waiters.fetch_sub(1, std::memory_order_release);
    v = value.load(std::memory_order_acquire);
  }
  if (observed) *observed = v;
  return ncclSuccess;
}

}  // namespace ringcc

namespace ringcc {

void napOnCounter(FifoCounter* counter, uint32_t unchanged, int micros) {
  // Same handshake as waitForCounter: announce, re-check, sleep, withdraw.
  waitersRef(counter).fetch_add(1, std::memory_order_seq_cst);
  if (valueRef(counter).load(std::memory_order_seq_cst) == unchanged)
    futexWait(&counter->value, unchanged, micros);
  waitersRef(counter).fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace ringcc
