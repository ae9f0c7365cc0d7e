// libFuzzer harness: NCCL topology XML (NCCL_TOPO_FILE is whatever file a user points at).
// The reader and the graph builder must answer any input with an error or a graph, never a
// crash, hang or out-of-bounds read; what they accept must survive a write and a re-read
// unchanged, and the ring search on it must give valid rings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/core/comm_topo.h"
#include "src/topo/graph.h"
#include "src/topo/search.h"
#include "src/topo/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringcc;
  const std::string text(reinterpret_cast<const char*>(data), size);
  XmlNode root;
  std::string error;
  if (!parseXml(text, &root, &error)) return 0;
  // Written and read back: the same document.
  const std::string written = writeXml(root);
  XmlNode again;
  if (!parseXml(written, &again, &error) || writeXml(again) != written) std::abort();
  TopoGraph g;
  if (!graphFromXml(root, &g, &error)) return 0;
  TopoGraph g2;
  if (!graphFromXml(again, &g2, &error) || !(g2 == g)) std::abort();
  (void)g.describe();
  // A few ranks on two hosts like it: the rings must hold every rank once.
  const int devices = static_cast<int>(rankDevices(g).size());
  if (devices == 0 || devices > 16) return 0;
  const std::vector<RankPlace> places = blockPlaces(g, 2 * devices, 2);
  RingSearch rings;
  if (!searchRings({&g, &g}, places, 4, &rings, &error)) std::abort();
  if (!ringsValid(rings, 2 * devices, &error)) std::abort();
  DoubleTree trees;
  if (treesForRing(rings.rings[0], places, &trees) != ncclSuccess) std::abort();
  return 0;
}
