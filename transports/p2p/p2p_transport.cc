// p2p: one heap block per connection, shared by pointer between two ranks of one process.
//
// Block layout (64-byte aligned):  [P2pBlock header | FifoControl (+ sizes) | slots]
#include "transports/p2p/p2p_transport.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "src/core/error.h"
#include "src/core/log.h"
#include "transports/fifo_host.h"

namespace ringcc {
namespace {

constexpr uint64_t kP2pMagic = 0x72696e6763637032ull;  // "ringccp2"
constexpr uint64_t kAlign = 64;

uint64_t alignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct alignas(64) P2pBlock {
  uint64_t magic;
  std::atomic<int32_t> refs;        // Connectors holding the block
  std::atomic<uint32_t> closed[2];  // indexed by ConnSide: that side was destroyed
  uint32_t nSlots;
  uint32_t slotBytes;
  uint64_t controlOffset;
  uint64_t slotsOffset;
  uint64_t serial;
};

// Blocks whose receiving Connector still lives, by serial number (see p2p_transport.h).
class OpenBlocks {
 public:
  uint64_t add(P2pBlock* block) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t serial = ++lastSerial_;
    blocks_[serial] = block;
    return serial;
  }
  void remove(uint64_t serial) {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.erase(serial);
  }
  // The block named by (serial, address) with one more reference, or nullptr if its receiver
  // is gone.
  P2pBlock* acquire(uint64_t serial, uint64_t address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(serial);
    if (it == blocks_.end() || reinterpret_cast<uint64_t>(it->second) != address) return nullptr;
    it->second->refs.fetch_add(1, std::memory_order_acq_rel);
    return it->second;
  }

 private:
  std::mutex mu_;
  uint64_t lastSerial_ = 0;
  std::unordered_map<uint64_t, P2pBlock*> blocks_;
};

OpenBlocks& openBlocks() {
  static OpenBlocks* blocks = new OpenBlocks;  // never destroyed: Connectors may outlive main
  return *blocks;
}

ConnectorView blockView(P2pBlock* b) {
  char* base = reinterpret_cast<char*>(b);
  ConnectorView v;
  v.control = reinterpret_cast<FifoControl*>(base + b->controlOffset);
  v.slots = base + b->slotsOffset;
  v.nSlots = b->nSlots;
  v.slotBytes = b->slotBytes;
  return v;
}

class P2pConnector final : public Connector {
 public:
  P2pConnector(ConnSide side, int peerRank, P2pBlock* block)
      : Connector(side, peerRank, blockView(block)), block_(block) {}

  ~P2pConnector() override {
    // First make the block unreachable for senders that still hold its blob.
    if (side() == ConnSide::Recv) openBlocks().remove(block_->serial);
    block_->closed[static_cast<int>(side())].store(1, std::memory_order_release);
    // Wake a peer asleep on either counter so that it sees the close now, not at its next
    // timeout.
    wakeCounter(&view_.control->tail);
    wakeCounter(&view_.control->head);
    if (block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      block_->~P2pBlock();
      std::free(block_);
    }
  }

  const char* transportName() const override { return "p2p"; }

  PeerState peerState() const override {
    int other = side() == ConnSide::Recv ? static_cast<int>(ConnSide::Send)
                                         : static_cast<int>(ConnSide::Recv);
    return block_->closed[other].load(std::memory_order_acquire) ? PeerState::Closed
                                                                 : PeerState::Open;
  }

