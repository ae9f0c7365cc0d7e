#include "src/topo/search.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>

namespace ringcc {
namespace {

// Per-channel speeds tried, in GB/s (NCCL's list for recent GPUs, extended downwards for
// hosts and networks).
constexpr double kSpeeds[] = {60, 50, 40, 30, 24, 20,  15,  12,  11,  10,   9,
                              7,  6,  5,  4,  3,  2.4, 1.2, 0.6, 0.3, 0.24, 0.12};
constexpr long kStepBudget = 50000;  // DFS steps per ring before giving up on it

struct Route {
  std::vector<int> links;  // link indices, in order
  double bw = 0;           // bottleneck; +inf for a device to itself
  LinkType worst = LinkType::Loc;
};

// Widest paths from every node (max of the min link bandwidth, fewest hops on ties). Only
// PCI switches, NVSwitches and CPUs forward. Towards a NIC a GPU may also forward what
// another GPU sent it over NVLink (NCCL's PXN): the GPU nearest the NIC relays.
class Routes {
 public:
  explicit Routes(const TopoGraph& g) : g_(g), plain_(g.nodes.size()), pxn_(g.nodes.size()) {}

  const Route& get(int from, int to) {
    const bool pxn =
        g_.nodes[size_t(from)].type == TopoType::Gpu && g_.nodes[size_t(to)].type == TopoType::Nic;
    auto& row = (pxn ? pxn_ : plain_)[size_t(from)];
    if (row.empty()) row = compute(from, pxn);
    return row[size_t(to)];
  }

 private:
  std::vector<Route> compute(int src, bool pxn) {
    const size_t n = g_.nodes.size();
    std::vector<Route> best(n);
    std::vector<double> bw(n, -1);
    std::vector<int> hops(n, std::numeric_limits<int>::max());
    std::vector<char> done(n, 0), viaNvl(n, 0);
    bw[size_t(src)] = std::numeric_limits<double>::infinity();
    hops[size_t(src)] = 0;
    for (;;) {
      int u = -1;
      for (size_t i = 0; i < n; ++i)
        if (!done[i] && bw[i] >= 0 &&
            (u < 0 || bw[i] > bw[size_t(u)] ||
             (bw[i] == bw[size_t(u)] && hops[i] < hops[size_t(u)])))
          u = static_cast<int>(i);
      if (u < 0) break;
      done[size_t(u)] = 1;
      const TopoType t = g_.nodes[size_t(u)].type;
      const bool forwards = u == src || t == TopoType::Pci || t == TopoType::NvSwitch ||
                            t == TopoType::Cpu || (pxn && t == TopoType::Gpu && viaNvl[size_t(u)]);
      if (!forwards) continue;
      for (size_t li = 0; li < g_.links.size(); ++li) {
        const TopoLink& l = g_.links[li];
        if (l.from != u || done[size_t(l.to)]) continue;
        const double b = std::min(bw[size_t(u)], l.bw);
        // Passing through a CPU counts as an extra hop: on a tie, a path under one PCI
        // switch (or over NVLink) beats one through the root complex.
        const int h = hops[size_t(u)] + 1 + (t == TopoType::Cpu && u != src ? 1 : 0);
        if (b > bw[size_t(l.to)] || (b == bw[size_t(l.to)] && h < hops[size_t(l.to)])) {
          bw[size_t(l.to)] = b;
          hops[size_t(l.to)] = h;
          best[size_t(l.to)] = best[size_t(u)];
          best[size_t(l.to)].links.push_back(static_cast<int>(li));
          best[size_t(l.to)].worst = std::max(best[size_t(u)].worst, l.type);
          viaNvl[size_t(l.to)] = u == src ? l.type == LinkType::Nvl : viaNvl[size_t(u)];
        }
      }
    }
    for (size_t i = 0; i < n; ++i) best[i].bw = bw[i] < 0 ? 0 : bw[i];
    return best;
  }

  const TopoGraph& g_;
  std::vector<std::vector<Route>> plain_, pxn_;
};

// One host's part of the search: its devices in some order per channel.
class HostSearch {
 public:
  HostSearch(const TopoGraph& g, std::vector<int> devices, bool multiHost)
      : g_(g), routes_(g), devices_(std::move(devices)) {
    if (multiHost) nics_ = g.nodesOf(TopoType::Nic);
  }

  // Packs up to maxChannels rings at `speed`; returns the device order of each.
  std::vector<std::vector<int>> pack(double speed, int maxChannels) {
    cap_.assign(g_.links.size(), 0);
    for (size_t i = 0; i < g_.links.size(); ++i) cap_[i] = g_.links[i].bw;
    netIn_.clear();
    netOut_.clear();
    for (int nic : nics_) netIn_[nic] = netOut_[nic] = g_.nodes[size_t(nic)].netBw;
    std::vector<std::vector<int>> out;
    for (int c = 0; c < maxChannels; ++c) {
      budget_ = kStepBudget;
      std::vector<int> order;
      if (!ring(speed, c, &order)) break;
      out.push_back(std::move(order));
    }
    return out;
  }

