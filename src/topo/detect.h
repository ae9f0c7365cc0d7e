// Detection: this host's topology as NCCL's XML, from hwloc (NUMA nodes and their cores, the
// PCI tree down to GPUs and NICs), /sys (PCIe link speeds, NIC speeds) and, when they load,
// the CUDA driver and NVML (GPUs, their compute capability, NVLinks and NVSwitches).
// libcuda.so.1 and libnvidia-ml.so.1 are opened with dlopen at run time; without them (or
// without hwloc) the answer is what is left: a host-only topology, never an error.
// Without hwloc, NUMA nodes come from /sys/devices/system/node, and failing that the host is
// one CPU with the cores sched_getaffinity gives.
#pragma once

#include <cstdint>
#include <string>

#include "nccl.h"
#include "src/topo/graph.h"
#include "src/topo/xml.h"

namespace ringcc {

// The <system> element of this host, detected now.
XmlNode detectTopologyXml();

// What a communicator knows of its host: the XML (detected, or read from NCCL_TOPO_FILE),
// the graph made from it, and a hash of the XML that ranks compare to learn whether their
// hosts look alike.
struct HostTopology {
  XmlNode xml;
  TopoGraph graph;
  bool fromFile = false;
  std::string file;   // NCCL_TOPO_FILE, if it was read
  uint64_t hash = 0;  // of the written XML (and of fromFile)
};

// NCCL_TOPO_FILE if set (a bad file is ncclInvalidArgument naming it and the line), else
// detection (once per process: the result is kept).
ncclResult_t loadHostTopology(HostTopology* out);

// The NUMA node of the CPU the calling thread runs on; -1 if unknown.
int currentNumaNode();

// A CPU set written as NCCL writes one (/sys cpumap style: 32-bit hex words, most
// significant first, comma separated).
std::string cpuMaskText(const std::vector<int>& cpus);

}  // namespace ringcc
