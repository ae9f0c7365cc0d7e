#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "src/core/error.h"
#include "src/core/log.h"
#include "transports/fifo_host.h"
#include "transports/shm/process_watch.h"
#include "transports/shm/shm_segment.h"

namespace ringcc {
namespace {

constexpr uint64_t kShmMagic = 0x72696e6763637368ull;  // "ringccsh"
constexpr uint32_t kShmLayoutVersion = 1;

uint64_t alignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct alignas(64) ShmHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t nSlots;
  uint32_t slotBytes;
  int32_t recvPid;
  int32_t sendPid;     // set by the sender when it attaches
  uint32_t closed[2];  // indexed by ConnSide; atomic_ref only
  uint64_t controlOffset;
  uint64_t slotsOffset;
};
static_assert(sizeof(ShmHeader) == 64);

struct Layout {
  uint64_t controlOffset, slotsOffset, total;
};

Layout layoutFor(uint32_t nSlots, uint32_t slotBytes) {
  Layout l;
  l.controlOffset = alignUp(sizeof(ShmHeader), 64);
  l.slotsOffset = alignUp(l.controlOffset + fifoControlBytes(nSlots), 4096);
  l.total = l.slotsOffset + uint64_t{nSlots} * slotBytes;
  return l;
}

std::atomic_ref<uint32_t> closedRef(ShmHeader* h, ConnSide s) {
  return std::atomic_ref<uint32_t>(h->closed[static_cast<int>(s)]);
}

class ShmConnector final : public Connector {
 public:
  ShmConnector(ConnSide side, int peerRank, ShmSegment seg, ProcessWatch watch)
      : Connector(side, peerRank, viewOf(seg)),
        seg_(std::move(seg)),
        header_(static_cast<ShmHeader*>(seg_.base())),
        watch_(std::move(watch)) {}

  ~ShmConnector() override {
    closedRef(header_, side()).store(1, std::memory_order_release);
    wakeCounter(&view_.control->tail);
    wakeCounter(&view_.control->head);
    // seg_'s destructor unmaps, and removes the name if the sender never attached.
  }

  const char* transportName() const override { return "shm"; }

  PeerState peerState() const override {
    ConnSide other = side() == ConnSide::Recv ? ConnSide::Send : ConnSide::Recv;
    if (closedRef(header_, other).load(std::memory_order_acquire)) return PeerState::Closed;
    if (!watch_.alive()) return PeerState::Dead;
    return PeerState::Open;
  }

 private:
  static ConnectorView viewOf(const ShmSegment& seg) {
    auto* h = static_cast<ShmHeader*>(seg.base());
    char* base = static_cast<char*>(seg.base());
    ConnectorView v;
    v.control = reinterpret_cast<FifoControl*>(base + h->controlOffset);
    v.slots = base + h->slotsOffset;
    v.nSlots = h->nSlots;
    v.slotBytes = h->slotBytes;
    return v;
  }

  ShmSegment seg_;
  ShmHeader* header_;
  ProcessWatch watch_;
};

// Pids only name the same process within one pid namespace.
ProcessWatch watchPeer(const ConnSpec& spec, int32_t pid) {
  if (pid <= 0 || spec.self.pidNamespace != spec.peer.pidNamespace) return ProcessWatch();
  return ProcessWatch(pid);
}

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const override {
    if (!sameHost(self, peer)) {
      if (why) *why = "not the same host";
      return false;
    }
    if (self.memory != MemoryKind::Host || peer.memory != MemoryKind::Host) {
      if (why) *why = "device memory needs host-mapped shm (not available yet)";
      return false;
    }
    return true;
  }

  void cleanUpAfter(const PeerInfo& self, const PeerInfo& peer) override {
    // Its pid names its segments only within our pid namespace, and only once it has exited
    // (zombies count) are they surely orphans: a live receiver still waits for its sender.
    if (!sameHost(self, peer) || peer.pidNamespace == 0 || peer.pidNamespace != self.pidNamespace ||
        peer.pid <= 0 || peer.pid == self.pid)
      return;
    if (ProcessWatch(peer.pid).alive()) return;
    ShmSegment::removeNamesOf(peer.pid);
  }