 private:
  P2pBlock* block_;
};

class P2pTransport final : public Transport {
 public:
  const char* name() const override { return "p2p"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const override {
    if (!sameProcess(self, peer)) {
      if (why) *why = "not the same process";
      return false;
    }
    if (self.memory != MemoryKind::Host || peer.memory != MemoryKind::Host) {
      if (why) *why = "device memory needs the CUDA p2p transport (not available yet)";
      return false;
    }
    return true;
  }

  ncclResult_t setupRecv(const ConnSpec& spec, ConnBlob* blob,
                         std::unique_ptr<Connector>* conn) override {
    if (blob == nullptr || conn == nullptr)
      return fail(ncclInvalidArgument, "p2p setupRecv", "blob and conn must not be NULL");
    RINGCC_CHECK(checkConnSpec(spec, "p2p setupRecv"));
    uint64_t controlOffset = alignUp(sizeof(P2pBlock), kAlign);
    uint64_t slotsOffset = alignUp(controlOffset + fifoControlBytes(spec.nSlots), kAlign);
    uint64_t total = alignUp(slotsOffset + connSlotBytes(spec), kAlign);
    void* mem = std::aligned_alloc(kAlign, total);
    if (mem == nullptr)
      return failPeer(ncclSystemError, spec.peer.rank, "p2p setupRecv",
                      "could not allocate %llu bytes for channel %d",
                      static_cast<unsigned long long>(total), spec.channel);
    auto* block = new (mem) P2pBlock;
    block->magic = kP2pMagic;
    block->refs.store(1, std::memory_order_relaxed);
    block->closed[0].store(0, std::memory_order_relaxed);
    block->closed[1].store(0, std::memory_order_relaxed);
    block->nSlots = spec.nSlots;
    block->slotBytes = spec.slotBytes;
    block->controlOffset = controlOffset;
    block->slotsOffset = slotsOffset;
    std::memset(static_cast<char*>(mem) + controlOffset, 0, slotsOffset - controlOffset);
    block->serial = openBlocks().add(block);

    P2pBlob b{};
    b.block = reinterpret_cast<uint64_t>(block);
    b.serial = block->serial;
    b.pid = static_cast<int32_t>(getpid());
    b.nSlots = spec.nSlots;
    b.slotBytes = spec.slotBytes;
    packConnBlob("p2p", kP2pBlobVersion, b, blob);
    *conn = std::make_unique<P2pConnector>(ConnSide::Recv, spec.peer.rank, block);
    LOG_INFO(kLogP2p | kLogInit, "p2p: channel %d recv from rank %d: %u x %u bytes at %p",
             spec.channel, spec.peer.rank, spec.nSlots, spec.slotBytes, mem);
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnSpec& spec, const ConnBlob& blob,
                           std::unique_ptr<Connector>* conn) override {
    if (conn == nullptr)
      return fail(ncclInvalidArgument, "p2p connectSend", "conn must not be NULL");
    RINGCC_CHECK(checkConnSpec(spec, "p2p connectSend"));
    P2pBlob b;
    RINGCC_CHECK(unpackConnBlob(blob, "p2p", kP2pBlobVersion, &b, spec.peer.rank));
    // The address means something only in the process that made it: check before touching it.
    if (b.pid != static_cast<int32_t>(getpid()))
      return failPeer(ncclInvalidUsage, spec.peer.rank, "p2p connectSend",
                      "blob comes from process %d but this is process %d: p2p connects ranks "
                      "of one process only",
                      b.pid, static_cast<int>(getpid()));
    if (b.nSlots != spec.nSlots || b.slotBytes != spec.slotBytes)
      return failPeer(ncclInvalidUsage, spec.peer.rank, "p2p connectSend",
                      "receiver has %u slots of %u bytes, we expect %u of %u (NCCL_BUFFSIZE "
                      "must be the same on every rank)",
                      b.nSlots, b.slotBytes, spec.nSlots, spec.slotBytes);
    P2pBlock* block = openBlocks().acquire(b.serial, b.block);
    if (block == nullptr)
      return failPeer(ncclRemoteError, spec.peer.rank, "p2p connectSend",
                      "the receiver already closed this connection (channel %d)", spec.channel);
    // From here on we hold a reference: the connector adopts it.
    *conn = std::make_unique<P2pConnector>(ConnSide::Send, spec.peer.rank, block);
    LOG_INFO(kLogP2p | kLogInit, "p2p: channel %d send to rank %d connected", spec.channel,
             spec.peer.rank);
    return ncclSuccess;
  }
};

}  // namespace

Transport& p2pTransport() {
  static P2pTransport t;
  return t;
}

}  // namespace ringcc
