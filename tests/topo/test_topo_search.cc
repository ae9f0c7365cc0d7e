// The ring search on the fixtures: every ring visits every rank once per channel, crosses each
// host boundary once per direction, and better links give more bandwidth.
#include <catch2/catch.hpp>
#include <set>

#include "src/core/comm_topo.h"
#include "src/topo/search.h"
#include "tests/topo/topo_fixtures.h"

using namespace ringcc;
using ringcc::test::kFixtures;
using ringcc::test::loadFixture;

namespace {

RingSearch search(const TopoGraph& g, int hosts, int maxChannels,
                  std::vector<RankPlace>* placesOut = nullptr) {
  const int perHost = static_cast<int>(rankDevices(g).size());
  const std::vector<RankPlace> places = blockPlaces(g, hosts * perHost, hosts);
  REQUIRE(places.size() == size_t(hosts * perHost));
  const std::vector<const TopoGraph*> graphs(size_t(hosts), &g);
  RingSearch s;
  std::string error;
  if (!searchRings(graphs, places, maxChannels, &s, &error)) FAIL(error);
  if (placesOut) *placesOut = places;
  return s;
}

// How many times ring `ring` steps from one host to another (going round once).
int hostCrossings(const std::vector<int>& ring, const std::vector<RankPlace>& places) {
  int n = 0;
  for (size_t i = 0; i < ring.size(); ++i)
    n += places[size_t(ring[i])].host != places[size_t(ring[(i + 1) % ring.size()])].host;
  return n;
}

}  // namespace

TEST_CASE("every ring visits every rank once per channel, on every fixture and host count",
          "[topo_search]") {
  for (const char* name : kFixtures) {
    const TopoGraph g = loadFixture(name);
    for (int hosts : {1, 2, 4}) {
      for (int channels : {1, 4, 32}) {
        INFO(name << " on " << hosts << " hosts, up to " << channels << " channels");
        std::vector<RankPlace> places;
        const RingSearch s = search(g, hosts, channels, &places);
        std::string error;
        CHECK(ringsValid(s, static_cast<int>(places.size()), &error));
        INFO(error);
        CHECK(s.nChannels() >= 1);
        CHECK(s.nChannels() <= channels);
        CHECK(s.bwPerChannel > 0);
        CHECK(s.crossesHosts == (hosts > 1));
        for (const auto& ring : s.rings) {
          // Once out of each host and once into it: hosts boundaries crossed = hosts.
          CHECK(hostCrossings(ring, places) == (hosts > 1 ? hosts : 0));
          // Hosts in order of their lowest rank.
          for (size_t i = 1; i < ring.size(); ++i)
            CHECK(places[size_t(ring[i])].host >= places[size_t(ring[i - 1])].host);
        }
      }
    }
  }
}

TEST_CASE("a cluster of 512 DGX hosts gets valid rings", "[topo_search]") {
  const TopoGraph g = loadFixture("dgx_h100");
  std::vector<RankPlace> places;
  const RingSearch s = search(g, 512, 16, &places);
  std::string error;
  CHECK(ringsValid(s, 4096, &error));
  INFO(error);
  CHECK(s.nChannels() >= 8);  // at least one per NIC
  for (const auto& ring : s.rings) CHECK(hostCrossings(ring, places) == 512);
}

TEST_CASE("NVSwitch gets more and faster channels than PCIe, PCIe than the socket link",
          "[topo_search]") {
  const RingSearch dgx = search(loadFixture("dgx_h100"), 1, 32);
  const RingSearch pcie = search(loadFixture("pcie_8gpu"), 1, 32);
  CHECK(dgx.worst == LinkType::Nvl);
  CHECK(pcie.worst == LinkType::Sys);  // the ring crosses the sockets
  CHECK(dgx.nChannels() > pcie.nChannels());
  CHECK(dgx.bwPerChannel > pcie.bwPerChannel);
  CHECK(dgx.nChannels() * dgx.bwPerChannel > 10 * pcie.nChannels() * pcie.bwPerChannel);
  // 8 PCIe GPUs: the ring goes through one switch's GPUs, then the other's, crossing the
  // socket link once each way; a GPU of one switch never sits between two of the other.
  const std::vector<RankPlace> places = blockPlaces(loadFixture("pcie_8gpu"), 8, 1);
  for (const auto& ring : pcie.rings) {
    int switches = 0;
    for (size_t i = 0; i < ring.size(); ++i)
      switches += (ring[i] < 4) != (ring[(i + 1) % ring.size()] < 4);
    CHECK(switches == 2);
  }
  // Across hosts the network bounds the channel: 400 Gb/s NICs beat 100 Gb/s ones.
  const RingSearch dgx4 = search(loadFixture("dgx_h100"), 4, 32);
  const RingSearch pcie4 = search(loadFixture("pcie_8gpu"), 4, 32);
  CHECK(dgx4.nChannels() * dgx4.bwPerChannel > pcie4.nChannels() * pcie4.bwPerChannel);
}

TEST_CASE("ranks of one NUMA node sit together, nodes in order", "[topo_search]") {
  const TopoGraph g = loadFixture("cpu_2socket");
  const std::vector<int> cpus = rankDevices(g);
  REQUIRE(cpus.size() == 2);
  // Ranks 0 and 2 on node 0, 1 and 3 on node 1 (ranks placed round robin).
  const std::vector<RankPlace> places = {{0, cpus[0]}, {0, cpus[1]}, {0, cpus[0]}, {0, cpus[1]}};
  RingSearch s;
  std::string error;
  REQUIRE(searchRings({&g}, places, 2, &s, &error));
  for (const auto& ring : s.rings) CHECK(ring == std::vector<int>{0, 2, 1, 3});
}

