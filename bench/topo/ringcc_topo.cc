// ringcc-topo: what the library sees of a machine, and what it builds there.
//
//   ringcc-topo [FILE] [--hosts H] [--ranks N] [--channels C] [--dump OUT.xml]
//
// Reads FILE (NCCL's topology XML, as NCCL_TOPO_DUMP_FILE writes it) or detects this host,
// prints the graph, then the rings and the double binary trees ringcc builds for N ranks on
// H hosts shaped like it (default: one rank per GPU, or per CPU without GPUs, on each host;
// the i-th rank of a host on its i-th device), at most C channels (default 32). --dump writes
// the XML read or detected. Exit status: 0, 1 for a bad file or layout, 2 for bad usage.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/base/error.h"
#include "src/core/comm_topo.h"
#include "src/topo/detect.h"

namespace {

int usage(const char* why) {
  std::fprintf(
      stderr,
      "ringcc-topo: %s\n"
      "usage: ringcc-topo [FILE] [--hosts H] [--ranks N] [--channels C] [--dump OUT.xml]\n",
      why);
  return 2;
}

bool positive(const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!*text || *end || v <= 0 || v > (1 << 20)) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringcc;
  std::string file, dump;
  int hosts = 1, ranks = 0, channels = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      usage("prints the topology graph, rings and trees");
      return 0;
    } else if (a == "--hosts") {
      if (!hasValue || !positive(argv[++i], &hosts)) return usage("--hosts needs a positive count");
    } else if (a == "--ranks") {
      if (!hasValue || !positive(argv[++i], &ranks)) return usage("--ranks needs a positive count");
    } else if (a == "--channels") {
      if (!hasValue || !positive(argv[++i], &channels) || channels > 64)
        return usage("--channels needs a count from 1 to 64");
    } else if (a == "--dump") {
      if (!hasValue) return usage("--dump needs a file name");
      dump = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else if (file.empty()) {
      file = a;
    } else {
      return usage("more than one FILE");
    }
  }

  XmlNode xml;
  if (!file.empty()) {
    if (readXmlFile(file, "FILE", &xml) != ncclSuccess) {
      std::fprintf(stderr, "ringcc-topo: %s\n", lastErrorMessage().c_str());
      return 1;
    }
  } else {
    xml = detectTopologyXml();
  }
  TopoGraph graph;
  std::string error;
  if (!graphFromXml(xml, &graph, &error)) {
    std::fprintf(stderr, "ringcc-topo: %s: %s\n", file.empty() ? "detected" : file.c_str(),
                 error.c_str());
    return 1;
  }
  std::printf("Topology %s%s: %s", file.empty() ? "detected on this host" : file.c_str(),
              graph.name.empty() ? "" : (" (" + graph.name + ")").c_str(),
              graph.describe().c_str());
  if (!dump.empty()) {
    if (writeXmlFile(dump, "--dump", xml) != ncclSuccess) {
      std::fprintf(stderr, "ringcc-topo: %s\n", lastErrorMessage().c_str());
      return 1;
    }
    std::printf("XML written to %s\n", dump.c_str());
  }

  const int perHost = static_cast<int>(rankDevices(graph).size());
  if (ranks == 0) ranks = hosts * perHost;
  const std::vector<RankPlace> places = blockPlaces(graph, ranks, hosts);
  if (places.empty()) {
    std::fprintf(stderr, "ringcc-topo: cannot place %d ranks on %d hosts of %d devices\n", ranks,
                 hosts, perHost);
    return 1;
  }
  const std::vector<const TopoGraph*> graphs(static_cast<size_t>(hosts), &graph);
  RingSearch rings;
  if (!searchRings(graphs, places, channels, &rings, &error) || !ringsValid(rings, ranks, &error)) {
    std::fprintf(stderr, "ringcc-topo: ring search: %s\n", error.c_str());
    return 1;
  }
  std::printf("\n%d ranks on %d host%s: %d channels of %.1f GB/s each, type %s%s\n", ranks, hosts,
              hosts == 1 ? "" : "s", rings.nChannels(), rings.bwPerChannel,
              linkTypeName(rings.worst), rings.crossesHosts ? "/NET" : "");
  for (const std::string& line : ringLines(rings)) std::printf("%s\n", line.c_str());
  DoubleTree trees;
  if (treesForRing(rings.rings[0], places, &trees) != ncclSuccess) {
    std::fprintf(stderr, "ringcc-topo: the double binary tree could not be built\n");
    return 1;
  }
  std::printf("\nTrees (rank: [tree] children->rank->parent):\n");
  for (int r = 0; r < ranks; ++r) std::printf("%5d: %s\n", r, describeTree(trees, r).c_str());
  return 0;
}
