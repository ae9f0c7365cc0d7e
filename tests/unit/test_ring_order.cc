#include <catch2/catch.hpp>

#include "src/plan/ring_order.h"

using namespace ringcc;

namespace {
std::vector<PeerInfo> onHosts(std::initializer_list<uint64_t> hosts) {
  std::vector<PeerInfo> v;
  for (uint64_t h : hosts) {
    PeerInfo p;
    p.rank = static_cast<int>(v.size());
    p.hostHash = h;
    v.push_back(p);
  }
  return v;
}
}  // namespace

TEST_CASE("rings group the ranks of a host, hosts by their lowest rank", "[ring_order]") {
  CHECK(hostGroupedRing(onHosts({7, 7, 7})) == std::vector<int>{0, 1, 2});
  CHECK(hostGroupedRing(onHosts({1, 1, 2, 2})) == std::vector<int>{0, 1, 2, 3});
  CHECK(hostGroupedRing(onHosts({1, 2, 1, 2})) == std::vector<int>{0, 2, 1, 3});
  CHECK(hostGroupedRing(onHosts({5, 9, 9, 5, 3})) == std::vector<int>{0, 3, 1, 2, 4});
  const std::vector<int> ring = {0, 2, 1, 3};
  CHECK(ringNext(ring, 0) == 2);
  CHECK(ringPrev(ring, 0) == 3);
  CHECK(ringNext(ring, 3) == 0);
  CHECK(ringPrev(ring, 1) == 2);
}
