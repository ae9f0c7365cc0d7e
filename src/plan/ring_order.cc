#include "src/plan/ring_order.h"

#include <algorithm>
#include <cstdint>

namespace ringcc {

std::vector<std::vector<int>> hostGroups(const std::vector<PeerInfo>& peers) {
  std::vector<uint64_t> hosts;  // in order of first appearance (lowest rank first)
  std::vector<std::vector<int>> groups;
  for (size_t r = 0; r < peers.size(); ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), peers[r].hostHash);
    if (it == hosts.end()) {
      hosts.push_back(peers[r].hostHash);
      groups.emplace_back();
      it = hosts.end() - 1;
    }
    groups[static_cast<size_t>(it - hosts.begin())].push_back(static_cast<int>(r));
  }
  return groups;
}

std::vector<int> hostGroupedRing(const std::vector<PeerInfo>& peers) {
  std::vector<int> ring;
  ring.reserve(peers.size());
  for (const std::vector<int>& host : hostGroups(peers))
    ring.insert(ring.end(), host.begin(), host.end());
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
