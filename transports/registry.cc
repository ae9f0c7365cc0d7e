// The list of transports, in order of preference. Adding a transport is one line here.
#include <string>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "transports/p2p/p2p_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_transport.h"

namespace ringcc {

std::span<const TransportEntry> transportRegistry() {
  static const TransportEntry kEntries[] = {
      {&p2pTransport(), "P2P_DISABLE", false},
      {&shmTransport(), "SHM_DISABLE", false},
      {&ucxTransport(), nullptr, true},
  };
  return kEntries;
}

Transport* findTransport(const char* name) {
  for (const TransportEntry& e : transportRegistry())
    if (std::string(e.transport->name()) == name) return e.transport;
  return nullptr;
}

void cleanUpAfterPeers(const PeerInfo& self, std::span<const PeerInfo> peers) {
  for (const PeerInfo& peer : peers) {
    if (sameProcess(self, peer)) continue;
    for (const TransportEntry& e : transportRegistry()) e.transport->cleanUpAfter(self, peer);
  }
}

ncclResult_t selectTransport(const PeerInfo& self, const PeerInfo& peer, Transport** out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "selectTransport", "out is NULL");
  *out = nullptr;
  bool forced = false;
  RINGCC_CHECK(netForced(&forced));
  std::string reasons;
  for (const TransportEntry& e : transportRegistry()) {
    std::string why;
    if (e.disableParam && paramInt(e.disableParam) != 0) {
      why = std::string("disabled by NCCL_") + e.disableParam;
    } else if (forced && !e.network) {
      why = "NCCL_NET=ucx forces the network";
    } else if (e.transport->canConnect(self, peer, &why)) {
      LOG_INFO(kLogInit, "rank %d -> rank %d: transport %s", self.rank, peer.rank,
               e.transport->name());
      *out = e.transport;
      return ncclSuccess;
    }
    reasons += std::string(e.transport->name()) + ": " + why + "; ";
  }
  return failPeer(ncclSystemError, peer.rank, "selectTransport",
                  "no transport connects rank %d (pid %d, host %016llx) with rank %d (pid %d, "
                  "host %016llx); tried %s",
                  self.rank, self.pid, static_cast<unsigned long long>(self.hostHash), peer.rank,
                  peer.pid, static_cast<unsigned long long>(peer.hostHash), reasons.c_str());
}

}  // namespace ringcc