  ncclResult_t setupRecv(const ConnSpec& spec, ConnBlob* blob,
                         std::unique_ptr<Connector>* conn) override {
    if (blob == nullptr || conn == nullptr)
      return fail(ncclInvalidArgument, "shm setupRecv", "blob and conn must not be NULL");
    RINGCC_CHECK(checkConnSpec(spec, "shm setupRecv"));
    Layout l = layoutFor(spec.nSlots, spec.slotBytes);
    ShmSegment seg;
    RINGCC_CHECK(ShmSegment::create(l.total, spec.peer.rank, &seg));
    // A fresh segment reads as zeros: counters, waiters, sizes and closed flags start at 0.
    auto* h = static_cast<ShmHeader*>(seg.base());
    h->magic = kShmMagic;
    h->version = kShmLayoutVersion;
    h->nSlots = spec.nSlots;
    h->slotBytes = spec.slotBytes;
    h->recvPid = static_cast<int32_t>(getpid());
    h->controlOffset = l.controlOffset;
    h->slotsOffset = l.slotsOffset;

    ShmBlob b{};
    std::snprintf(b.name, sizeof(b.name), "%s", seg.name());
    b.bytes = l.total;
    b.nSlots = spec.nSlots;
    b.slotBytes = spec.slotBytes;
    b.recvPid = h->recvPid;
    packConnBlob("shm", kShmBlobVersion, b, blob);
    LOG_INFO(kLogShm | kLogInit, "shm: channel %d recv from rank %d: %s, %u x %u bytes",
             spec.channel, spec.peer.rank, seg.name(), spec.nSlots, spec.slotBytes);
    *conn = std::make_unique<ShmConnector>(ConnSide::Recv, spec.peer.rank, std::move(seg),
                                           watchPeer(spec, spec.peer.pid));
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnSpec& spec, const ConnBlob& blob,
                           std::unique_ptr<Connector>* conn) override {
    if (conn == nullptr)
      return fail(ncclInvalidArgument, "shm connectSend", "conn must not be NULL");
    RINGCC_CHECK(checkConnSpec(spec, "shm connectSend"));
    ShmBlob b;
    RINGCC_CHECK(unpackConnBlob(blob, "shm", kShmBlobVersion, &b, spec.peer.rank));
    b.name[sizeof(b.name) - 1] = '\0';
    if (b.nSlots != spec.nSlots || b.slotBytes != spec.slotBytes)
      return failPeer(ncclInvalidUsage, spec.peer.rank, "shm connectSend",
                      "receiver has %u slots of %u bytes, we expect %u of %u (NCCL_BUFFSIZE "
                      "must be the same on every rank)",
                      b.nSlots, b.slotBytes, spec.nSlots, spec.slotBytes);
    Layout l = layoutFor(b.nSlots, b.slotBytes);
    if (b.bytes != l.total)
      return failPeer(ncclInvalidUsage, spec.peer.rank, "shm connectSend",
                      "blob says %llu bytes for %u x %u slots, expected %llu",
                      static_cast<unsigned long long>(b.bytes), b.nSlots, b.slotBytes,
                      static_cast<unsigned long long>(l.total));
    // Watch the receiver before attaching: it is alive now (it just sent the blob).
    ProcessWatch watch = watchPeer(spec, b.recvPid);
    ShmSegment seg;
    RINGCC_CHECK(ShmSegment::attach(b.name, b.bytes, spec.peer.rank, &seg));
    auto* h = static_cast<ShmHeader*>(seg.base());
    if (h->magic != kShmMagic || h->version != kShmLayoutVersion || h->nSlots != b.nSlots ||
        h->slotBytes != b.slotBytes || h->controlOffset != l.controlOffset ||
        h->slotsOffset != l.slotsOffset)
      return failPeer(ncclInvalidUsage, spec.peer.rank, "shm connectSend",
                      "segment %s does not hold the FIFO its blob describes", b.name);
    h->sendPid = static_cast<int32_t>(getpid());
    LOG_INFO(kLogShm | kLogInit, "shm: channel %d send to rank %d: attached %s", spec.channel,
             spec.peer.rank, b.name);
    *conn = std::make_unique<ShmConnector>(ConnSide::Send, spec.peer.rank, std::move(seg),
                                           std::move(watch));
    return ncclSuccess;
  }
};

}  // namespace

Transport& shmTransport() {
  static ShmTransport t;
  return t;
}

}  // namespace ringcc
