// The connections of one communicator: per channel, the ring pair (send to the next rank,
// receive from the previous one) and point-to-point connections to any peer, each made on
// first use.
//
// Making a connection is a two-sided exchange over the bootstrap: the receiver sets up the
// FIFO (transports/transport.h) and sends the sender its blob; the sender attaches. Every
// rank that needs a connection needs it in the same batch as its peer does, because both
// derive the need from matching operations (a ring step, a send matched by a receive). A peer
// that does not come (it never calls the operation, or it died) ends the wait at the caller's
// deadline or stop flag. Sends of blobs go first, then receives, so two ranks that need each
// other both ways do not wait on each other.
//
// Used by the engine thread only; not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "src/sched/program.h"
#include "transports/transport.h"

struct ncclComm;

namespace ringcc {

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
  // Reads the geometry of both connection kinds once, here (at communicator init), as NCCL
  // reads its parameters once: every connection the table makes later gets it, whatever the
  // environment says by then.
  explicit ConnectionTable(ncclComm* comm);

  // The geometry of this table's connections of `kind`. Programs size their slices from it,
  // so that every slice fits a slot of the connections it uses.
  const ConnSpec& spec(uint8_t kind) const { return kind == kPortP2p ? p2pSpec_ : ringSpec_; }

  // Makes every connection in `keys` that does not exist yet. Collective with the peers
  // named in the missing keys. Waiting for a peer's offer ends with ncclRemoteError once *stop
  // is set (may be null) or after timeoutMs (or BOOTSTRAP_TIMEOUT, if shorter).
  ncclResult_t ensure(const std::vector<PortKey>& keys, const std::atomic<bool>* stop = nullptr,
                      int64_t timeoutMs = INT64_MAX);

  // Closes every connection: the peers see PeerState::Closed, and any of them still waiting
  // on one of them gets an error instead of waiting on.
  void closeAll() { conns_.clear(); }

  // The connector behind a key; nullptr if it was never made.
  const Connector* find(const PortKey& key) const;

  size_t size() const { return conns_.size(); }

 private:
  ncclResult_t connectionSpec(const PortKey& key, ConnSpec* spec) const;

  ncclComm* comm_;
  ConnSpec ringSpec_;
  ConnSpec p2pSpec_;
  std::map<PortKey, std::unique_ptr<Connector>> conns_;
};

}  // namespace ringcc
