#include "transports/proxy/proxy.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/base/log.h"
#include "src/base/process_local.h"
#include "transports/fifo_host.h"
#include "transports/transport.h"

namespace ringcc {
namespace {

// Sweeps without movement before the proxy sleeps: long enough to bridge the gap between
// a runner's publishes within one operation, short enough not to hold a core when idle.
constexpr int kIdleSweepsBeforeSleep = 200;
// Longest sleep: the proxy also sleeps when a source has no fd, and stop() must be quick.
constexpr int kMaxSleepMs = 100;
// Longest sleep with no connector registered (a process whose communicators are gone).
constexpr int kIdleSleepMs = 1000;
// With connectors fed by kernels (proxy.h): the nap while they are active (a kernel's step
// waits at most this long for the proxy to notice it), how long after the last movement or
// wake-up they count as active, and the nap after that.
constexpr auto kDeviceNap = std::chrono::microseconds(50);
constexpr auto kDeviceActive = std::chrono::seconds(1);
constexpr auto kDeviceIdleNap = std::chrono::milliseconds(10);

std::atomic_ref<uint32_t> waitersOf(FifoCounter* c) {
  return std::atomic_ref<uint32_t>(c->waiters);
}

ProcessLocal<Proxy> gProxy;

// At most this long at exit for sources to finish closing (a UCX link waits up to 0.5 s for its
// close message, then up to 2 s for UCX to finish the close).
constexpr auto kExitDrain = std::chrono::seconds(3);

void stopAtExit() {
  if (Proxy* proxy = gProxy.ifMade()) {
    // A process that exits right after ncclCommDestroy still has links closing: without this
    // their endpoints would never be closed (and the peer would not hear of it).
    proxy->drain(kExitDrain);
    proxy->stop();
  }
}

}  // namespace

Proxy& Proxy::get() {
  // A forked child makes its own (src/base/process_local.h); each process stops its own at exit.
  return *gProxy.get([] {
    static const bool atExitSet = std::atexit(stopAtExit) == 0;
    (void)atExitSet;
    return new Proxy();
  });
}

Proxy::Proxy() {
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (eventFd_ < 0)
    LOG_WARN("proxy: eventfd failed (%s); the proxy will nap instead of sleeping", strerror(errno));
  else
    doorbell_.wakeFd = eventFd_ + 1;
}

void Proxy::startLocked() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
  LOG_INFO(kLogProxy | kLogInit, "proxy: thread started");
}

void Proxy::add(Connector* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
    if (c->fedByDevice()) ++deviceFed_;
    startLocked();
  }
  wake();
}

void Proxy::remove(Connector* c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(conns_.begin(), conns_.end(), c);
  if (it == conns_.end()) return;
  if (c->fedByDevice()) --deviceFed_;
  conns_.erase(it);
}

void Proxy::addSource(WakeSource* s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sources_.push_back(s);
    startLocked();
  }
  wake();
}

void Proxy::removeSource(WakeSource* s) {
  std::lock_guard<std::mutex> lock(mu_);
  sources_.erase(std::remove(sources_.begin(), sources_.end(), s), sources_.end());
}

void Proxy::wake() {
  if (eventFd_ < 0) return;
  uint64_t one = 1;
  ssize_t n = write(eventFd_, &one, sizeof(one));
  (void)n;
}

void Proxy::drain(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool closing = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!thread_.joinable()) return;
      for (const WakeSource* s : sources_) closing |= s->closing();
    }
    if (!closing) return;
    wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Proxy::stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
    t = std::move(thread_);
  }
  wake();
  t.join();
}

uint64_t Proxy::sleeps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleeps_;
}

namespace {
int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::chrono::milliseconds Proxy::sweepRunningFor() const {
  const int64_t start = sweepStartNs_.load(std::memory_order_relaxed);
  if (start == 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds((steadyNs() - start) / 1000000);
}

bool Proxy::sweep() {
  sweepStartNs_.store(steadyNs(), std::memory_order_relaxed);
  bool moved = sweepOnce();
  sweepStartNs_.store(0, std::memory_order_relaxed);
  return moved;
}

bool Proxy::sweepOnce() {
  bool moved = false;
  for (WakeSource* s : sources_) moved |= s->poll();
  for (size_t i = 0; i < conns_.size();) {
    bool m = false;
    if (conns_[i]->progress(&m) != ncclSuccess) {
      // Logged by the transport, which now reports the failure through peerState().
      if (conns_[i]->fedByDevice()) --deviceFed_;
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
      moved = true;
      continue;
    }
    moved |= m;
    ++i;
  }
  return moved;
}

void Proxy::run() {
  int idle = 0;
  std::vector<pollfd> fds;
  auto lastActive = std::chrono::steady_clock::now();  // moved or woken (for kernel-fed links)
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return;
    if (sweep()) {
      idle = 0;
      if (deviceFed_ > 0) lastActive = std::chrono::steady_clock::now();
      continue;
    }
    if (++idle < kIdleSweepsBeforeSleep) {
      lock.unlock();
      std::this_thread::yield();
      continue;
    }
    // Going to sleep: announce it on the doorbell, then sweep once more and arm the sources,
    // so that whatever happens after this sweep wakes us (see proxy.h).
    waitersOf(&doorbell_).fetch_add(1, std::memory_order_seq_cst);
    bool sleep = !sweep();
    fds.clear();
    if (eventFd_ >= 0) fds.push_back({eventFd_, POLLIN, 0});
    bool blind = false;  // a source without fd: nap briefly instead of sleeping long
    for (WakeSource* s : sources_) {
      if (!sleep) break;
      if (!s->arm()) sleep = false;
      int fd = s->eventFd();
      if (fd >= 0)
        fds.push_back({fd, POLLIN, 0});
      else
        blind = true;
    }
    if (sleep) ++sleeps_;
    // With no connector to serve, nothing waits on a missed wake-up: sleep longer. Kernels
    // publish without waking us: nap (proxy.h).
    const int sleepMs = blind ? 1 : conns_.empty() ? kIdleSleepMs : kMaxSleepMs;
    std::chrono::microseconds timeout = std::chrono::milliseconds(sleepMs);
    if (deviceFed_ > 0) {
      const bool active = std::chrono::steady_clock::now() - lastActive < kDeviceActive;
      timeout = active ? kDeviceNap : std::chrono::microseconds(kDeviceIdleNap);
    }
    lock.unlock();
    if (sleep) {
      const timespec ts{static_cast<time_t>(timeout.count() / 1000000),
                        static_cast<long>(timeout.count() % 1000000) * 1000};
      ppoll(fds.data(), fds.size(), &ts, nullptr);
    }
    waitersOf(&doorbell_).fetch_sub(1, std::memory_order_seq_cst);
    if (eventFd_ >= 0) {
      uint64_t drained;
      ssize_t n = read(eventFd_, &drained, sizeof(drained));  // non-blocking
      if (sleep && n == sizeof(drained)) {
        doorbellWakes_.fetch_add(1, std::memory_order_relaxed);
        lastActive = std::chrono::steady_clock::now();
      }
    }
    idle = 0;
  }
}

}  // namespace ringcc
