#include "src/tune/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ringcc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTreeBwFactor = 0.92;

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

// GB/s is 1e3 bytes per microsecond.
double linkBytesPerMicro(const LinkClass& l, int nChannels, const ProtoFactors& p) {
  return std::min(l.channelGBs * nChannels, l.maxGBs) * p.bandwidth * 1e3;
}

}  // namespace

ProtoTable hostProtoFactors() {
  ProtoTable t;
  // Calibrated here (docs/scale.md, "Calibration": 2 processes, quiet machine): an LL hop
  // takes 0.72-0.76 of a Simple one (no tail to publish, no head to wait for; the flags ride
  // with the data). LL moves 0.29-0.32 of Simple's bandwidth at 2 MiB (half of every 16-byte
  // line is flags, slices are small); 0.2 is set instead because at 64-512 B, where the two
  // compete, Simple's copies stay in cache and cost less than the model's bandwidth says:
  // 0.2 puts the crossover at ~160 B, where alternating runs found it (2 processes: LL ahead
  // at 8 B, level at 16-128 B, behind from 256 B; on 4, the spread exceeds the difference).
  t.by[kProtoLL] = {0.75, 0.2};
  // Sends by reference skip the sender's copy into the slot: ahead of Simple between threads
  // (1.37x at 64 MiB); between processes only with ncclMemAlloc buffers, else level with it.
  t.by[kProtoDirect] = {1.0, 1.1};
  return t;
}

ProtoTable deviceProtoFactors() {
  ProtoTable t;
  // Not measured here (no GPU). LL's alpha is NCCL's ratio (src/graph/tuning.cc: a ring hop
  // over NVLink takes 0.47 us under LL against 3.4 under Simple); its bandwidth, 0.17, is a
  // little below NCCL's (a quarter of Simple's for all-reduce), as the model had it before.
  t.by[kProtoLL] = {0.14, 0.17};
  t.by[kProtoDirect] = {1.0, 1.1};
  return t;
}

LinkClass hostShmLink() {
  // One thread drives every channel of a rank, so channels add no bandwidth (maxGBs ==
  // channelGBs). Measured by bench/scale/validate.py calibrate --procs: 2 processes,
  // NCCL_ALGO=Ring, NCCL_PROTO=Simple, 8-512 B and 64 MiB (docs/scale.md, "Calibration").
  return LinkClass{0.5, 4.0, 4.0};
}

LinkClass hostUcxLink() {
  // UCX over TCP on a veth pair (bench/net/veth_bench.sh, docs/benchmarks.md): 0.9 GB/s at
  // 16-64 MiB on a quiet machine since sends go by reference (0.55 before), tens of
  // microseconds per message through the proxy thread.
  return LinkClass{40.0, 0.9, 0.9};
}

namespace {

// Hosts (by PeerInfo::hostHash) and the ranks of the largest one.
LinkFigures hostCounts(const std::vector<PeerInfo>& peers) {
  LinkFigures f;
  std::vector<uint64_t> hosts;
  std::vector<int> perHost;
  for (const PeerInfo& p : peers) {
    auto it = std::find(hosts.begin(), hosts.end(), p.hostHash);
    if (it == hosts.end()) {
      hosts.push_back(p.hostHash);
      perHost.push_back(1);
    } else {
      perHost[static_cast<size_t>(it - hosts.begin())]++;
    }
  }
  f.nHosts = std::max<int>(1, static_cast<int>(hosts.size()));
  f.ranksPerHost = perHost.empty() ? 1 : *std::max_element(perHost.begin(), perHost.end());
  return f;
}

}  // namespace

LinkFigures linkFiguresFor(const std::vector<PeerInfo>& peers) {
  LinkFigures f = hostCounts(peers);
  f.intra = hostShmLink();
  f.inter = hostUcxLink();
  return f;
}

