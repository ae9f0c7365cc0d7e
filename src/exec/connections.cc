#include "src/exec/connections.h"

#include <algorithm>

#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/log.h"
#include "src/core/param.h"

namespace ringcc {
namespace {

// Bootstrap tags of connection blobs: one per (kind, channel). The direction needs no tag
// bit: the two directions between a pair travel as messages from different senders.
constexpr int kTagConnBase = 0x43000000;
int connTag(const PortKey& key) { return kTagConnBase | (key.kind << 16) | key.channel; }

// What the receiver sends the sender: its FIFO geometry and the transport's blob.
struct ConnOffer {
  uint32_t nSlots;
  uint32_t slotBytes;
  ConnBlob blob;
};

// FIFO geometry of a new connection of `kind` (PortKind), from NCCL_BUFFSIZE now.
ConnSpec connSpecFor(uint8_t kind) {
  // Ring connections carry every collective's bulk data and get NCCL_BUFFSIZE; point-to-point
  // connections exist per peer, so they get a quarter of it to keep all-to-all's footprint
  // (2 (n-1) connections per rank) in check.
  int64_t bytes = paramInt("BUFFSIZE");
  if (kind == kPortP2p) bytes /= 4;
  return connSpecForBuffer(bytes);
}

}  // namespace

ConnectionTable::ConnectionTable(ncclComm* comm)
    : comm_(comm), ringSpec_(connSpecFor(kPortRing)), p2pSpec_(connSpecFor(kPortP2p)) {}

ncclResult_t ConnectionTable::connectionSpec(const PortKey& key, ConnSpec* spec) const {
  *spec = this->spec(key.kind);
  spec->channel = key.channel;
  spec->self = comm_->peers[comm_->rank];
  spec->peer = comm_->peers[key.peer];
  return checkConnSpec(*spec, "connect");
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

  // Receivers first: set up, and offer the blob to the sending peer.
  for (const PortKey& k : missing) {
    if (k.dir != kPortRecv) continue;
    if (k.peer == comm_->rank)
      return fail(ncclInternalError, "connect", "a program asks for a connection to itself");
    ConnSpec spec;
    RINGCC_CHECK(connectionSpec(k, &spec));
    Transport* transport = nullptr;
    RINGCC_CHECK(selectTransport(spec.self, spec.peer, &transport));
    ConnOffer offer{};
    std::unique_ptr<Connector> conn;
    RINGCC_CHECK(transport->setupRecv(spec, &offer.blob, &conn));
    offer.nSlots = spec.nSlots;
    offer.slotBytes = spec.slotBytes;
    RINGCC_CHECK(comm_->bootstrap->send(k.peer, connTag(k), &offer, sizeof(offer)));
    LOG_INFO(kLogInit, "channel %d %s: recv from rank %d via %s (%u x %u B)", k.channel,
             k.kind == kPortRing ? "ring" : "p2p", k.peer, transport->name(), spec.nSlots,
             spec.slotBytes);
    conns_[k] = std::move(conn);
  }
  // Then senders: take the receiver's offer and attach.
  for (const PortKey& k : missing) {
    if (k.dir != kPortSend) continue;
    ConnSpec spec;
    RINGCC_CHECK(connectionSpec(k, &spec));
    ConnOffer offer{};
    ncclResult_t rc =
        comm_->bootstrap->recv(k.peer, connTag(k), &offer, sizeof(offer), stop, timeoutMs);
    if (rc != ncclSuccess) {
      // Stopped on purpose (abort, revoke): whoever stopped us has said why.
      if ((stop && stop->load()) || comm_->abortFlag.load()) return rc;
      return failPeer(
          rc, k.peer, "connect",
          "channel %d %s: no connection offer from peer %d within %lld ms "
          "(NCCL_TIMEOUT or NCCL_BOOTSTRAP_TIMEOUT) or its bootstrap link ended; "
          "has it joined this operation?",
          k.channel, k.kind == kPortRing ? "ring" : "p2p", k.peer,
          static_cast<long long>(std::min<int64_t>(timeoutMs, comm_->bootstrap->timeoutMs())));
    }
    spec.nSlots = offer.nSlots;
    spec.slotBytes = offer.slotBytes;
    RINGCC_CHECK(checkConnSpec(spec, "connect"));
    Transport* transport = findTransport(offer.blob.transport);
    if (transport == nullptr)
      return failPeer(ncclRemoteError, k.peer, "connect", "peer offered unknown transport '%.8s'",
                      offer.blob.transport);
    std::unique_ptr<Connector> conn;
    RINGCC_CHECK(transport->connectSend(spec, offer.blob, &conn));
    LOG_INFO(kLogInit, "channel %d %s: send to rank %d via %s", k.channel,
             k.kind == kPortRing ? "ring" : "p2p", k.peer, transport->name());
    conns_[k] = std::move(conn);
  }
  return ncclSuccess;
}

const Connector* ConnectionTable::find(const PortKey& key) const {
  auto it = conns_.find(key);
  return it == conns_.end() ? nullptr : it->second.get();
}

}  // namespace ringcc
