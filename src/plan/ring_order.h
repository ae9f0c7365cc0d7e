// The ring order of a communicator: ranks of one host next to each other, so that a ring
// crosses each host boundary once per direction (n hosts: n network hops per ring instead of
// up to one per rank), as NCCL's rings do. Hosts come in the order of their lowest rank, and
// ranks within a host in rank order. Until a topology search exists this is the whole search.
// Pure, and the same on every rank (it reads only the allgathered PeerInfos).
#pragma once

#include <vector>

#include "transports/transport.h"

namespace ringcc {

// ring[i] = the rank at position i. Identity when every rank is on one host, or when the
// ranks of each host are already consecutive.
std::vector<int> hostGroupedRing(const std::vector<PeerInfo>& peers);

// The neighbours of `rank` in `ring` (position i receives from i-1 and sends to i+1).
int ringPrev(const std::vector<int>& ring, int rank);
int ringNext(const std::vector<int>& ring, int rank);

}  // namespace ringcc
