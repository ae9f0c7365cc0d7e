#include "src/topo/graph.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace ringcc {

const char* topoTypeName(TopoType t) {
  switch (t) {
    case TopoType::Gpu:
      return "GPU";
    case TopoType::Cpu:
      return "CPU";
    case TopoType::Nic:
      return "NIC";
    case TopoType::Pci:
      return "PCI";
    case TopoType::NvSwitch:
      return "NVS";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::Loc:
      return "LOC";
    case LinkType::Nvl:
      return "NVL";
    case LinkType::Pci:
      return "PCI";
    case LinkType::Sys:
      return "SYS";
    case LinkType::Net:
      return "NET";
  }
  return "?";
}

std::vector<int> TopoGraph::nodesOf(TopoType t) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].type == t) out.push_back(static_cast<int>(i));
  return out;
}

std::string TopoGraph::label(int node) const {
  const TopoNode& n = nodes[static_cast<size_t>(node)];
  return std::string(topoTypeName(n.type)) + "/" + n.id;
}

std::string TopoGraph::describe() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%d CPUs, %d GPUs, %d NICs, %d PCI switches, %d NVSwitch\n",
                count(TopoType::Cpu), count(TopoType::Gpu), count(TopoType::Nic),
                count(TopoType::Pci), count(TopoType::NvSwitch));
  out += line;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TopoNode& n = nodes[i];
    out += "  " + label(static_cast<int>(i));
    if (n.type == TopoType::Gpu)
      out += " dev " + std::to_string(n.dev) + " sm " + std::to_string(n.sm);
    if (n.type == TopoType::Cpu)
      out += " " + n.arch + " " + n.vendor + (n.affinity.empty() ? "" : " cores " + n.affinity);
    if (n.type == TopoType::Nic) {
      std::snprintf(line, sizeof(line), " dev %d %.1f GB/s", n.dev, n.netBw);
      out += line;
    }
    out += "\n";
    for (const TopoLink& l : links) {
      if (l.from != static_cast<int>(i)) continue;
      std::snprintf(line, sizeof(line), "    -> %s %s %.1f GB/s\n", label(l.to).c_str(),
                    linkTypeName(l.type), l.bw);
      out += line;
    }
  }
  return out;
}

double pciBandwidth(const std::string& speed, const std::string& width) {
  // NCCL's table: per-lane rate in units such that width x rate / 80 gives GB/s.
  double gts = 8;
  if (!speed.empty()) gts = std::strtod(speed.c_str(), nullptr);
  double rate = 60;  // 8 GT/s
  if (gts > 0 && gts < 4)
    rate = 15;
  else if (gts >= 4 && gts < 6)
    rate = 30;
  else if (gts >= 6 && gts < 12)
    rate = 60;
  else if (gts >= 12 && gts < 24)
    rate = 120;
  else if (gts >= 24 && gts < 48)
    rate = 240;
  else if (gts >= 48)
    rate = 480;
  long lanes = width.empty() ? 16 : std::strtol(width.c_str(), nullptr, 10);
  if (lanes <= 0 || lanes > 64) lanes = 16;
  return static_cast<double>(lanes) * rate / 80.0;
}

