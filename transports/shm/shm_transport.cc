#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <utility>

#include "kernels/peer_read.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "transports/fifo_host.h"
#include "transports/fifo_layout.h"
#include "transports/host_mapped.h"
#include "transports/shm/device_slots.h"
#include "transports/shm/mapped_buffers.h"
#include "transports/shm/process_watch.h"
#include "transports/shm/shm_segment.h"

namespace ringcc {
namespace {

constexpr uint64_t kShmMagic = 0x72696e6763637368ull;  // "ringccsh"
constexpr uint16_t kShmLayoutVersion = 4;
constexpr uint16_t kShmFlagDeviceSlots = 1;  // the slots are in the receiver's GPU
constexpr uint64_t kPage = 4096;
// What a receiver reads from the sender's memory to learn whether it may read references.
const uint64_t kPeerReadProbe = 0x72696e6763637266ull;  // "ringccrf"

struct alignas(64) ShmHeader {
  uint64_t magic;
  uint16_t version;
  uint16_t flags;  // kShmFlagDeviceSlots
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t llSlotBytes;
  int32_t recvPid;
  int32_t sendPid;     // set by the sender when it attaches
  uint32_t closed[2];  // indexed by ConnSide; atomic_ref only
  uint64_t controlOffset;
  uint64_t slotsOffset;
  uint64_t llSlotsOffset;
};
static_assert(sizeof(ShmHeader) == 64);

// Where the FIFO lies in the segment. With its slots in the receiver's GPU the segment ends
// after the control block (offsets 0: no slots here).
FifoLayout layoutFor(const ConnGeometry& g, bool deviceSlots) {
  FifoLayout l = fifoLayout(g, sizeof(ShmHeader), kPage);
  if (deviceSlots) {
    l.total = l.slotsOffset;
    l.slotsOffset = 0;
    l.llSlotsOffset = 0;
  }
  return l;
}

std::atomic_ref<uint32_t> closedRef(ShmHeader* h, ConnSide s) {
  return std::atomic_ref<uint32_t>(h->closed[static_cast<int>(s)]);
}

// The FIFO of `seg` as seen at `base`: the segment's own (host) address, or its device
// address for a CUDA rank's kernels. `slots`: where the slots are when they are in the
// receiver's GPU (null for a host thread's view, which only touches the control block).
ConnectorView viewOf(const ShmSegment& seg, char* base = nullptr, char* slots = nullptr) {
  auto* h = static_cast<ShmHeader*>(seg.base());
  const FifoLayout l{h->controlOffset, h->slotsOffset, h->llSlotsOffset, 0};
  const ConnGeometry g{h->nSlots, h->slotBytes, h->llSlotBytes, 0};
  ConnectorView v = fifoView(base != nullptr ? base : static_cast<char*>(seg.base()), l, g);
  if (h->flags & kShmFlagDeviceSlots) {
    v.slots = slots;
    v.llSlots = slots != nullptr && g.llSlotBytes > 0 ? slots + deviceLlOffset(g) : nullptr;
  }
  return v;
}

// A CUDA rank's kernels reach the segment through a registration (transports/host_mapped.h);
// a host rank needs none.
ncclResult_t mapForKernels(const ConnSpec& spec, const ShmSegment& seg, const char* where,
                           HostMapping* out) {
  if (spec.self.memory != MemoryKind::Cuda) return ncclSuccess;
  return HostMapping::map(seg.base(), seg.size(), spec.peer.rank, spec.channel, where, out);
}

// One side's mapping of a segment. Releasing it (destruction) tells the other side through its
// closed flag and wakes both counters; the segment's own destructor then unmaps, and removes
// the name if the sender never attached.
class ShmSide {
 public:
  ShmSide(ShmSegment seg, ConnSide side) : seg_(std::move(seg)), side_(side) {}
  ShmSide(ShmSide&& o) noexcept : seg_(std::move(o.seg_)), side_(o.side_) {}
  ShmSide& operator=(ShmSide&&) = delete;
  ~ShmSide() {
    if (seg_.base() == nullptr) return;
    closedRef(header(), side_).store(1, std::memory_order_release);
    ConnectorView v = viewOf(seg_);
    wakeCounter(&v.control->tail);
    wakeCounter(&v.control->head);
  }

  ShmHeader* header() const { return static_cast<ShmHeader*>(seg_.base()); }
  const ShmSegment& segment() const { return seg_; }

 private:
  ShmSegment seg_;
  ConnSide side_;
};

class ShmConnector final : public Connector {
 public:
  // refPid, refKind (receive side): the sender's pid and how this side reads its references
  // (kRefProcess, kRefMapped), else 0. device: the segment's registration for a CUDA rank (the
  // view then holds device addresses). slots: the slots in the receiver's GPU, when the
  // segment has none.
  ShmConnector(ConnSide side, int peerRank, ShmSide mapping, ProcessWatch watch, HostMapping device,
               DeviceSlots slots, int refPid = 0, uint32_t refKind = kRefNone)
      : Connector(side, peerRank, viewOf(mapping.segment(), device.device(), slots.base())),
        mapping_(std::move(mapping)),
        watch_(std::move(watch)),
        device_(std::move(device)),
        slots_(std::move(slots)) {
    if (refPid > 0 && refKind != kRefNone) {
      view_.refPid = refPid;
      // Published once, before this side's first head moves; the sender reads it per slice.
      std::atomic_ref<uint32_t>(view_.control->refKind).store(refKind, std::memory_order_release);
    }
  }

