// Ring search: which order the ranks of a communicator take around each channel's ring.
// Pure: graphs and the rank -> (host, device) map in, rings out; the same answer on every
// rank that asks with the same input.
//
// Inside a host the ranks of one device (a GPU, or a NUMA node on a host without GPUs) sit
// next to each other, in rank order; the search orders the devices. Across hosts the ring
// runs through the hosts in order of their lowest rank, each host's ranks in one piece, so a
// ring crosses each host boundary once per direction:
//
//      host 0                 host 1
//   NIC -> d0 -> d1 -> d2 ... NIC -> d0 -> d1 -> d2 ...
//    ^   (enters and leaves  |  through the same NIC)     |
//    +----------------------- network --------------------+
//
// Each channel's ring uses `speed` GB/s of every link on its routes (routes are the widest
// paths of the graph; a GPU forwards to a NIC over NVLink, NCCL's PXN, and forwards nothing
// else). For each candidate speed (NCCL's list, from 60 GB/s down) the search packs as many
// rings as the links' bandwidth and maxChannels allow, channel c entering and leaving host
// through NIC c mod nNICs; it keeps the speed with the most total bandwidth (speed x
// channels), the higher speed on a tie. Devices are tried in order of route bandwidth, so
// NVLink/NVSwitch beats PCIe beats the socket link beats the network.
#pragma once

#include <string>
#include <vector>

#include "src/topo/graph.h"

namespace ringcc {

struct RankPlace {
  int host = 0;     // index into the graphs
  int device = -1;  // node of that host's graph the rank runs on (a GPU or a CPU)
};

struct RingSearch {
  std::vector<std::vector<int>> rings;  // per channel: rings[c][i] = rank at position i
  double bwPerChannel = 0;              // GB/s each ring may use
  LinkType worst = LinkType::Loc;       // worst link inside a host on channel 0's routes
  bool crossesHosts = false;
  int nChannels() const { return static_cast<int>(rings.size()); }
};

// graphs[h] describes host h (the same pointer may repeat); places[r] says where rank r
// runs. Fails (false, *error) only on an inconsistent input: a place naming a host or node
// that does not exist, or a node that is neither GPU nor CPU. With no feasible ring (links of
// no bandwidth) it still answers one ring, at speed 0.
bool searchRings(const std::vector<const TopoGraph*>& graphs, const std::vector<RankPlace>& places,
                 int maxChannels, RingSearch* out, std::string* error);

// NCCL's INFO lines: "Channel 00/02 :    0   1   2   3".
std::vector<std::string> ringLines(const RingSearch& s);

// Checks that every ring holds every rank exactly once (for tests and the tool).
bool ringsValid(const RingSearch& s, int nranks, std::string* error);

}  // namespace ringcc