namespace {

constexpr double kNvlLatencyUs = 0.6, kPciLatencyUs = 1.0, kSysLatencyUs = 1.5;

double nvlinkBw(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

// The inter-socket bandwidth between two CPUs, as NCCL models it.
double socketBw(const TopoNode& cpu, int model) {
  if (cpu.arch == "ppc64") return 32.0;
  if (cpu.arch == "arm64") return 6.0;
  if (cpu.vendor == "AuthenticAMD") return 16.0;
  if (cpu.vendor == "GenuineIntel") return model >= 0x55 ? 10.0 : 6.0;
  return 6.0;
}

class Builder {
 public:
  Builder(TopoGraph* g, std::string* error) : g_(*g), error_(*error) {}

  bool system(const XmlNode& s) {
    if (s.name != "system") return fail(s, "the top element is <" + s.name + ">, not <system>");
    const std::string* version = s.attr("version");
    if (!version) return fail(s, "<system> has no version (NCCL writes version=\"1\")");
    if (*version != "1")
      return fail(s, "<system version=\"" + *version + "\">: only version 1 is known");
    g_.name = s.attrOr("name", "");
    for (const XmlNode& c : s.subs)
      if (c.name == "cpu" && !cpu(c)) return false;
    // Every pair of sockets is joined by the inter-socket link.
    const std::vector<int> cpus = g_.nodesOf(TopoType::Cpu);
    for (int a : cpus)
      for (int b : cpus)
        if (a != b)
          link(a, b, LinkType::Sys, socketBw(g_.nodes[size_t(a)], cpuModel_[a]), kSysLatencyUs);
    return nvlinks();
  }

 private:
  bool fail(const XmlNode& at, const std::string& what) {
    error_ = "line " + std::to_string(at.line) + ": " + what;
    return false;
  }

  bool number(const XmlNode& at, const char* key, long fallback, long* out) {
    const std::string* v = at.attr(key);
    if (!v || v->empty()) {
      *out = fallback;
      return true;
    }
    const char* begin = v->data();
    const char* end = begin + v->size();
    int base = 10;
    if (v->size() > 2 && (*v)[0] == '0' && ((*v)[1] == 'x' || (*v)[1] == 'X')) {
      begin += 2;
      base = 16;
    }
    auto [ptr, ec] = std::from_chars(begin, end, *out, base);
    if (ec != std::errc() || ptr != end)
      return fail(at, std::string("<") + at.name + " " + key + "=\"" + *v + "\">: not a number");
    return true;
  }

  int addNode(TopoNode n) {
    g_.nodes.push_back(std::move(n));
    return static_cast<int>(g_.nodes.size()) - 1;
  }
  void link(int from, int to, LinkType type, double bw, double latency) {
    g_.links.push_back(TopoLink{from, to, type, bw, latency});
  }
  void both(int a, int b, LinkType type, double bw, double latency) {
    link(a, b, type, bw, latency);
    link(b, a, type, bw, latency);
  }

  bool cpu(const XmlNode& c) {
    TopoNode n;
    n.type = TopoType::Cpu;
    long numa = 0, model = 0;
    if (!number(c, "numaid", -1, &numa) || !number(c, "modelid", 0, &model)) return false;
    n.numa = static_cast<int>(numa);
    n.id = std::to_string(numa);
    n.arch = c.attrOr("arch", "");
    n.vendor = c.attrOr("vendor", "");
    n.affinity = c.attrOr("affinity", "");
    const int self = addNode(n);
    cpuModel_[self] = static_cast<int>(model);
    for (const XmlNode& s : c.subs) {
      if (s.name == "pci" && !pci(s, self)) return false;
      if (s.name == "nic" && !nic(s, self, 0)) return false;
    }
    return true;
  }

  // A <pci> element under `parent`: a GPU, a NIC, a switch (children), or a device of no
  // interest to collectives (kept in the XML, not in the graph).
  bool pci(const XmlNode& p, int parent) {
    const double bw = pciBandwidth(p.attrOr("link_speed", ""), p.attrOr("link_width", ""));
    const std::string busId = p.attrOr("busid", "");
    bool hasPci = false;
    for (const XmlNode& s : p.subs) hasPci = hasPci || s.name == "pci";
    for (const XmlNode& s : p.subs) {
      if (s.name == "gpu") {
        if (!gpu(s, busId, parent, bw)) return false;
      } else if (s.name == "nic") {
        if (!nic(s, parent, bw)) return false;
      }
    }
    if (!hasPci) return true;
    TopoNode n;
    n.type = TopoType::Pci;
    n.id = busId;
    const int self = addNode(n);
    both(parent, self, LinkType::Pci, bw, kPciLatencyUs);
    for (const XmlNode& s : p.subs)
      if (s.name == "pci" && !pci(s, self)) return false;
    return true;
  }

  bool gpu(const XmlNode& x, const std::string& busId, int parent, double bw) {
    TopoNode n;
    n.type = TopoType::Gpu;
    n.id = busId;
    long dev = 0, sm = 0;
    if (!number(x, "dev", -1, &dev) || !number(x, "sm", 0, &sm)) return false;
    n.dev = static_cast<int>(dev);
    n.sm = static_cast<int>(sm);
    const int self = addNode(n);
    both(parent, self, LinkType::Pci, bw, kPciLatencyUs);
    for (const XmlNode& l : x.subs) {
      if (l.name != "nvlink") continue;
      long count = 0;
      if (!number(l, "count", 1, &count)) return false;
      if (count < 0 || count > 1024) return fail(l, "<nvlink count=...> out of range");
      pendingNvl_.push_back({self, l.attrOr("target", ""), l.attrOr("tclass", ""),
                             static_cast<double>(count) * nvlinkBw(n.sm)});
    }
    return true;
  }

  bool nic(const XmlNode& x, int parent, double pciBw) {
    for (const XmlNode& s : x.subs) {
      if (s.name != "net") continue;
      TopoNode n;
      n.type = TopoType::Nic;
      n.id = s.attrOr("name", "");
      long dev = 0, speed = 0;
      if (!number(s, "dev", -1, &dev) || !number(s, "speed", 0, &speed)) return false;
      if (speed < 0) return fail(s, "<net speed=...> is negative");
      n.dev = static_cast<int>(dev);
      n.netBw = static_cast<double>(speed) / 8000.0;
      const int self = addNode(n);
      // A NIC without PCI information hangs off its CPU at its own speed.
      both(parent, self, LinkType::Pci, pciBw > 0 ? pciBw : n.netBw, kPciLatencyUs);
    }
    return true;
  }

  // NVLinks name their far end by bus id, which may come later in the file: resolved last.
  // All NVSwitch ports become one NVSwitch node, as in NCCL.
  bool nvlinks() {
    int nvs = -1;
    for (const Pending& p : pendingNvl_) {
      int target = -1;
      for (size_t i = 0; i < g_.nodes.size(); ++i)
        if (g_.nodes[i].type == TopoType::Gpu && g_.nodes[i].id == p.target)
          target = static_cast<int>(i);
      if (target >= 0) {
        mergeLink(p.gpu, target, p.bw);
      } else if (p.tclass == "0x068000") {
        if (nvs < 0) {
          TopoNode n;
          n.type = TopoType::NvSwitch;
          n.id = p.target;
          nvs = addNode(n);
        }
        mergeLink(p.gpu, nvs, p.bw);
        mergeLink(nvs, p.gpu, p.bw);
      }
      // Anything else (a POWER9 CPU bridge) is not modelled.
    }
    return true;
  }

  void mergeLink(int from, int to, double bw) {
    for (TopoLink& l : g_.links)
      if (l.from == from && l.to == to && l.type == LinkType::Nvl) {
        l.bw += bw;
        return;
      }
    link(from, to, LinkType::Nvl, bw, kNvlLatencyUs);
  }

  struct Pending {
    int gpu;
    std::string target, tclass;
    double bw;
  };
  TopoGraph& g_;
  std::string& error_;
  std::map<int, int> cpuModel_;
  std::vector<Pending> pendingNvl_;
};

}  // namespace

bool graphFromXml(const XmlNode& system, TopoGraph* out, std::string* error) {
  *out = TopoGraph{};
  Builder b(out, error);
  return b.system(system);
}

std::vector<int> rankDevices(const TopoGraph& g) {
  std::vector<int> gpus = g.nodesOf(TopoType::Gpu);
  if (!gpus.empty()) {
    std::stable_sort(gpus.begin(), gpus.end(),
                     [&](int a, int b) { return g.nodes[size_t(a)].dev < g.nodes[size_t(b)].dev; });
    return gpus;
  }
  std::vector<int> cpus = g.nodesOf(TopoType::Cpu);
  std::stable_sort(cpus.begin(), cpus.end(),
                   [&](int a, int b) { return g.nodes[size_t(a)].numa < g.nodes[size_t(b)].numa; });
  return cpus;
}

}  // namespace ringcc