  const char* transportName() const override { return "shm"; }
  FifoControl* hostControl() const override { return viewOf(mapping_.segment()).control; }

  PeerState peerState() const override {
    ConnSide other = side() == ConnSide::Recv ? ConnSide::Send : ConnSide::Recv;
    if (closedRef(mapping_.header(), other).load(std::memory_order_acquire))
      return PeerState::Closed;
    if (!watch_.alive()) return PeerState::Dead;
    return PeerState::Open;
  }

 private:
  ShmSide mapping_;
  ProcessWatch watch_;
  HostMapping device_;  // released before the segment: it stays mapped until ShmSide goes
  DeviceSlots slots_;   // released first
};

// Pids only name the same process within one pid namespace.
ProcessWatch watchPeer(const ConnSpec& spec, int32_t pid) {
  if (pid <= 0 || spec.self.pidNamespace != spec.peer.pidNamespace) return ProcessWatch();
  return ProcessWatch(pid);
}

// Receiver between setup and connect: owns the segment (its name waits for the sender).
class ShmPendingRecv final : public PendingConnection {
 public:
  ShmPendingRecv(const ConnSpec& spec, ShmSegment seg, HostMapping device, DeviceSlots slots)
      : PendingConnection(ConnSide::Recv, spec),
        mapping_(std::move(seg), ConnSide::Recv),
        device_(std::move(device)),
        slots_(std::move(slots)) {}

 protected:
  ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) override {
    const char* where = "shm connect recv";
    ShmSendInfo s;
    RINGCC_CHECK(unpackConnInfo(remote, "shm", kShmInfoVersion, ConnSide::Send, &s,
                                spec().peer.rank, where));
    // References need host memory (a kernel cannot follow one into another process), the
    // sender's pid in our namespace and the right to read its memory.
    const bool canRef = spec().self.memory == MemoryKind::Host &&
                        spec().self.pidNamespace == spec().peer.pidNamespace;
    uint32_t kind = kRefNone;
    if (canRef && paramInt("SHM_REFS") != 0 && peerReadWorks(s.sendPid, s.probeAddr, s.probeValue))
      kind = kRefProcess;
    else if (canRef && paramInt("SHM_MAP") != 0 && mappedReadWorks(s.sendPid, s.probeRegion))
      kind = kRefMapped;
    // Watch the sender from now: it is alive (it just sent its info).
    *conn = std::make_unique<ShmConnector>(ConnSide::Recv, spec().peer.rank, std::move(mapping_),
                                           watchPeer(spec(), s.sendPid), std::move(device_),
                                           std::move(slots_), s.sendPid, kind);
    LOG_INFO(kLogShm | kLogInit, "shm: channel %d recv from rank %d: references %s", spec().channel,
             spec().peer.rank,
             kind == kRefProcess  ? "read with process_vm_readv"
             : kind == kRefMapped ? "of ncclMemAlloc buffers, mapped and read in place"
                                  : "off");
    return ncclSuccess;
  }

 private:
  ShmSide mapping_;
  HostMapping device_;
  DeviceSlots slots_;
};

// Sender between setup and connect: holds nothing; it attaches in connect.
class ShmPendingSend final : public PendingConnection {
 public:
  explicit ShmPendingSend(const ConnSpec& spec) : PendingConnection(ConnSide::Send, spec) {}

