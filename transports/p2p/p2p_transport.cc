// p2p: one FIFO per connection, shared by pointer between two ranks of one process.
//
// A P2pBlock (host heap) holds the connection's shared state and points to the FIFO memory
// (transports/p2p/fifo_memory.h: heap or device memory), laid out 64-byte aligned as
//   [FifoControl (+ sizes) | Simple slots | LL slots (zeroed)]
#include "transports/p2p/p2p_transport.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "src/base/error.h"
#include "src/base/log.h"
#include "transports/fifo_host.h"
#include "transports/fifo_layout.h"
#include "transports/p2p/fifo_memory.h"

namespace ringcc {
namespace {

constexpr uint64_t kP2pMagic = 0x72696e6763637032ull;  // "ringccp2"
constexpr uint64_t kAlign = 64;

struct alignas(64) P2pBlock {
  uint64_t magic;
  std::atomic<int32_t> refs;        // sides holding the block
  std::atomic<uint32_t> closed[2];  // indexed by ConnSide: that side was released
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t llSlotBytes;
  FifoLayout layout;  // within fifo
  FifoMemory fifo;
  uint64_t serial;
  // Both ranks on one GPU with the FIFO in its memory: kernels fence at GPU scope
  // (ConnectorView::oneGpu).
  bool oneGpu;
};

// Blocks whose receiving side still lives, by serial number (see p2p_transport.h).
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

ConnectorView blockView(const P2pBlock* b) {
  const ConnGeometry g{b->nSlots, b->slotBytes, b->llSlotBytes, 0};
  ConnectorView v = fifoView(b->fifo.base, b->layout, g);
  v.oneGpu = b->oneGpu ? 1 : 0;
  return v;
}

// One side's reference to a block. Releasing it (destruction) tells the other side, and frees
// the block if it was the last reference.
class BlockRef {
 public:
  BlockRef(P2pBlock* block, ConnSide side) : block_(block), side_(side) {}
  BlockRef(BlockRef&& o) noexcept : block_(std::exchange(o.block_, nullptr)), side_(o.side_) {}
  BlockRef& operator=(BlockRef&&) = delete;
  ~BlockRef() {
    if (block_ == nullptr) return;
    // First make the block unreachable for senders that still hold its info.
    if (side_ == ConnSide::Recv) openBlocks().remove(block_->serial);
    block_->closed[static_cast<int>(side_)].store(1, std::memory_order_release);
    // Wake a peer asleep on either counter so that it sees the close now, not at its next
    // timeout. (Kernels on device memory never sleep: an abort flag stops them.)
    if (block_->fifo.kind == MemoryKind::Host) {
      ConnectorView v = blockView(block_);
      wakeCounter(&v.control->tail);
      wakeCounter(&v.control->head);
    }
    if (block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      freeFifoMemory(block_->fifo);
      delete block_;
    }
  }

  P2pBlock* get() const { return block_; }

 private:
  P2pBlock* block_;
  ConnSide side_;
};

class P2pConnector final : public Connector {
 public:
  P2pConnector(ConnSide side, int peerRank, BlockRef block)
      : Connector(side, peerRank, blockView(block.get())), block_(std::move(block)) {}

  const char* transportName() const override { return "p2p"; }

  PeerState peerState() const override {
    int other = side() == ConnSide::Recv ? static_cast<int>(ConnSide::Send)
                                         : static_cast<int>(ConnSide::Recv);
    return block_.get()->closed[other].load(std::memory_order_acquire) ? PeerState::Closed
                                                                       : PeerState::Open;
  }

 private:
  BlockRef block_;
};

// The address in a p2p info means something only in the process that made it.
ncclResult_t checkSameProcess(int32_t pid, const ConnSpec& spec, const char* where) {
  if (pid == static_cast<int32_t>(getpid())) return ncclSuccess;
  return failPeer(ncclInvalidUsage, spec.peer.rank, where,
                  "info comes from process %d but this is process %d: p2p connects ranks of "
                  "one process only",
                  pid, static_cast<int>(getpid()));
}

// Both sides work on the same kind of memory (a communicator's ranks all do).
ncclResult_t checkSameMemory(uint32_t peerMemory, const ConnSpec& spec, const char* where) {
  if (peerMemory == static_cast<uint32_t>(spec.self.memory)) return ncclSuccess;
  return failPeer(ncclInvalidUsage, spec.peer.rank, where,
                  "the peer's buffers are %s memory and this rank's %s: ranks of a communicator "
                  "must all use host memory or all CUDA memory",
                  peerMemory == static_cast<uint32_t>(MemoryKind::Cuda) ? "CUDA" : "host",
                  spec.self.memory == MemoryKind::Cuda ? "CUDA" : "host");
}

// Receiver between setup and connect: owns the block (and its entry in OpenBlocks), so a
// sender may attach even before the receiver's connect.
class P2pPendingRecv final : public PendingConnection {
 public:
  P2pPendingRecv(const ConnSpec& spec, P2pBlock* block)
      : PendingConnection(ConnSide::Recv, spec), block_(block, ConnSide::Recv) {}

 protected:
  ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) override {
    const char* where = "p2p connect recv";
    P2pSendInfo s;
    RINGCC_CHECK(unpackConnInfo(remote, "p2p", kP2pInfoVersion, ConnSide::Send, &s,
                                spec().peer.rank, where));
    RINGCC_CHECK(checkSameProcess(s.pid, spec(), where));
    RINGCC_CHECK(checkSameMemory(s.memory, spec(), where));
    *conn = std::make_unique<P2pConnector>(ConnSide::Recv, spec().peer.rank, std::move(block_));
    return ncclSuccess;
  }