TEST_CASE("the search refuses places that do not exist", "[topo_search]") {
  const TopoGraph g = loadFixture("dgx_h100");
  RingSearch s;
  std::string error;
  CHECK_FALSE(searchRings({&g}, {{1, 0}}, 1, &s, &error));
  CHECK(error.find("host 1") != std::string::npos);
  const int nic = g.nodesOf(TopoType::Nic)[0];
  CHECK_FALSE(searchRings({&g}, {{0, nic}}, 1, &s, &error));
  CHECK(error.find("not a GPU or CPU") != std::string::npos);
  CHECK(blockPlaces(g, 7, 2).empty());  // 7 ranks do not split over 2 hosts
}

TEST_CASE("rings are logged the way NCCL logs its channels", "[topo_search]") {
  RingSearch s;
  s.rings = {{0, 1, 2, 3}, {0, 2, 1, 3}};
  const std::vector<std::string> lines = ringLines(s);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "Channel 00/02 : 0 1 2 3");
  CHECK(lines[1] == "Channel 01/02 : 0 2 1 3");
}

TEST_CASE("the trees over the rings are valid double binary trees", "[topo_search]") {
  const TopoGraph g = loadFixture("dgx_h100");
  for (int hosts : {1, 4, 512}) {
    INFO(hosts << " hosts");
    std::vector<RankPlace> places;
    const RingSearch s = search(g, hosts, 8, &places);
    DoubleTree t;
    REQUIRE(treesForRing(s.rings[0], places, &t) == ncclSuccess);
    const int n = static_cast<int>(places.size());
    std::vector<int> innerIn(size_t(n), 0);
    for (int which = 0; which < 2; ++which) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const TreeNode& node = t.tree[which][size_t(r)];
        roots += node.up < 0;
        // Each child names this rank as its parent.
        bool inter = false;
        for (int d : node.down) {
          if (d < 0) continue;
          CHECK(t.tree[which][size_t(d)].up == r);
          inter = inter || places[size_t(d)].host != places[size_t(r)].host;
        }
        innerIn[size_t(r)] += inter;
      }
      CHECK(roots == 1);
    }
    // A host's head is inner (has child hosts) in at most one tree (NCCL's property; the
    // exception, an odd host count's root, does not arise for 1, 4 or 512 hosts but 1).
    for (int r = 0; r < n; ++r) CHECK(innerIn[size_t(r)] <= 1);
  }
}

namespace {

std::vector<PeerInfo> peersOn(std::initializer_list<uint64_t> hosts, uint64_t hash, int numa = 0) {
  std::vector<PeerInfo> v;
  for (uint64_t h : hosts) {
    PeerInfo p;
    p.rank = static_cast<int>(v.size());
    p.hostHash = h;
    p.topoHash = hash;
    p.numaNode = numa;
    v.push_back(p);
  }
  return v;
}

}  // namespace

TEST_CASE("a communicator's rings: searched when hosts agree, grouped by host otherwise",
          "[topo_search]") {
  HostTopology topo;
  topo.graph = loadFixture("cpu_2socket");
  topo.fromFile = true;
  topo.hash = 42;
  // Two hosts, interleaved ranks, two ranks per host on the file's two sockets.
  const CommTopology t = commTopology(topo, peersOn({7, 9, 7, 9, 7, 9, 7, 9}, 42), 3);
  REQUIRE(t.rings.size() == 3);
  std::string error;
  RingSearch used;
  used.rings = t.rings;
  CHECK(ringsValid(used, 8, &error));
  // Host 7 holds ranks 0 2 4 6 (sockets 0 1 0 1), host 9 ranks 1 3 5 7.
  CHECK(t.rings[0] == std::vector<int>{0, 4, 2, 6, 1, 5, 3, 7});
  CHECK(t.how.find("NCCL_TOPO_FILE") != std::string::npos);
  REQUIRE(t.trees.tree[0].size() == 8);
  CHECK(t.places[2].host == 0);
  CHECK(t.places[3].host == 1);
  // One rank reports another topology: grouped by host, which every rank can compute.
  std::vector<PeerInfo> odd = peersOn({7, 9, 7, 9}, 42);
  odd[3].topoHash = 43;
  const CommTopology f = commTopology(topo, odd, 2);
  CHECK(f.how.find("different topologies") != std::string::npos);
  REQUIRE(f.rings.size() == 2);
  CHECK(f.rings[0] == std::vector<int>{0, 2, 1, 3});
  CHECK(f.rings[1] == f.rings[0]);
}

TEST_CASE("detected, a rank's device is the CPU of its NUMA node", "[topo_search]") {
  HostTopology topo;
  topo.graph = loadFixture("cpu_2socket");
  topo.fromFile = false;
  topo.hash = 1;
  std::vector<PeerInfo> peers = peersOn({5, 5, 5, 5}, 1);
  peers[0].numaNode = 1;
  peers[1].numaNode = 0;
  peers[2].numaNode = 1;
  peers[3].numaNode = 0;
  const CommTopology t = commTopology(topo, peers, 1);
  // Ranks of node 1 (0, 2) together and of node 0 (1, 3) together; the ring starts at rank
  // 0's node.
  CHECK(t.rings[0] == std::vector<int>{0, 2, 1, 3});
  // Rank 0 on node 0 this time: the same grouping, from node 0.
  peers[0].numaNode = 0;
  peers[1].numaNode = 1;
  peers[2].numaNode = 0;
  peers[3].numaNode = 1;
  CHECK(commTopology(topo, peers, 1).rings[0] == std::vector<int>{0, 2, 1, 3});
  peers[2].numaNode = 1;
  peers[3].numaNode = 0;
  CHECK(commTopology(topo, peers, 1).rings[0] == std::vector<int>{0, 3, 1, 2});
}
