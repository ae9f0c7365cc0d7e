#include "src/plan/ring_order.h"

#include <algorithm>
#include <cstdint>

namespace ringcc {

std::vector<int> hostGroupedRing(const std::vector<PeerInfo>& peers) {
  std::vector<uint64_t> hosts;  // in order of first appearance (lowest rank first)
  for (const PeerInfo& p : peers)
    if (std::find(hosts.begin(), hosts.end(), p.hostHash) == hosts.end())
      hosts.push_back(p.hostHash);
  std::vector<int> ring;
  ring.reserve(peers.size());
  for (uint64_t h : hosts)
    for (size_t r = 0; r < peers.size(); ++r)
      if (peers[r].hostHash == h) ring.push_back(static_cast<int>(r));
  return ring;
}

namespace {
int positionOf(const std::vector<int>& ring, int rank) {
  return static_cast<int>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
}
}  // namespace

int ringPrev(const std::vector<int>& ring, int rank) {
  const int n = static_cast<int>(ring.size());
  return ring[static_cast<size_t>((positionOf(ring, rank) + n - 1) % n)];
}

int ringNext(const std::vector<int>& ring, int rank) {
  const int n = static_cast<int>(ring.size());
  return ring[static_cast<size_t>((positionOf(ring, rank) + 1) % n)];
}

}  // namespace ringcc
