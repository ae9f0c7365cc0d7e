#include "src/topo/detect.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "ringcc_config.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/topo/nvml_probe.h"

#if RINGCC_HAVE_HWLOC
#include <hwloc.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ringcc {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// arch, vendor, familyid, modelid, as NCCL fills them.
void describeCpu(XmlNode* cpu) {
#if defined(__x86_64__)
  cpu->set("arch", "x86_64");
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    cpu->set("vendor", vendor);
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const unsigned family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
    const unsigned model = ((a >> 4) & 0xf) + (((a >> 16) & 0xf) << 4);
    cpu->set("familyid", std::to_string(family));
    cpu->set("modelid", std::to_string(model));
  }
#elif defined(__aarch64__)
  cpu->set("arch", "arm64");
#elif defined(__PPC__)
  cpu->set("arch", "ppc64");
#endif
}

XmlNode& addCpu(XmlNode* system, int numa, const std::string& affinity) {
  XmlNode& cpu = system->add("cpu");
  cpu.set("numaid", std::to_string(numa));
  cpu.set("affinity", affinity);
  describeCpu(&cpu);
  return cpu;
}

XmlNode* findCpu(XmlNode* system, int numa) {
  for (XmlNode& c : system->subs)
    if (c.name == "cpu" && c.attrOr("numaid", "") == std::to_string(numa)) return &c;
  return nullptr;
}

// The <pci busid=...> child of `parent`, made if missing, with its class and link read as
// NCCL reads them (from /sys).
XmlNode& pciChild(XmlNode* parent, const std::string& busId) {
  for (XmlNode& s : parent->subs)
    if (s.name == "pci" && s.attrOr("busid", "") == busId) return s;
  XmlNode& p = parent->add("pci");
  p.set("busid", busId);
  const std::string dir = "/sys/bus/pci/devices/" + busId + "/";
  // As NCCL: ids only when /sys has them, link speed and width always (empty if unknown).
  for (const char* key : {"class", "vendor", "device", "subsystem_vendor", "subsystem_device"})
    if (const std::string v = readLine(dir + key); !v.empty()) p.set(key, v);
  p.set("link_speed", readLine(dir + "max_link_speed"));
  p.set("link_width", readLine(dir + "max_link_width"));
  return p;
}

void addGpu(XmlNode* pci, const ProbedGpu& gpu) {
  XmlNode& g = pci->add("gpu");
  g.set("dev", std::to_string(gpu.dev));
  g.set("sm", std::to_string(gpu.sm));
  g.set("gdr", "0");
  for (const ProbedNvLink& l : gpu.nvlinks) {
    XmlNode& x = g.add("nvlink");
    x.set("target", l.target);
    x.set("count", std::to_string(l.count));
    x.set("tclass", l.tclass);
  }
}

#if RINGCC_HAVE_HWLOC
std::string busIdOf(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain & 0xffff, bus & 0xff, dev & 0x1f,
                func & 0x7);
  return buf;
}

std::string busIdOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  return busIdOf(p.domain, p.bus, p.dev, p.func);
}

std::vector<int> cpusOf(hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) cpus.push_back(i);
  return cpus;
}

// Adds the NUMA nodes, then the PCI devices that matter (GPUs NVML knows, NICs) with the
// switches above them, each under the CPU of its NUMA node. `placed`: the GPUs found there.
bool detectHwloc(XmlNode* system, const std::vector<ProbedGpu>& gpus,
                 std::vector<std::string>* placed) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return false;
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // The OpenCL and OpenGL plugins name GPUs we find through NVML anyway; loading them costs
  // init time (they open their vendors' libraries) and leaves their allocations behind.
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return false;
  }
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n;
       n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n))
    addCpu(system, static_cast<int>(n->os_index), cpuMaskText(cpusOf(n->cpuset)));
  if (system->subs.empty())
    addCpu(system, 0, cpuMaskText(cpusOf(hwloc_topology_get_topology_cpuset(topo))));

  for (hwloc_obj_t d = hwloc_get_next_pcidev(topo, nullptr); d;
       d = hwloc_get_next_pcidev(topo, d)) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = d->attr->pcidev;
    const std::string busId = busIdOf(p);
    const ProbedGpu* gpu = nullptr;
    for (const ProbedGpu& g : gpus)
      if (g.busId == busId) gpu = &g;
    std::vector<std::string> nets;
    for (hwloc_obj_t o = d->io_first_child; o; o = o->next_sibling)
      if (o->type == HWLOC_OBJ_OS_DEVICE && o->name &&
          (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
           o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS))
        nets.push_back(o->name);
    if (!gpu && nets.empty()) continue;
    // The bridges above the device, top first.
    std::vector<std::string> bridges;
    for (hwloc_obj_t b = d->parent; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent)
      if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
        bridges.insert(bridges.begin(), busIdOf(b->attr->bridge.upstream.pci));
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, d);
    const int numa = anc && anc->nodeset ? hwloc_bitmap_first(anc->nodeset) : -1;
    XmlNode* parent = findCpu(system, numa);
    if (!parent) parent = &system->subs.front();
    for (const std::string& b : bridges) parent = &pciChild(parent, b);
    XmlNode& dev = pciChild(parent, busId);
    if (gpu) {
      addGpu(&dev, *gpu);
      placed->push_back(gpu->busId);
    }
    if (!nets.empty()) {
      XmlNode& nic = dev.add("nic");
      for (const std::string& name : nets) {
        long speed = std::atol(readLine("/sys/class/net/" + name + "/speed").c_str());
        if (speed <= 0) speed = 10000;  // virtual NICs report none: NCCL's default, 10 Gb/s
        XmlNode& net = nic.add("net");
        net.set("name", name);
        net.set("dev", std::to_string(static_cast<int>(nic.subs.size()) - 1));
        net.set("speed", std::to_string(speed));
        net.set("port", "1");
        net.set("latency", "0.000000");
        net.set("gdr", "0");
      }
    }
  }
  hwloc_topology_destroy(topo);
  return true;
}
#endif

