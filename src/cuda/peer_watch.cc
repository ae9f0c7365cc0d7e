#include "src/cuda/peer_watch.h"

#include <atomic>

#include "src/base/log.h"
#include "transports/transport.h"

namespace ringcc {

void PeerWatch::watch(const std::vector<const Connector*>& conns) {
  std::lock_guard<std::mutex> lock(mu_);
  conns_.clear();
  for (const Connector* c : conns)
    if (c->hostControl() != nullptr) conns_.push_back(c);
  if (conns_.empty() || thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void PeerWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, kPeerWatchPeriod, [this] { return stop_; })) {
    for (const Connector* c : conns_) {
      const PeerState state = c->peerState();
      if (state == PeerState::Open) continue;
      // A peer that closed its side (ncclCommAbort, or destroy) is treated as the host
      // engine's waits treat it: nothing more will come from it.
      const uint32_t why = state == PeerState::Dead ? kFailPeerDead : kFailStopped;
      std::atomic_ref<uint32_t> reason(c->hostControl()->failReason);
      uint32_t none = kFailNone;
      if (!reason.compare_exchange_strong(none, why, std::memory_order_acq_rel))
        continue;  // told already (by us, or by the peer before it went)
      int noRank = -1;
      if (state == PeerState::Dead && deadRank_.compare_exchange_strong(noRank, c->peerRank()))
        LOG_WARN("rank %d's process died: this CUDA communicator's kernels that wait on it stop",
                 c->peerRank());
    }
  }
}

}  // namespace ringcc