  LinkType worst(const std::vector<int>& order) {
    LinkType w = LinkType::Loc;
    for (size_t i = 0; i + 1 < order.size(); ++i)
      w = std::max(w, routes_.get(order[i], order[i + 1]).worst);
    if (order.size() > 1 && nics_.empty())
      w = std::max(w, routes_.get(order.back(), order.front()).worst);
    return w;
  }

 private:
  bool take(const Route& r, double speed) {
    if (r.bw <= 0) return false;
    for (int li : r.links)
      if (cap_[size_t(li)] + 1e-9 < speed) return false;
    for (int li : r.links) cap_[size_t(li)] -= speed;
    return true;
  }
  void give(const Route& r, double speed) {
    for (int li : r.links) cap_[size_t(li)] += speed;
  }

  bool ring(double speed, int channel, std::vector<int>* order) {
    const size_t n = devices_.size();
    if (n == 0) return true;
    int nic = -1;
    if (!nics_.empty()) {
      nic = nics_[size_t(channel) % nics_.size()];
      if (netIn_[nic] + 1e-9 < speed || netOut_[nic] + 1e-9 < speed) return false;
    }
    std::vector<char> used(n, 0);
    long& budget = budget_;
    order->clear();
    // The first device: without a NIC the device of the host's lowest rank (a host ring is a
    // cycle; starting there keeps rank order where it can), with one the nearest to the NIC.
    std::vector<size_t> firsts;
    if (nic < 0) {
      firsts.push_back(0);
    } else {
      firsts = preference(nic);
    }
    for (size_t f : firsts) {
      const Route* enter = nic >= 0 ? &routes_.get(nic, devices_[f]) : nullptr;
      if (enter && !take(*enter, speed)) continue;
      used[f] = 1;
      order->push_back(devices_[f]);
      if (extend(speed, nic, &used, order, &budget)) {
        if (nic >= 0) {
          netIn_[nic] -= speed;
          netOut_[nic] -= speed;
        }
        return true;
      }
      order->pop_back();
      used[f] = 0;
      if (enter) give(*enter, speed);
      if (budget <= 0) break;
    }
    return false;
  }

  // Every device by route from `from`: widest first; on a tie the shorter route (under the
  // same switch before through the CPU), then index order. Sorted once per node: the search
  // walks it at every step, skipping the devices already in the ring.
  const std::vector<size_t>& preference(int from) {
    std::vector<size_t>& c = preference_[from];
    if (c.size() == devices_.size()) return c;
    c.clear();
    for (size_t i = 0; i < devices_.size(); ++i) c.push_back(i);
    std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) {
      const Route& ra = routes_.get(from, devices_[a]);
      const Route& rb = routes_.get(from, devices_[b]);
      if (ra.bw != rb.bw) return ra.bw > rb.bw;
      return ra.links.size() < rb.links.size();
    });
    return c;
  }

  bool extend(double speed, int nic, std::vector<char>* used, std::vector<int>* order,
              long* budget) {
    if (--*budget <= 0) return false;
    const int last = order->back();
    if (order->size() == devices_.size()) {
      // Close: back to the NIC, or round to the first device.
      if (nic >= 0) return take(routes_.get(last, nic), speed);
      if (order->size() == 1) return true;
      return take(routes_.get(last, order->front()), speed);
    }
    for (size_t next : preference(last)) {
      if ((*used)[next]) continue;  // (each try below leaves `used` as it found it)
      const Route& hop = routes_.get(last, devices_[next]);
      if (!take(hop, speed)) continue;
      (*used)[next] = 1;
      order->push_back(devices_[next]);
      if (extend(speed, nic, used, order, budget)) return true;
      order->pop_back();
      (*used)[next] = 0;
      give(hop, speed);
      if (*budget <= 0) return false;
    }
    return false;
  }

  const TopoGraph& g_;
  Routes routes_;
  std::vector<int> devices_;
  std::vector<int> nics_;
  std::vector<double> cap_;
  std::map<int, double> netIn_, netOut_;
  std::map<int, std::vector<size_t>> preference_;  // node -> devices, best route first
  long budget_ = 0;
};

}  // namespace

