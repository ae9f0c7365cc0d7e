#include "src/exec/engine_setup.h"

#include <string>
#include <type_traits>
#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "src/plan/ring_order.h"

namespace ringcc {

namespace {

// What must be the same on every rank of a communicator (read once, at init).
struct SharedSettings {
  ConnGeometry ring, p2p;  // NCCL_BUFFSIZE
  int32_t minChannels, maxChannels;
  uint32_t protocols;
  uint32_t algos;
  uint64_t chunkBytes;
};
static_assert(std::is_trivially_copyable_v<SharedSettings>);

SharedSettings sharedSettings(const ConnectionTable& conns, const TuneConfig& tune) {
  SharedSettings s{};
  s.ring = connGeometry(conns.spec(kPortRing));
  s.p2p = connGeometry(conns.spec(kPortP2p));
  s.minChannels = tune.minChannels;
  s.maxChannels = tune.maxChannels;
  s.protocols = tune.protocols;
  s.algos = tune.algos;
  s.chunkBytes = tune.chunkBytes;
  return s;
}

// The first setting in which a and b differ, and both values as text; false if none.
bool firstDifference(const SharedSettings& a, const SharedSettings& b, const char** name,
                     std::string* va, std::string* vb) {
  auto geometry = [](const ConnGeometry& g) {
    return std::to_string(g.nSlots) + " slots of " + std::to_string(g.slotBytes) + " bytes";
  };
  if (a.ring.nSlots != b.ring.nSlots || a.ring.slotBytes != b.ring.slotBytes ||
      a.ring.llSlotBytes != b.ring.llSlotBytes || a.p2p.slotBytes != b.p2p.slotBytes) {
    *name = "NCCL_BUFFSIZE";
    *va = geometry(a.ring);
    *vb = geometry(b.ring);
  } else if (a.minChannels != b.minChannels) {
    *name = "NCCL_MIN_NCHANNELS";
    *va = std::to_string(a.minChannels);
    *vb = std::to_string(b.minChannels);
  } else if (a.maxChannels != b.maxChannels) {
    *name = "NCCL_MAX_NCHANNELS";
    *va = std::to_string(a.maxChannels);
    *vb = std::to_string(b.maxChannels);
  } else if (a.protocols != b.protocols) {
    auto list = [](uint32_t mask) {
      std::string t;
      for (int p = 0; p < kNumProtocols; ++p)
        if (mask & (1u << p)) t += std::string(t.empty() ? "" : ",") + protocolName(Protocol(p));
      return t;
    };
    *name = "NCCL_PROTO";
    *va = list(a.protocols);
    *vb = list(b.protocols);
  } else if (a.algos != b.algos) {
    auto list = [](uint32_t mask) {
      std::string t;
      for (int x = 0; x < kNumAlgos; ++x)
        if (mask & algoBit(Algo(x))) t += std::string(t.empty() ? "" : ",") + algoName(Algo(x));
      return t;
    };
    *name = "NCCL_ALGO";
    *va = list(a.algos);
    *vb = list(b.algos);
  } else if (a.chunkBytes != b.chunkBytes) {
    *name = "NCCL_CHUNKSIZE";
    *va = std::to_string(a.chunkBytes);
    *vb = std::to_string(b.chunkBytes);
  } else {
    return false;
  }
  return true;
}

}  // namespace

PlanContext planContext(const ncclComm* comm, const ConnectionTable& conns) {
  PlanContext c;
  c.nranks = comm->nranks;
  c.rank = comm->rank;
  c.ring = connGeometry(conns.spec(kPortRing));
  c.p2p = connGeometry(conns.spec(kPortP2p));
  c.tune = tuneConfigFromEnv();
  c.tune.protocols = protocolsConnectionsRun(c.tune.protocols, c.ring, comm->rank);
  c.links = commLinkFigures(comm);
  // The double binary trees from the topology setup at init (over channel 0's ring order; the
  // same on every rank); the Tree algorithm runs over them.
  c.trees = comm->topo.trees;
  // Each channel's ring, from the topology search at init (src/core/comm_topo.h).
  c.rings = comm->topo.rings;
  return c;
}

uint32_t protocolsConnectionsRun(uint32_t allowed, const ConnGeometry& ring, int rank) {
  if (ring.llSlotBytes != 0 || !(allowed & (1u << kProtoLL))) return allowed;
  uint32_t left = allowed & ~(1u << kProtoLL);
  if (left == 0) {
    // Every rank makes the same connections, so every rank lands here alike.
    if (rank == 0)
      LOG_WARN("NCCL_PROTO allows only LL, which this communicator's connections cannot run "
               "(it uses the network: no LL memory, docs/transports.md); using Simple");
    left = 1u << kProtoSimple;
  }
  LOG_INFO(kLogTuning | kLogInit, "protocols: LL left out (the connections have no LL memory)");
  return left;
}

LinkFigures commLinkFigures(const ncclComm* comm) {
  return comm->memKind == MemoryKind::Cuda ? deviceLinkFigures(comm->peers, comm->topo.search)
                                           : linkFiguresFor(comm->peers);
}

ncclResult_t checkSharedSettings(ncclComm* comm, const ConnectionTable& conns,
                                 const TuneConfig& tune) {
  if (comm->nranks == 1) return ncclSuccess;
  std::vector<SharedSettings> all(comm->nranks);
  const SharedSettings mine = sharedSettings(conns, tune);
  all[comm->rank] = mine;
  RINGCC_CHECK(comm->bootstrap->allGather(all.data(), sizeof(SharedSettings)));
  for (int r = 0; r < comm->nranks; ++r) {
    const char* name = nullptr;
    std::string here, there;
    if (!firstDifference(mine, all[r], &name, &here, &there)) continue;
    return fail(ncclInvalidUsage, "init",
                "%s differs between ranks: rank %d has %s, rank %d has %s; set it alike on "
                "every rank (ranks cut their messages by it)",
                name, comm->rank, here.c_str(), r, there.c_str());
  }
  return ncclSuccess;
}

ncclResult_t connectFirstRing(ncclComm* comm, ConnectionTable& conns) {
  if (comm->nranks == 1) return ncclSuccess;
  // Channel 0's ring neighbours, in the planner's ring order (ranks grouped by host for a
  // communicator made without a topology, as some tests make them).
  const std::vector<int> ring =
      comm->topo.rings.empty() ? hostGroupedRing(comm->peers) : comm->topo.rings[0];
  int next = ringNext(ring, comm->rank);
  int prev = ringPrev(ring, comm->rank);
  return conns.ensure(
      {PortKey{0, kPortRing, prev, kPortRecv}, PortKey{0, kPortRing, next, kPortSend}});
}

void planPortKeys(const Plan& plan, std::vector<PortKey>* keys) {
  keys->clear();
  for (size_t j = 0; j < plan.nJobs; ++j) {
    const PlanJob& job = plan.jobs[j];
    for (int i = 0; i < job.program->nPorts; ++i) {
      const Port& p = job.program->ports[i];
      keys->push_back(PortKey{job.channel, p.kind, p.peer, p.dir});
    }
  }
}

ncclResult_t bindPorts(const ConnectionTable& conns, const PlanJob& job,
                       std::vector<ConnectorView>* views,
                       std::vector<const Connector*>* connectors) {
  const Program& g = *job.program;
  views->resize(g.nPorts);
  connectors->resize(g.nPorts);
  for (int i = 0; i < g.nPorts; ++i) {
    const Port& p = g.ports[i];
    const Connector* conn = conns.find(PortKey{job.channel, p.kind, p.peer, p.dir});
    if (conn == nullptr)
      return fail(ncclInternalError, job.name, "no connection for port %d (peer %d)", i, p.peer);
    (*views)[i] = conn->view();
    (*connectors)[i] = conn;
  }
  return ncclSuccess;
}

}  // namespace ringcc
