#include "transports/ucx/ucx_transport.h"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"
#include "transports/proxy/proxy.h"
#include "transports/ucx/ucx_link.h"
#include "transports/ucx/ucx_worker.h"

namespace ringcc {
namespace {

// Longest a closing sender waits for the peer to consume its published slots (see
// UcxConnector::close), and how long it waits without the peer consuming any. A peer that closed
// or died ends the wait at once (drained() says so); the stall limit is for a peer that lives but
// does not read, as after a failed operation, which must not hold the error's return for long. It
// must still be long enough for a healthy peer whose proxy thread waits for a core on an
// oversubscribed host: a sender that gives up early drops the last data of a finished operation,
// and its peer fails with "peer died" (seen at 200 ms under a load of 15 on 2 cores). After one
// drain of a close stalled, the others of the same close wait kStallAfterStall at most
// (CloseScope). (A connection closed because its operation failed skips the wait altogether:
// discard().)
constexpr auto kDrainWait = std::chrono::seconds(5);
constexpr auto kDrainStall = std::chrono::seconds(2);
constexpr auto kStallAfterStall = std::chrono::milliseconds(250);

class UcxConnector final : public Connector {
 public:
  UcxConnector(std::unique_ptr<UcxLink> link, UcxWorker* worker)
      : Connector(link->side(), link->peerRank(), link->view()),
        link_(std::move(link)),
        worker_(worker),
        fedByDevice_(link_->fedByDevice()) {
    Proxy::get().add(this);
  }
  ~UcxConnector() override {
    if (link_) {
      CloseScope alone;
      close(alone);
    }
  }

  // What the runner published is consumed by the peer first (bounded: a peer that stops reading
  // cannot hold us longer than kDrainWait); then, after remove(), the proxy no longer runs
  // progress() on us, and it releases the link's UCX resources (it owns the worker) without
  // waiting here.
  void close(CloseScope& scope) override {
    if (!link_) return;
    auto now = std::chrono::steady_clock::now();
    const auto until = now + kDrainWait;
    const auto stallLimit = scope.drainStalled
                                ? std::chrono::steady_clock::duration(kStallAfterStall)
                                : std::chrono::steady_clock::duration(kDrainStall);
    auto stalledSince = now;
    for (uint32_t last = link_->consumed(); !discarded_ && !link_->drained();) {
      if (now >= until || now - stalledSince >= stallLimit) {
        scope.drainStalled = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      now = std::chrono::steady_clock::now();
      if (uint32_t d = link_->consumed(); d != last) {
        last = d;
        stalledSince = now;
      }
    }
    Proxy::get().remove(this);
    link_->unmapForKernels();  // the communicator's kernels are done; UCX needs no GPU mapping
    worker_->retire(std::move(link_));
  }

  const char* transportName() const override { return "ucx"; }
  // After close() (the rest of its closeAll still running) the link is the proxy's.
  PeerState peerState() const override { return link_ ? link_->peerState() : PeerState::Closed; }
  bool needsProgress() const override { return true; }
  bool fedByDevice() const override { return fedByDevice_; }
  FifoControl* hostControl() const override { return link_ ? link_->hostControl() : nullptr; }
  ncclResult_t progress(bool* moved) override { return link_->progress(moved); }
  void discard() override { discarded_ = true; }

 private:
  std::unique_ptr<UcxLink> link_;
  UcxWorker* worker_;
  bool discarded_ = false;  // the operation failed: the destructor does not drain
  const bool fedByDevice_;  // a CUDA rank's: its kernels publish, the proxy polls
};

class UcxPending final : public PendingConnection {
 public:
  UcxPending(ConnSide side, const ConnSpec& spec, std::unique_ptr<UcxLink> link, UcxWorker* worker)
      : PendingConnection(side, spec), link_(std::move(link)), worker_(worker) {}

 protected:
  ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) override {
    const char* where = side() == ConnSide::Recv ? "ucx connect recv" : "ucx connect send";
    const int peer = spec().peer.rank;
    UcxInfo info;
    std::vector<uint8_t> address;
    RINGCC_CHECK(unpackConnInfo(remote, "ucx", kUcxInfoVersion,
                                side() == ConnSide::Recv ? ConnSide::Send : ConnSide::Recv, &info,
                                peer, where, &address));
    if (address.empty() || info.linkId == 0)
      return failPeer(ncclInvalidUsage, peer, where, "the info carries no UCX worker address");
    link_->setPeer(info.linkId, std::move(address));
    *conn = std::make_unique<UcxConnector>(std::move(link_), worker_);
    return ncclSuccess;
  }

 private:
  std::unique_ptr<UcxLink> link_;  // never started: its destructor only frees memory
  UcxWorker* worker_;
};

class UcxTransport final : public Transport {
 public:
  const char* name() const override { return "ucx"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const override {
    // CUDA ranks stage through host memory (ucx_link.h); one of each kind share no
    // communicator.
    if (self.memory != peer.memory) {
      if (why) *why = "one rank uses host memory, the other device memory";
      return false;
    }
    return true;
  }

 protected:
  ncclResult_t setupImpl(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                         std::unique_ptr<PendingConnection>* pending) override {
    UcxWorker* worker = nullptr;
    RINGCC_CHECK(UcxWorker::get(&worker));
    auto link = std::make_unique<UcxLink>(worker, side, spec);
    if (!link->valid())
      return failPeer(ncclSystemError, spec.peer.rank, "ucx setup",
                      "no memory for %u x %u B of slots", spec.nSlots, spec.slotBytes);
    if (spec.self.memory == MemoryKind::Cuda) RINGCC_CHECK(link->mapForKernels(spec));
    UcxInfo mine{};
    mine.linkId = link->id();
    RINGCC_CHECK(packConnInfo("ucx", kUcxInfoVersion, side, mine, info,
                              std::span<const uint8_t>(worker->address())));
    LOG_INFO(kLogNet | kLogInit, "ucx: channel %d %s rank %d: link %u, %u x %u B slots, no LL%s",
             spec.channel, side == ConnSide::Recv ? "recv from" : "send to", spec.peer.rank,
             link->id(), spec.nSlots, spec.slotBytes,
             link->fedByDevice() ? ", staged through host memory for the GPU" : "");
    *pending = std::make_unique<UcxPending>(side, spec, std::move(link), worker);
    return ncclSuccess;
  }
};

}  // namespace

Transport& ucxTransport() {
  static UcxTransport t;
  return t;
}

}  // namespace ringcc