bool searchRings(const std::vector<const TopoGraph*>& graphs, const std::vector<RankPlace>& places,
                 int maxChannels, RingSearch* out, std::string* error) {
  *out = RingSearch{};
  maxChannels = std::max(1, maxChannels);
  // Hosts in order of their lowest rank; each host's ranks by device.
  std::vector<int> hostOrder;
  std::map<int, std::map<int, std::vector<int>>> ranksOn;  // host -> device -> ranks
  for (size_t r = 0; r < places.size(); ++r) {
    const RankPlace& p = places[r];
    if (p.host < 0 || p.host >= static_cast<int>(graphs.size()) || !graphs[size_t(p.host)]) {
      *error = "rank " + std::to_string(r) + " is on host " + std::to_string(p.host) +
               ", which has no graph";
      return false;
    }
    const TopoGraph& g = *graphs[size_t(p.host)];
    if (p.device < 0 || p.device >= static_cast<int>(g.nodes.size()) ||
        (g.nodes[size_t(p.device)].type != TopoType::Gpu &&
         g.nodes[size_t(p.device)].type != TopoType::Cpu)) {
      *error = "rank " + std::to_string(r) + " runs on node " + std::to_string(p.device) +
               ", which is not a GPU or CPU of host " + std::to_string(p.host);
      return false;
    }
    if (!ranksOn.count(p.host)) hostOrder.push_back(p.host);
    ranksOn[p.host][p.device].push_back(static_cast<int>(r));
  }
  const bool multiHost = hostOrder.size() > 1;
  out->crossesHosts = multiHost;

  // Hosts with the same graph and the same devices in use search alike: one search each.
  using Key = std::pair<const TopoGraph*, std::vector<int>>;
  std::map<Key, std::unique_ptr<HostSearch>> searches;
  std::vector<HostSearch*> hostSearch(graphs.size(), nullptr);
  for (int h : hostOrder) {
    // The device of the host's lowest rank first (a host ring without NICs starts there, so
    // that the ring keeps rank order where the topology allows), then the others in graph
    // order.
    std::vector<int> devices;
    int lowest = -1, lowestDev = -1;
    for (const auto& [dev, ranks] : ranksOn[h])
      if (lowest < 0 || ranks.front() < lowest) {
        lowest = ranks.front();
        lowestDev = dev;
      }
    devices.push_back(lowestDev);
    for (const auto& [dev, ranks] : ranksOn[h])
      if (dev != lowestDev) devices.push_back(dev);
    Key key{graphs[size_t(h)], devices};
    auto& s = searches[key];
    if (!s) s = std::make_unique<HostSearch>(*graphs[size_t(h)], devices, multiHost);
    hostSearch[size_t(h)] = s.get();
  }

  double bestScore = -1, bestSpeed = 0;
  std::map<HostSearch*, std::vector<std::vector<int>>> best;
  for (double speed : kSpeeds) {
    if (speed * maxChannels <= bestScore + 1e-9) break;  // slower speeds cannot do better
    int channels = maxChannels;
    std::map<HostSearch*, std::vector<std::vector<int>>> orders;
    for (auto& [key, s] : searches) {
      orders[s.get()] = s->pack(speed, maxChannels);
      channels = std::min(channels, static_cast<int>(orders[s.get()].size()));
    }
    const double score = speed * channels;
    if (channels > 0 && score > bestScore + 1e-9) {
      bestScore = score;
      bestSpeed = speed;
      for (auto& [s, o] : orders) o.resize(size_t(channels));
      best = std::move(orders);
    }
  }
  int channels = 1;
  if (bestScore < 0) {
    // Nothing fits (links without bandwidth): devices in graph order, one ring.
    for (auto& [key, s] : searches) best[s.get()] = {key.second};
  } else {
    channels = static_cast<int>(best.begin()->second.size());
  }
  out->bwPerChannel = bestScore < 0 ? 0 : bestSpeed;
  for (int c = 0; c < channels; ++c) {
    std::vector<int> ring;
    for (int h : hostOrder)
      for (int dev : best[hostSearch[size_t(h)]][size_t(c)])
        for (int r : ranksOn[h][dev]) ring.push_back(r);
    out->rings.push_back(std::move(ring));
  }
  HostSearch* first = hostSearch[size_t(hostOrder.empty() ? 0 : hostOrder[0])];
  if (first) out->worst = first->worst(best[first][0]);
  return true;
}

std::vector<std::string> ringLines(const RingSearch& s) {
  std::vector<std::string> lines;
  char head[32];
  for (int c = 0; c < s.nChannels(); ++c) {
    std::snprintf(head, sizeof(head), "Channel %02d/%02d :", c, s.nChannels());
    std::string line = head;
    for (int r : s.rings[size_t(c)]) line += " " + std::to_string(r);
    lines.push_back(std::move(line));
  }
  return lines;
}

bool ringsValid(const RingSearch& s, int nranks, std::string* error) {
  if (s.rings.empty()) {
    *error = "no rings";
    return false;
  }
  for (int c = 0; c < s.nChannels(); ++c) {
    const auto& ring = s.rings[size_t(c)];
    std::vector<int> seen(size_t(nranks), 0);
    for (int r : ring) {
      if (r < 0 || r >= nranks || seen[size_t(r)]++) {
        *error = "channel " + std::to_string(c) + " holds rank " + std::to_string(r) +
                 (r < 0 || r >= nranks ? ", out of range" : " twice");
        return false;
      }
    }
    if (static_cast<int>(ring.size()) != nranks) {
      *error = "channel " + std::to_string(c) + " holds " + std::to_string(ring.size()) +
               " ranks, not " + std::to_string(nranks);
      return false;
    }
  }
  return true;
}

}  // namespace ringcc
