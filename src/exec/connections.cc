#include "src/exec/connections.h"

#include <algorithm>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "transports/ucx/ucx_transport.h"

namespace ringcc {
namespace {

// Bootstrap tags of connection infos: one per (side that made it, kind, channel). The side bit
// is needed because infos now travel both ways: between ranks A and B on one channel, A's
// receiver info (for B -> A) and A's sender info (for A -> B) both go from A to B.
constexpr int kTagConnBase = 0x43000000;

const char* kindName(uint8_t kind) { return kind == kPortRing ? "ring" : "p2p"; }

// FIFO geometry of ring connections, from NCCL_BUFFSIZE now (a value out of range is clamped
// with a WARN), and of point-to-point connections: those exist per peer, so they get a quarter
// of it to keep all-to-all's footprint (2 (n-1) connections per rank) in check. LL carries
// small messages only, so every connection gets the same small LL slots (nSlots x 8 KiB).
// LL needs every line of a slot in the receiver's memory as the sender writes it, which a
// network transport cannot give (its proxy sees tail move, not which protocol filled the slot).
// So a communicator that uses the network anywhere has no LL memory on any connection, and
// the planner, which sees one geometry per communicator (the same on every rank), plans Simple
// instead of LL. Every rank computes the same answer from the same PeerInfos and NCCL_NET.
bool usesNetwork(const ncclComm* comm) {
  bool forced = false;
  if (netForced(&forced) != ncclSuccess || forced) return comm->nranks > 1;
  for (const PeerInfo& p : comm->peers)
    if (!sameHost(p, comm->peers[0])) return true;
  return false;
}

// Network communicators default to NCCL's 4 MiB (8 x 512 KiB): each slot is one network
// message, and over TCP 128 KiB messages carry a third of what 16 MiB ones do (ucx_perftest
// tag_bw on a veth pair: 223 against 651 MiB/s). Across the pair, alternating runs on a loaded
// machine gave 0.19-0.77 GB/s busbw at 16-64 MiB with 4 MiB against 0.25-0.62 with 1 MiB,
// 4 MiB ahead in 2 of 3 (docs/benchmarks.md). An explicit NCCL_BUFFSIZE wins.
constexpr int64_t kNetBuffSize = int64_t{4} << 20;

ConnSpec ringConnSpec(bool network) {
  ConnSpec spec =
      network && !paramEnv("BUFFSIZE") ? connSpecForBuffer(kNetBuffSize) : defaultConnSpec();
  spec.llSlotBytes = network ? 0 : kDefaultLlSlotBytes;
  return spec;
}

ConnSpec p2pConnSpec(const ConnSpec& ring) {
  ConnSpec spec = connSpecForBuffer(static_cast<int64_t>(connSlotBytes(ring) / 4));
  spec.llSlotBytes = ring.llSlotBytes;
  return spec;
}

}  // namespace

int connInfoTag(const PortKey& key, ConnSide madeBy) {
  return kTagConnBase | (static_cast<int>(madeBy) << 20) | (key.kind << 16) | key.channel;
}

ncclResult_t sendConnInfo(Bootstrap& bootstrap, int peer, int tag, const ConnInfo& info) {
  ConnInfoHeader h = connInfoHeader(info);
  RINGCC_CHECK(bootstrap.send(peer, tag, &h, sizeof(h)));
  if (info.payload.empty()) return ncclSuccess;
  return bootstrap.send(peer, tag, info.payload.data(), info.payload.size());
}

ncclResult_t recvConnInfo(Bootstrap& bootstrap, int peer, int tag, ConnInfo* info,
                          const std::atomic<bool>* stop, int64_t timeoutMs) {
  ConnInfoHeader h;
  RINGCC_CHECK(bootstrap.recv(peer, tag, &h, sizeof(h), stop, timeoutMs));
  RINGCC_CHECK(connInfoFromHeader(h, peer, info));
  if (info->payload.empty()) return ncclSuccess;
  // Sent right after its header under the same tag, so it is the next message of that tag.
  return bootstrap.recv(peer, tag, info->payload.data(), info->payload.size(), stop, timeoutMs);
}

ConnectionTable::ConnectionTable(ncclComm* comm)
    : comm_(comm), ringSpec_(ringConnSpec(usesNetwork(comm))), p2pSpec_(p2pConnSpec(ringSpec_)) {
  if (ringSpec_.llSlotBytes == 0)
    LOG_INFO(kLogInit | kLogNet, "connections: the network is used, so no LL (Simple instead)");
}

ConnSpec ConnectionTable::connectionSpec(const PortKey& key) const {
  ConnSpec spec = this->spec(key.kind);
  spec.channel = key.channel;
  spec.self = comm_->peers[comm_->rank];
  spec.peer = comm_->peers[key.peer];
  return spec;  // Transport::setup checks it
}

ncclResult_t ConnectionTable::ensure(const std::vector<PortKey>& keys,
                                     const std::atomic<bool>* stop, int64_t timeoutMs) {
  std::vector<PortKey> missing;
  for (const PortKey& k : keys)
    if (!conns_.count(k) && std::find_if(missing.begin(), missing.end(), [&](const PortKey& m) {
                              return !(m < k) && !(k < m);
                            }) == missing.end())
      missing.push_back(k);
  if (missing.empty()) return ncclSuccess;
  std::sort(missing.begin(), missing.end());

  // First every side sets up its half and sends its info. A half that is never connected
  // (a later failure returns early) releases what it set up, which the peer sees as a close.
  struct Half {
    PortKey key;
    ConnSide side;
    std::unique_ptr<PendingConnection> pending;
  };
  std::vector<Half> halves;
  halves.reserve(missing.size());
  for (const PortKey& k : missing) {
    if (k.peer == comm_->rank)
      return fail(ncclInternalError, "connect", "a program asks for a connection to itself");
    ConnSide side = k.dir == kPortRecv ? ConnSide::Recv : ConnSide::Send;
    const ConnSpec spec = connectionSpec(k);
    Transport* transport = nullptr;
    RINGCC_CHECK(selectTransport(spec.self, spec.peer, &transport));
    ConnInfo info;
    std::unique_ptr<PendingConnection> pending;
    RINGCC_CHECK(transport->setup(side, spec, &info, &pending));
    RINGCC_CHECK(sendConnInfo(*comm_->bootstrap, k.peer, connInfoTag(k, side), info));
    LOG_INFO(kLogInit, "channel %d %s: %s rank %d via %s (%u x %u B, LL %u B)", k.channel,
             kindName(k.kind), side == ConnSide::Recv ? "recv from" : "send to", k.peer,
             transport->name(), spec.nSlots, spec.slotBytes, spec.llSlotBytes);
    halves.push_back(Half{k, side, std::move(pending)});
  }
  // Then every side takes its peer's info and connects.
  for (Half& h : halves) {
    const PortKey& k = h.key;
    ConnSide other = h.side == ConnSide::Recv ? ConnSide::Send : ConnSide::Recv;
    ConnInfo remote;
    ncclResult_t rc =
        recvConnInfo(*comm_->bootstrap, k.peer, connInfoTag(k, other), &remote, stop, timeoutMs);
    if (rc != ncclSuccess) {
      // Stopped on purpose (abort, revoke): whoever stopped us has said why.
      if ((stop && stop->load()) || comm_->abortFlag.load()) return rc;
      return failPeer(
          rc, k.peer, "connect",
          "channel %d %s: no connection info from peer %d's %s side within %lld ms "
          "(NCCL_TIMEOUT or NCCL_BOOTSTRAP_TIMEOUT) or its bootstrap link ended; "
          "has it joined this operation?",
          k.channel, kindName(k.kind), k.peer, connSideName(other),
          static_cast<long long>(std::min<int64_t>(timeoutMs, comm_->bootstrap->timeoutMs())));
    }
    std::unique_ptr<Connector> conn;
    RINGCC_CHECK(h.pending->connect(remote, &conn));
    h.pending.reset();
    LOG_INFO(kLogInit, "channel %d %s: %s rank %d connected via %s", k.channel, kindName(k.kind),
             h.side == ConnSide::Recv ? "recv from" : "send to", k.peer, conn->transportName());
    conns_[k] = std::move(conn);
  }
  return ncclSuccess;
}

const Connector* ConnectionTable::find(const PortKey& key) const {
  auto it = conns_.find(key);
  return it == conns_.end() ? nullptr : it->second.get();
}

uint64_t ConnectionTable::mappedBytes() const {
  uint64_t bytes = 0;
  for (const auto& entry : conns_) {
    const ConnectorView v = entry.second->view();
    bytes += fifoControlBytes(v.nSlots) + uint64_t{v.nSlots} * v.slotBytes;
    if (v.llSlots != nullptr) bytes += uint64_t{v.nSlots} * v.llSlotBytes;
  }
  return bytes;
}

}  // namespace ringcc
