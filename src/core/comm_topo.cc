#include "src/core/comm_topo.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "src/base/log.h"
#include "src/base/param.h"
#include "src/core/comm.h"
#include "src/plan/ring_order.h"

namespace ringcc {

std::vector<RankPlace> rankPlaces(const HostTopology& topo, const std::vector<PeerInfo>& peers) {
  std::vector<uint64_t> hosts;
  std::vector<int> localCount;
  const std::vector<int> devices = rankDevices(topo.graph);
  std::vector<RankPlace> places(peers.size());
  for (size_t r = 0; r < peers.size(); ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), peers[r].hostHash);
    if (it == hosts.end()) {
      hosts.push_back(peers[r].hostHash);
      localCount.push_back(0);
      it = hosts.end() - 1;
    }
    const size_t h = static_cast<size_t>(it - hosts.begin());
    const int local = localCount[h]++;
    places[r].host = static_cast<int>(h);
    if (devices.empty()) continue;
    places[r].device = devices[size_t(local) % devices.size()];
    if (!topo.fromFile) {
      for (int d : devices)
        if (topo.graph.nodes[size_t(d)].type == TopoType::Cpu &&
            topo.graph.nodes[size_t(d)].numa == peers[r].numaNode)
          places[r].device = d;
    }
  }
  return places;
}

std::vector<RankPlace> blockPlaces(const TopoGraph& g, int nranks, int nhosts) {
  const std::vector<int> devices = rankDevices(g);
  if (nhosts <= 0 || nranks <= 0 || nranks % nhosts != 0 || devices.empty()) return {};
  const int perHost = nranks / nhosts;
  std::vector<RankPlace> places(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    places[size_t(r)] = RankPlace{r / perHost, devices[size_t(r % perHost) % devices.size()]};
  return places;
}

ncclResult_t treesForRing(const std::vector<int>& ring, const std::vector<RankPlace>& places,
                          DoubleTree* out) {
  std::vector<std::vector<int>> hosts;
  std::vector<int> seen;  // host ids in ring order
  for (int r : ring) {
    const int host = places[size_t(r)].host;
    auto it = std::find(seen.begin(), seen.end(), host);
    if (it == seen.end()) {
      seen.push_back(host);
      hosts.emplace_back();
      it = seen.end() - 1;
    }
    hosts[size_t(it - seen.begin())].push_back(r);
  }
  return buildDoubleTree(hosts, out);
}

CommTopology commTopology(const HostTopology& topo, const std::vector<PeerInfo>& peers,
                          int maxChannels) {
  CommTopology out;
  maxChannels = std::max(1, maxChannels);
  bool alike = true;
  for (const PeerInfo& p : peers) alike = alike && p.topoHash == topo.hash;
  std::string error;
  out.places = rankPlaces(topo, peers);
  const std::vector<RankPlace>& places = out.places;
  if (alike) {
    int nHosts = 0;
    for (const RankPlace& p : places) nHosts = std::max(nHosts, p.host + 1);
    const std::vector<const TopoGraph*> graphs(size_t(nHosts), &topo.graph);
    alike = searchRings(graphs, places, maxChannels, &out.search, &error);
  }
  if (alike) {
    char line[160];
    std::snprintf(line, sizeof(line), "%d channels of %.1f GB/s each, type %s%s (%s)",
                  out.search.nChannels(), out.search.bwPerChannel, linkTypeName(out.search.worst),
                  out.search.crossesHosts ? "/NET" : "",
                  topo.fromFile ? ("NCCL_TOPO_FILE " + topo.file).c_str() : "detected topology");
    out.how = line;
  } else {
    out.search = RingSearch{};
    out.search.rings.push_back(hostGroupedRing(peers));
    out.how = error.empty() ? "hosts report different topologies: ranks grouped by host"
                            : "search failed (" + error + "): ranks grouped by host";
  }
  for (int c = 0; c < maxChannels; ++c)
    out.rings.push_back(out.search.rings[size_t(c) % out.search.rings.size()]);
  // NCCL's double binary trees (src/sched/dbtree.h) over each host's chain in ring order.
  if (treesForRing(out.rings[0], places, &out.trees) != ncclSuccess) out.trees = DoubleTree{};
  return out;
}

ncclResult_t setupCommTopology(ncclComm* comm, const HostTopology& topo) {
  // NCCL_MAX_NCHANNELS as tuneConfigFromEnv clamps it (1..32), read quietly: the engine reads
  // it again through the tuner, which WARNs once about a value out of range.
  const int maxChannels = static_cast<int>(std::clamp<int64_t>(paramInt("MAX_NCHANNELS"), 1, 32));
  comm->topo = commTopology(topo, comm->peers, maxChannels);
  const CommTopology& t = comm->topo;
  if (comm->rank == 0) {
    LOG_INFO(kLogInit | kLogGraph, "rings: %s", t.how.c_str());
    RingSearch used;
    used.rings = t.rings;
    for (const std::string& line : ringLines(used))
      LOG_INFO(kLogInit | kLogGraph, "%s", line.c_str());
    const std::string dump = paramString("TOPO_DUMP_FILE");
    if (!dump.empty()) {
      // A dump that cannot be written is worth a WARN, not a failed init (NCCL skips it too).
      std::ofstream out(dump, std::ios::trunc);
      out << writeXml(topo.xml);
      if (out)
        LOG_INFO(kLogGraph | kLogEnv, "topology written to %s", dump.c_str());
      else
        LOG_WARN("NCCL_TOPO_DUMP_FILE=%s: cannot write the file (%s); the topology is not dumped",
                 dump.c_str(), std::strerror(errno));
    }
  }
  // Every rank: where it runs, and its neighbours on each channel's ring, as NCCL's "Ring 00 : 3 ->
  // 0 -> 1".
  const RankPlace& me = t.places[size_t(comm->rank)];
  LOG_INFO(kLogInit | kLogGraph, "topology: rank %d on host %d, NUMA node %d, device %s",
           comm->rank, me.host, comm->peers[size_t(comm->rank)].numaNode,
           me.device >= 0 ? topo.graph.label(me.device).c_str() : "none");
  for (size_t c = 0; c < t.rings.size(); ++c)
    LOG_INFO(kLogInit | kLogGraph, "Ring %02zu : %d -> %d -> %d", c,
             ringPrev(t.rings[c], comm->rank), comm->rank, ringNext(t.rings[c], comm->rank));
  if (!t.trees.tree[0].empty())
    LOG_INFO(kLogInit | kLogGraph, "Trees %s", describeTree(t.trees, comm->rank).c_str());
  return ncclSuccess;
}

}  // namespace ringcc