LinkFigures deviceLinkFigures(const std::vector<PeerInfo>& peers, const RingSearch& search) {
  LinkFigures f = hostCounts(peers);
  // A search that found no usable link (speed 0) still runs its ring: give it a nominal
  // figure rather than a division by zero.
  const double perChannel = search.bwPerChannel > 0 ? search.bwPerChannel : 1.0;
  const double all = perChannel * std::max(1, search.nChannels());
  const bool nvlink = search.worst == LinkType::Loc || search.worst == LinkType::Nvl;
  f.intra = LinkClass{nvlink ? kNvlinkHopUs : kPciHopUs, perChannel, all};
  // Across hosts the search's figure is already the ring's bottleneck (the NICs included).
  f.inter = LinkClass{kNetHopUs, perChannel, all};
  f.callUs = kDeviceCallUs;
  f.channelUs = 0.0;
  f.protocols = deviceProtoFactors();
  return f;
}

bool algoSupports(Algo algo, Coll coll, int nranks) {
  switch (algo) {
    case Algo::Ring:
      return true;
    case Algo::Tree:
      return coll == Coll::AllReduce;  // one rank: a tree of one, a local copy
    case Algo::Doubling:
      return coll == Coll::AllReduce && nranks >= 2 && (nranks & (nranks - 1)) == 0;
  }
  return false;
}

double estimateMicros(const LinkFigures& links, Coll coll, double bytes, int nranks,
                      const ModelChoice& c) {
  if (!algoSupports(c.algo, coll, nranks)) return kInf;
  const ProtoFactors& pf = links.protocols[c.protocol];
  const int n = nranks;
  const int hosts = std::clamp(links.nHosts, 1, n);
  const bool multiHost = hosts > 1;
  const double aIntra = links.intra.alphaUs * pf.alpha;
  const double aInter = links.inter.alphaUs * pf.alpha;
  const double bwIntra = linkBytesPerMicro(links.intra, c.nChannels, pf);
  const double bwInter = linkBytesPerMicro(links.inter, c.nChannels, pf);
  // The slowest link a schedule crosses, and its hop latency.
  const double bw = multiHost ? std::min(bwIntra, bwInter) : bwIntra;
  const double alpha = multiHost ? std::max(aIntra, aInter) : aIntra;
  double t = links.callUs + (c.nChannels - 1) * links.channelUs;
  if (n == 1) return t + bytes / bwIntra;
  // One lap of a ring: `hosts` hops between hosts (when there are several), the rest inside.
  const int interHops = multiHost ? hosts : 0;
  const double lap = interHops * aInter + (n - interHops) * aIntra;
  switch (coll) {
    case Coll::AllReduce:
      if (c.algo == Algo::Tree) {
        const int ranksPerHost = std::max(1, std::min(links.ranksPerHost, n));
        const double depth = ceilLog2(hosts) * aInter + (ranksPerHost - 1) * aIntra;
        // NCCL's model (src/graph/tuning.cc): the tree's bus bandwidth is 0.92 of the links',
        // and its algorithm bandwidth half of that.
        return t + 2 * depth + 2 * bytes / (kTreeBwFactor * bw);
      }
      if (c.algo == Algo::Doubling) {
        // A round's send is never by reference (the next round overwrites it) and goes through
        // the p2p connections' smaller slots: its bytes count twice outside LL, which puts the
        // crossover with the ring at 2-4 KiB on 2 ranks, where docs/benchmarks.md measured it.
        const int rounds = ceilLog2(n);
        const double copies = c.protocol == kProtoLL ? 1.0 : 2.0;
        return t + rounds * (alpha + copies * bytes / bw);
      }
      return t + lap * 2.0 * (n - 1) / n + 2.0 * (n - 1) / n * bytes / bw;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      return t + lap * (n - 1.0) / n + (n - 1) * bytes / bw;
    case Coll::AllToAll:
      return t + alpha + (n - 1) * bytes / bw;
    case Coll::Gather:
    case Coll::Scatter:
      return t + alpha + (n - 1) * bytes / bw;
    case Coll::Send:
    case Coll::Recv:
      return t + alpha + bytes / bw;
    default:  // chains: broadcast, reduce
      return t + lap * (n - 1.0) / n + bytes / bw;
  }
}

}  // namespace ringcc