 private:
  BlockRef block_;
};

// Sender between setup and connect: holds nothing; it attaches in connect.
class P2pPendingSend final : public PendingConnection {
 public:
  explicit P2pPendingSend(const ConnSpec& spec) : PendingConnection(ConnSide::Send, spec) {}

 protected:
  ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) override {
    const char* where = "p2p connect send";
    P2pRecvInfo r;
    RINGCC_CHECK(unpackConnInfo(remote, "p2p", kP2pInfoVersion, ConnSide::Recv, &r,
                                spec().peer.rank, where));
    // Check the pid before the address is so much as looked up.
    RINGCC_CHECK(checkSameProcess(r.pid, spec(), where));
    RINGCC_CHECK(checkSameMemory(r.memory, spec(), where));
    // A kernel on another GPU writes into the receiver's device memory through peer access
    // (pinned host memory needs none).
    if (spec().self.memory == MemoryKind::Cuda && r.cudaDev != spec().self.cudaDev && !r.pinned)
      RINGCC_CHECK(enablePeerAccess(reinterpret_cast<CuContext>(r.context), spec().self.cudaDev,
                                    r.cudaDev, spec().peer.rank));
    P2pBlock* block = openBlocks().acquire(r.serial, r.block);
    if (block == nullptr)
      return failPeer(ncclRemoteError, spec().peer.rank, where,
                      "the receiver already closed this connection (channel %d)", spec().channel);
    // From here on we hold a reference: the connector adopts it.
    *conn = std::make_unique<P2pConnector>(ConnSide::Send, spec().peer.rank,
                                           BlockRef(block, ConnSide::Send));
    LOG_INFO(kLogP2p | kLogInit, "p2p: channel %d send to rank %d connected", spec().channel,
             spec().peer.rank);
    return ncclSuccess;
  }
};

class P2pTransport final : public Transport {
 public:
  const char* name() const override { return "p2p"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const override {
    if (!sameProcess(self, peer)) {
      if (why) *why = "not the same process";
      return false;
    }
    if (self.memory != peer.memory) {
      if (why) *why = "one rank uses host memory, the other CUDA memory";
      return false;
    }
    return true;
  }

 protected:
  ncclResult_t setupImpl(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                         std::unique_ptr<PendingConnection>* pending) override {
    if (side == ConnSide::Send) {
      P2pSendInfo s{};
      s.pid = static_cast<int32_t>(getpid());
      s.memory = static_cast<uint32_t>(spec.self.memory);
      s.cudaDev = spec.self.cudaDev;
      RINGCC_CHECK(packConnInfo("p2p", kP2pInfoVersion, ConnSide::Send, s, info));
      *pending = std::make_unique<P2pPendingSend>(spec);
      return ncclSuccess;
    }
    // Sender and receiver share one address space: the receiver reads references directly,
    // host memory always, device memory when both ranks are on one GPU.
    const bool sameMemory =
        spec.self.memory == MemoryKind::Host || spec.self.cudaDev == spec.peer.cudaDev;
    // A sender on a GPU that cannot write into ours: the FIFO goes to pinned host memory,
    // which both reach.
    bool peerWrites = true;
    if (spec.self.memory == MemoryKind::Cuda)
      RINGCC_CHECK(cudaPeerAccessible(spec.peer.cudaDev, spec.self.cudaDev, &peerWrites));
    const FifoLayout l = fifoLayout(connGeometry(spec), 0, kAlign);
    FifoMemory fifo;
    RINGCC_CHECK(allocFifoMemory(spec.self.memory, l, connLlBytes(spec),
                                 sameMemory ? kRefPointer : kRefNone, spec.peer.rank, spec.channel,
                                 &fifo, /*pinnedHost=*/!peerWrites));
    auto* block = new P2pBlock;
    block->magic = kP2pMagic;
    block->refs.store(1, std::memory_order_relaxed);
    block->closed[0].store(0, std::memory_order_relaxed);
    block->closed[1].store(0, std::memory_order_relaxed);
    block->nSlots = spec.nSlots;
    block->slotBytes = spec.slotBytes;
    block->llSlotBytes = spec.llSlotBytes;
    block->layout = l;
    block->fifo = fifo;
    block->oneGpu = spec.self.memory == MemoryKind::Cuda &&
                    spec.self.cudaDev == spec.peer.cudaDev && fifo.pinned == nullptr;
    block->serial = openBlocks().add(block);
    // The pending side owns the block from here on, also if packing the info fails.
    auto recv = std::make_unique<P2pPendingRecv>(spec, block);

    P2pRecvInfo r{};
    r.block = reinterpret_cast<uint64_t>(block);
    r.serial = block->serial;
    r.pid = static_cast<int32_t>(getpid());
    r.memory = static_cast<uint32_t>(spec.self.memory);
    r.cudaDev = spec.self.cudaDev;
    r.context = reinterpret_cast<uint64_t>(fifo.ctx);
    r.pinned = fifo.pinned != nullptr;
    RINGCC_CHECK(packConnInfo("p2p", kP2pInfoVersion, ConnSide::Recv, r, info));
    LOG_INFO(kLogP2p | kLogInit,
             "p2p: channel %d recv from rank %d: %u x %u bytes (LL %u bytes) in %s memory at %p",
             spec.channel, spec.peer.rank, spec.nSlots, spec.slotBytes, spec.llSlotBytes,
             fifo.pinned                     ? "pinned host (no peer access between the GPUs)"
             : fifo.kind == MemoryKind::Cuda ? "GPU"
                                             : "host",
             static_cast<void*>(fifo.base));
    *pending = std::move(recv);
    return ncclSuccess;
  }
};

}  // namespace

Transport& p2pTransport() {
  static P2pTransport t;
  return t;
}

}  // namespace ringcc
