// The proxy: one thread per process that moves data for transports whose FIFO memory is not
// shared by both sides (a network). It calls Connector::progress() on every registered
// connector and WakeSource::poll() on every registered source (a network worker) until
// nothing moves, spins a little, and then sleeps in poll() on the sources' event fds and on
// its doorbell's eventfd, so an idle process costs no CPU.
//
// Waking it: runners publish tail (send side) or head (receive side) and then the view's
// doorbell, which is the proxy's doorbell(); a host publish wakes its sleepers, and this
// doorbell carries an eventfd (FifoCounter::wakeFd) that the proxy polls. The proxy raises
// the doorbell's `waiters` before its last sweep and keeps it raised while it sleeps, so a
// publish after that sweep always writes the eventfd (fifo_host.h's handshake). Network
// events wake it through the source's fd, armed (WakeSource::arm) after that same sweep.
// A kernel cannot ring the doorbell: while connectors fed by kernels are registered
// (Connector::fedByDevice), the proxy naps kDeviceNap instead of sleeping, for a second after
// anything last moved or woke it (the CUDA engine wakes it at each launch that uses such
// connectors), then kDeviceIdleNap.
//
// Threads: add/remove/addSource/removeSource from any thread. A sweep runs under the proxy's
// lock, so once remove(c) returns, c->progress() is not running and never runs again; the
// caller may destroy c. progress() and poll() must never block (transports/transport.h).
// The thread starts on first add and is stopped at process exit (atexit), once no source is
// closing anything (WakeSource::closing, at most 3 s: UCX links still retiring); a forked child
// gets a fresh proxy of its own (threads do not survive fork).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/connector_device.h"

namespace ringcc {

class Connector;

// Something besides connectors that the proxy must progress: a network worker.
class WakeSource {
 public:
  virtual ~WakeSource() = default;
  // Makes progress; true if anything happened (the proxy then sweeps again at once).
  virtual bool poll() = 0;
  // A file descriptor that becomes readable when poll() has work, once arm() returned true;
  // -1 if none (the proxy then naps briefly instead of sleeping).
  virtual int eventFd() = 0;
  // Prepares eventFd() to signal new work; false if work is pending already (do not sleep).
  virtual bool arm() = 0;
  // Whether it is still closing something that poll() finishes (any thread may ask): at exit
  // the proxy keeps running until no source is, within a bound.
  virtual bool closing() const { return false; }
};

class Proxy {
 public:
  // This process's proxy (created on first use; a forked child gets its own).
  static Proxy& get();

  // The counter connectors put into their views as `doorbell`.
  FifoCounter* doorbell() { return &doorbell_; }

  // Starts progressing `c` (which must answer needsProgress()). A progress() failure is
  // logged by the transport; the proxy then stops calling it (the transport makes its
  // peerState() report the failure, so the runner's waits end).
  void add(Connector* c);
  // Stops progressing `c`; on return progress(c) is not running and will not run again.
  void remove(Connector* c);
  void addSource(WakeSource* s);
  void removeSource(WakeSource* s);

  // Wakes the thread (after a change it must see now: a connection to retire, say).
  void wake();

  // Stops and joins the thread (at exit; the next add starts it again).
  void stop();
  // Waits (at most `limit`) until no source is closing anything; the thread keeps running.
  void drain(std::chrono::milliseconds limit);

  // How many times the thread went to sleep, and how many of those sleeps its doorbell's
  // eventfd ended (for tests: an idle proxy sleeps, and a publish wakes it).
  uint64_t sleeps() const;
  uint64_t doorbellWakes() const { return doorbellWakes_.load(std::memory_order_relaxed); }
  // How long the sweep running now has run (0 when none runs): sweeps never block, so one
  // that has run for seconds is stuck inside a transport's progress (a network library's
  // call that blocks), and every network connection of the process waits with it. Any thread;
  // for the error an operation that times out reports.
  std::chrono::milliseconds sweepRunningFor() const;

 private:
  Proxy();
  void run();
  bool sweep();  // under mu_: one round over sources and connectors; true if anything moved
  bool sweepOnce();  // sweep()'s round, timed by sweep() (sweepRunningFor)
  void startLocked();

  mutable std::mutex mu_;
  std::vector<Connector*> conns_;
  int deviceFed_ = 0;  // connectors in conns_ whose runner is a kernel (Connector::fedByDevice)
  std::vector<WakeSource*> sources_;
  std::thread thread_;
  bool stop_ = false;
  int eventFd_ = -1;
  uint64_t sleeps_ = 0;
  std::atomic<uint64_t> doorbellWakes_{0};
  std::atomic<int64_t> sweepStartNs_{0};  // steady clock at the running sweep's start; 0: none
  FifoCounter doorbell_{};
};

}  // namespace ringcc
