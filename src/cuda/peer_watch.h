// Peer processes that die while a CUDA communicator's kernels may wait on them.
//
// A host rank's waits read each connection's peerState() (a pidfd for shm, UCX's endpoint
// errors) and fail at once when the peer's process is gone. A kernel cannot read either: it
// would wait until NCCL_TIMEOUT (five minutes by default). So a CUDA engine whose connections
// reach other processes runs this watch: a thread that looks at their peerState() every
// kPeerWatchPeriod and, when a peer is Dead, writes kFailPeerDead into that connection's
// FifoControl::failReason through its host address (Connector::hostControl); kFailStopped when
// the peer closed its side (it aborted, or destroyed its communicator: the host engine's waits
// end on that too). A kernel waiting
// on the connection reads failReason between polls (kernels/cuda/batch_block.h) and stops;
// one that does not need the connection any more never looks, so data the peer delivered
// before it died is still used. Connections in device memory (p2p: one process) have no host
// control block and are not watched: their peer cannot die alone.
//
// Threads: watch() and stop() from the engine's threads; the watch thread reads the
// connectors, which must outlive the watch (stop() before they are destroyed).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ringcc {

class Connector;

inline constexpr auto kPeerWatchPeriod = std::chrono::milliseconds(20);

class PeerWatch {
 public:
  PeerWatch() = default;
  ~PeerWatch() { stop(); }
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Watches `conns` from now on, those of them with a host control block (replacing the
  // previous list); starts the thread the first time there is one.
  void watch(const std::vector<const Connector*>& conns);
  // Stops and joins the thread; watch() may start it again.
  void stop();
  // The rank whose process was found dead first, or -1.
  int deadRank() const { return deadRank_.load(std::memory_order_acquire); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<const Connector*> conns_;
  std::atomic<int> deadRank_{-1};
  std::thread thread_;
};

}  // namespace ringcc
