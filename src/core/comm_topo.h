// The topology part of communicator init: where each rank runs, which rings every channel
// uses, and the trees, all computed from what every rank allgathered (its PeerInfo:
// host, NUMA node, topology hash) so that every rank computes the same answer.
//
// Each host's part of a ring is searched on the local graph (detected, or NCCL_TOPO_FILE),
// and hosts follow in order of their lowest rank. When all ranks report the same topology
// hash, every host looks like this one and every rank searches alike. When hashes differ
// (hosts of different shapes) a rank cannot search another host's graph, so the rings fall
// back to ranks grouped by host in rank order, which every rank can compute (INFO says so).
#pragma once

#include <string>
#include <vector>

#include "src/sched/dbtree.h"
#include "src/topo/detect.h"
#include "src/topo/search.h"
#include "transports/transport.h"

struct ncclComm;

namespace ringcc {

struct CommTopology {
  std::vector<RankPlace> places;        // where each rank runs (its host, its device)
  RingSearch search;                    // the rings found (search.rings: one per channel found)
  std::vector<std::vector<int>> rings;  // per channel the communicator uses (cycled to maxChannels)
  DoubleTree trees;
  std::string how;  // one line: how the rings were chosen
};

// Where each rank runs: its host (index by first appearance of its host hash) and its device
// in `topo`'s graph: with NCCL_TOPO_FILE, the host's i-th rank takes device i mod the number
// of devices (GPUs if the file has any, else CPUs); detected, the CPU of its NUMA node.
std::vector<RankPlace> rankPlaces(const HostTopology& topo, const std::vector<PeerInfo>& peers);

// Pure: `nranks` ranks spread over `nhosts` hosts like `g` in blocks (host h holds ranks
// h*n/H ...), the i-th rank of a host on device i mod the number of devices: the layouts
// ringcc-topo shows. Empty if nranks is not a positive multiple of nhosts or g has no device.
std::vector<RankPlace> blockPlaces(const TopoGraph& g, int nranks, int nhosts);

// The double binary trees over rings[0]: each host's ranks in ring order, hosts in ring
// order (host of rank r: places[r].host).
ncclResult_t treesForRing(const std::vector<int>& ring, const std::vector<RankPlace>& places,
                          DoubleTree* out);

// Pure: rings and trees for `peers`, given this rank's view of its host.
CommTopology commTopology(const HostTopology& topo, const std::vector<PeerInfo>& peers,
                          int maxChannels);

// Init: computes comm->topo from comm->peers, logs the channels and trees at INFO (GRAPH and
// INIT) as NCCL does, and writes NCCL_TOPO_DUMP_FILE on rank 0.
ncclResult_t setupCommTopology(ncclComm* comm, const HostTopology& topo);

}  // namespace ringcc
