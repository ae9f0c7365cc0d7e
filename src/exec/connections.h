// The connections of one communicator: per channel, the ring pair (send to the next rank,
// receive from the previous one) and point-to-point connections to any peer, each made on
// first use.
//
// Making a connection is a two-way exchange over the bootstrap (transport contract v2,
// transports/transport.h): each side sets up its half and sends the peer its connection info
// (the receiver's describes the FIFO it allocated, the sender's who it is and what it
// expects), then takes the peer's info and connects. Every rank that needs a connection needs
// it in the same batch as its peer does, because both derive the need from matching
// operations (a ring step, a send matched by a receive). A peer that does not come (it never
// calls the operation, or it died) ends the wait at the caller's deadline or stop flag. All
// infos of a batch are sent before any is received, so two ranks that need each other, both
// ways or several times, never wait on each other.
//
// Used by the engine thread only; not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/program.h"
#include "nccl.h"
#include "transports/transport.h"

struct ncclComm;

namespace ringcc {

class Bootstrap;

// One end of one connection, as a Program's port names it.
struct PortKey {
  int channel;
  uint8_t kind;  // PortKind
  int peer;
  uint8_t dir;  // PortDir, seen from this rank
  auto tie() const { return std::tie(channel, kind, peer, dir); }
  bool operator<(const PortKey& o) const { return tie() < o.tie(); }
};

class ConnectionTable {
 public:
  // Reads the geometry of both connection kinds (Simple and LL slots) once, here (at
  // communicator init), as NCCL
  // reads its parameters once: every connection the table makes later gets it, whatever the
  // environment says by then.
  explicit ConnectionTable(ncclComm* comm);

  // The geometry of this table's connections of `kind`. Programs size their slices from it,
  // so that every slice fits a slot of the connections it uses.
  const ConnSpec& spec(uint8_t kind) const { return kind == kPortP2p ? p2pSpec_ : ringSpec_; }

  // Makes every connection in `keys` that does not exist yet. Collective with the peers
  // named in the missing keys. Waiting for a peer's info ends with ncclRemoteError once *stop
  // is set (may be null) or after timeoutMs (or BOOTSTRAP_TIMEOUT, if shorter).
  ncclResult_t ensure(const std::vector<PortKey>& keys, const std::atomic<bool>* stop = nullptr,
                      int64_t timeoutMs = INT64_MAX);

  // Closes every connection: the peers see PeerState::Closed, and any of them still waiting
  // on one of them gets an error instead of waiting on. After a failed operation (`failed`),
  // what was published but not yet delivered no longer matters, so no connection waits for
  // its peer to take it (Connector::discard).
  void closeAll(bool failed = false) {
    CloseScope scope;
    for (auto& entry : conns_) {
      if (failed) entry.second->discard();
      entry.second->close(scope);
    }
    conns_.clear();
  }

  template <typename F>
  void forEach(F&& f) const {
    for (const auto& entry : conns_) f(*entry.second);
  }

  // Tells every peer why this side is about to close (FifoControl::failReason).
  void markFailed(uint32_t reason) {
    for (auto& entry : conns_)
      std::atomic_ref<uint32_t>(entry.second->view().control->failReason)
          .store(reason, std::memory_order_release);
  }

  // The connector behind a key; nullptr if it was never made.
  const Connector* find(const PortKey& key) const;

  size_t size() const { return conns_.size(); }
  // Bytes of FIFO memory this rank's side of every connection maps: control block, Simple
  // and LL slots (the peer maps the same memory, or for a network connection its own copy).
  uint64_t mappedBytes() const;

 private:
  // The spec of the connection `key` names: this table's geometry, the channel, both ends.
  ConnSpec connectionSpec(const PortKey& key) const;

  ncclComm* comm_;
  ConnSpec ringSpec_;
  ConnSpec p2pSpec_;
  std::map<PortKey, std::unique_ptr<Connector>> conns_;
};

// Bootstrap tag of the info that the `madeBy` side of the connection `key` names sends to the
// other side. Both sides of a connection compute the same tag for the same message.
int connInfoTag(const PortKey& key, ConnSide madeBy);

// Ships a connection info to `peer` as two bootstrap messages under one tag: its header
// (ConnInfoHeader), then its payload unless it is empty.
ncclResult_t sendConnInfo(Bootstrap& bootstrap, int peer, int tag, const ConnInfo& info);

// Takes the next info from `peer` under `tag`, checking its header before it sizes anything
// from it. Waits like Bootstrap::recv with a stop flag and deadline.
ncclResult_t recvConnInfo(Bootstrap& bootstrap, int peer, int tag, ConnInfo* info,
                          const std::atomic<bool>* stop = nullptr, int64_t timeoutMs = INT64_MAX);

}  // namespace ringcc