// Without hwloc: NUMA nodes from /sys, or one CPU with this process's cores.
void detectSys(XmlNode* system) {
  if (DIR* dir = opendir("/sys/devices/system/node")) {
    std::vector<int> nodes;
    while (dirent* e = readdir(dir)) {
      int id = -1;
      if (std::sscanf(e->d_name, "node%d", &id) == 1) nodes.push_back(id);
    }
    closedir(dir);
    std::sort(nodes.begin(), nodes.end());
    for (int id : nodes)
      addCpu(system, id,
             readLine("/sys/devices/system/node/node" + std::to_string(id) + "/cpumap"));
  }
  if (system->subs.empty()) {
    cpu_set_t set;
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
      for (int i = 0; i < CPU_SETSIZE; ++i)
        if (CPU_ISSET(i, &set)) cpus.push_back(i);
    addCpu(system, 0, cpuMaskText(cpus));
  }
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string cpuMaskText(const std::vector<int>& cpus) {
  int top = 0;
  for (int c : cpus) top = std::max(top, c);
  std::vector<uint32_t> words(static_cast<size_t>(top / 32 + 1), 0);
  for (int c : cpus)
    if (c >= 0) words[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  char buf[16];
  for (size_t i = words.size(); i-- > 0;) {
    std::snprintf(buf, sizeof(buf), "%08x", words[i]);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

XmlNode detectTopologyXml() {
  XmlNode system;
  system.name = "system";
  system.set("version", "1");
  const std::vector<ProbedGpu> gpus = probeGpus();
  std::vector<std::string> placed;
#if RINGCC_HAVE_HWLOC
  if (!detectHwloc(&system, gpus, &placed)) {
    LOG_INFO(kLogGraph, "topology: hwloc could not load this host; reading /sys");
    system.subs.clear();
    placed.clear();
    detectSys(&system);
  }
#else
  detectSys(&system);
#endif
  // A GPU whose place in the PCI tree is unknown (no hwloc, or hwloc does not show it) hangs
  // off the first CPU, as NCCL attaches GPUs it cannot place.
  for (const ProbedGpu& g : gpus) {
    if (std::find(placed.begin(), placed.end(), g.busId) != placed.end()) continue;
    LOG_INFO(kLogGraph, "topology: GPU %s not in the PCI tree; placed under CPU %s",
             g.busId.c_str(), system.subs.front().attrOr("numaid", "?").c_str());
    addGpu(&pciChild(&system.subs.front(), g.busId), g);
  }
  return system;
}

int currentNumaNode() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  if (DIR* dir = opendir(("/sys/devices/system/cpu/cpu" + std::to_string(cpu)).c_str())) {
    int node = -1;
    while (dirent* e = readdir(dir))
      if (std::sscanf(e->d_name, "node%d", &node) == 1) break;
    closedir(dir);
    return node;
  }
  return -1;
}

ncclResult_t loadHostTopology(HostTopology* out) {
  *out = HostTopology{};
  const std::string file = paramString("TOPO_FILE");
  if (!file.empty()) {
    RINGCC_CHECK(readXmlFile(file, "NCCL_TOPO_FILE", &out->xml));
    out->fromFile = true;
    out->file = file;
  } else {
    // Detection looks at hardware that does not change while the process runs: once.
    static std::once_flag once;
    static XmlNode detected;
    std::call_once(once, [] { detected = detectTopologyXml(); });
    out->xml = detected;
  }
  std::string error;
  if (!graphFromXml(out->xml, &out->graph, &error))
    return fail(ncclInvalidArgument, "topology", "%s: %s",
                out->fromFile ? ("NCCL_TOPO_FILE=" + file).c_str() : "detected topology",
                error.c_str());
  out->hash = fnv1a((out->fromFile ? "file\n" : "detected\n") + writeXml(out->xml));
  return ncclSuccess;
}

}  // namespace ringcc
