// The topology graph of one host: nodes (GPU, CPU = one NUMA node, NIC = one network port,
// PCI switch, NVSwitch) and directed links with a bandwidth and a nominal latency.
//
// A graph is always made from NCCL's topology XML (graphFromXml), whether the XML was read
// from NCCL_TOPO_FILE or built by detection (src/topo/detect.cc): one path, so that what a
// user dumps and reloads is exactly what the library searched. The bandwidths follow NCCL's
// model (GB/s, one direction):
//   NVLink   count x per-link rate by SM (20 for sm80, 20.6 for sm90, 40.1 for sm100)
//   PCIe     width x rate / 80: 8 GT/s x16 = 12, 16 GT/s x16 = 24, 32 GT/s x16 = 48
//   socket   inter-CPU link: 6 (older Intel, ARM), 10 (Skylake and later), 16 (AMD)
//   network  the port's speed (Mb/s) / 8000: 400 Gb/s = 50
// Pure: no I/O here.
#pragma once

#include <string>
#include <vector>

#include "src/topo/xml.h"

namespace ringcc {

enum class TopoType { Gpu, Cpu, Nic, Pci, NvSwitch };
// Link kinds, best first: a path is as good as its worst link.
enum class LinkType { Loc, Nvl, Pci, Sys, Net };

const char* topoTypeName(TopoType t);  // "GPU", "CPU", "NIC", "PCI", "NVS"
const char* linkTypeName(LinkType t);  // "LOC", "NVL", "PCI", "SYS", "NET"

struct TopoNode {
  TopoType type = TopoType::Cpu;
  std::string id;        // GPU, PCI, NVS: bus id; CPU: NUMA id; NIC: port name
  int dev = -1;          // GPU: CUDA device (dev=); NIC: network device index (dev=)
  int sm = 0;            // GPU: compute capability x 10
  int numa = -1;         // CPU: NUMA id
  std::string arch;      // CPU: x86_64, arm64, ppc64
  std::string vendor;    // CPU: GenuineIntel, AuthenticAMD
  std::string affinity;  // CPU: cores, as NCCL writes them (hex words, comma separated)
  double netBw = 0;      // NIC: port speed in GB/s
  bool operator==(const TopoNode&) const = default;
};

struct TopoLink {
  int from = 0, to = 0;  // node indices
  LinkType type = LinkType::Pci;
  double bw = 0;         // GB/s, this direction
  double latencyUs = 0;  // nominal
  bool operator==(const TopoLink&) const = default;
};

struct TopoGraph {
  std::string name;  // <system name=...>, if any
  std::vector<TopoNode> nodes;
  std::vector<TopoLink> links;

  std::vector<int> nodesOf(TopoType t) const;  // in graph order
  int count(TopoType t) const { return static_cast<int>(nodesOf(t).size()); }
  // "GPU/0000:19:00.0", "CPU/0", ...
  std::string label(int node) const;
  // Several lines: the nodes and links, for ringcc-topo and NCCL_DEBUG_SUBSYS=GRAPH.
  std::string describe() const;
  bool operator==(const TopoGraph&) const = default;
};

// Builds the graph of one <system> element (version 1, as NCCL writes). Unknown elements
// and attributes are ignored, as NCCL ignores them (so are GPUs and NICs outside a <cpu>);
// a missing or wrong version or a bad number is an error (false, *error says which line).
bool graphFromXml(const XmlNode& system, TopoGraph* out, std::string* error);

// The devices ranks map to, in order: GPUs by their dev= (file order on ties) if there are
// any, otherwise CPUs by NUMA id.
std::vector<int> rankDevices(const TopoGraph& g);

// PCIe bandwidth (GB/s) of a link_speed ("16.0 GT/s PCIe") and link_width ("16") as NCCL
// computes it; empty strings take NCCL's defaults (8 GT/s, x16).
double pciBandwidth(const std::string& speed, const std::string& width);

}  // namespace ringcc