 protected:
  ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) override {
    const char* where = "shm connect send";
    const int peer = spec().peer.rank;
    ShmRecvInfo r;
    RINGCC_CHECK(unpackConnInfo(remote, "shm", kShmInfoVersion, ConnSide::Recv, &r, peer, where));
    r.name[sizeof(r.name) - 1] = '\0';
    // Both sides have this geometry (PendingConnection::connect checked the info's).
    const ConnGeometry g = connGeometry(spec());
    const bool onGpu = r.deviceSlots != 0;
    if (onGpu && spec().self.memory != MemoryKind::Cuda)
      return failPeer(ncclInvalidUsage, peer, where,
                      "info puts the slots in its GPU, which only a CUDA rank can reach");
    FifoLayout l = layoutFor(g, onGpu);
    // Watch the receiver before attaching: it is alive now (it just sent its info).
    ProcessWatch watch = watchPeer(spec(), r.recvPid);
    ShmSegment seg;
    RINGCC_CHECK(ShmSegment::attach(r.name, l.total, peer, &seg));
    // The segment was written by another process: it must hold the FIFO both sides agreed on
    // before any offset in it is used.
    auto* h = static_cast<ShmHeader*>(seg.base());
    if (h->magic != kShmMagic || h->version != kShmLayoutVersion ||
        h->flags != (onGpu ? kShmFlagDeviceSlots : 0) || h->nSlots != g.nSlots ||
        h->slotBytes != g.slotBytes || h->llSlotBytes != g.llSlotBytes ||
        h->controlOffset != l.controlOffset || h->slotsOffset != l.slotsOffset ||
        h->llSlotsOffset != l.llSlotsOffset)
      return failPeer(ncclInvalidUsage, peer, where,
                      "segment %s does not hold the FIFO its info describes", r.name);
    HostMapping device;
    RINGCC_CHECK(mapForKernels(spec(), seg, where, &device));
    DeviceSlots slots;
    if (onGpu)
      RINGCC_CHECK(DeviceSlots::open(r.ipcHandle, deviceSlotsBytes(g), peer, spec().channel, where,
                                     &slots));
    h->sendPid = static_cast<int32_t>(getpid());
    LOG_INFO(kLogShm | kLogInit, "shm: channel %d send to rank %d: attached %s%s", spec().channel,
             peer, r.name,
             onGpu             ? " (mapped for the GPU; slots in the peer's GPU, CUDA IPC)"
             : device.mapped() ? " (mapped for the GPU)"
                               : "");
    *conn = std::make_unique<ShmConnector>(ConnSide::Send, peer,
                                           ShmSide(std::move(seg), ConnSide::Send),
                                           std::move(watch), std::move(device), std::move(slots));
    return ncclSuccess;
  }
};

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const override {
    if (!sameHost(self, peer)) {
      if (why) *why = "not the same host";
      return false;
    }
    // CUDA ranks map the segment for their kernels; one of each kind share no communicator.
    if (self.memory != peer.memory) {
      if (why) *why = "one rank uses host memory, the other device memory";
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

 protected:
  ncclResult_t setupImpl(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                         std::unique_ptr<PendingConnection>* pending) override {
    if (side == ConnSide::Send) {
      ShmSendInfo s{};
      s.sendPid = static_cast<int32_t>(getpid());
      s.probeAddr = reinterpret_cast<uint64_t>(&kPeerReadProbe);
      s.probeValue = kPeerReadProbe;
      if (spec.self.memory == MemoryKind::Host) (void)mappedProbe(&s.probeRegion);
      RINGCC_CHECK(packConnInfo("shm", kShmInfoVersion, ConnSide::Send, s, info));
      *pending = std::make_unique<ShmPendingSend>(spec);
      return ncclSuccess;
    }
    const ConnGeometry g = connGeometry(spec);
    const bool onGpu = deviceSlotsFor(spec);
    FifoLayout l = layoutFor(g, onGpu);
    ShmSegment seg;
    RINGCC_CHECK(ShmSegment::create(l.total, spec.peer.rank, &seg));
    // A fresh segment reads as zeros: counters, waiters, sizes, closed flags and the LL lines'
    // flags start at 0.
    auto* h = static_cast<ShmHeader*>(seg.base());
    h->magic = kShmMagic;
    h->version = kShmLayoutVersion;
    h->flags = onGpu ? kShmFlagDeviceSlots : 0;
    h->nSlots = spec.nSlots;
    h->slotBytes = spec.slotBytes;
    h->llSlotBytes = spec.llSlotBytes;
    h->recvPid = static_cast<int32_t>(getpid());
    h->controlOffset = l.controlOffset;
    h->slotsOffset = l.slotsOffset;
    h->llSlotsOffset = l.llSlotsOffset;

    HostMapping device;
    RINGCC_CHECK(mapForKernels(spec, seg, "shm setup recv", &device));

    ShmRecvInfo r{};
    DeviceSlots slots;
    if (onGpu) {
      RINGCC_CHECK(DeviceSlots::allocate(g, spec.peer.rank, spec.channel, "shm setup recv", &slots,
                                         &r.ipcHandle));
      r.deviceSlots = 1;
    }
    std::snprintf(r.name, sizeof(r.name), "%s", seg.name());
    r.recvPid = h->recvPid;
    LOG_INFO(kLogShm | kLogInit, "shm: channel %d recv from rank %d: %s, %u x %u bytes (LL %u)%s",
             spec.channel, spec.peer.rank, seg.name(), spec.nSlots, spec.slotBytes,
             spec.llSlotBytes,
             onGpu             ? ", control mapped for the GPU, slots in this GPU (CUDA IPC)"
             : device.mapped() ? ", mapped for the GPU"
                               : "");
    // The pending side owns the segment from here on, also if packing the info fails.
    auto recv =
        std::make_unique<ShmPendingRecv>(spec, std::move(seg), std::move(device), std::move(slots));
    RINGCC_CHECK(packConnInfo("shm", kShmInfoVersion, ConnSide::Recv, r, info));
    *pending = std::move(recv);
    return ncclSuccess;
  }
};

}  // namespace

Transport& shmTransport() {
  static ShmTransport t;
  return t;
}

}  // namespace ringcc
