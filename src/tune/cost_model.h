// The cost model: an alpha-beta estimate of one collective's time for each (algorithm,
// protocol, channel count), from the figures of the links it crosses. The tuner picks the
// cheapest allowed choice by it; ncclGroupSimulateEnd reports it; bench/scale extrapolates it
// to thousands of GPUs. Pure.
//
//   time = call + hops x alpha(link, protocol) + bytes on the busiest link / bandwidth
//
//   all-reduce    hops                                   bytes on the busiest link
//   Ring          2(n-1) (2H of them between hosts)      2(n-1)/n x S
//   Tree          2 (ceil(log2 H) + R - 1)               2 x S / 0.92    (NCCL's tree model)
//   Doubling      log2 n rounds                          log2 n x S (x2 outside LL: no references)
//   (n ranks, H hosts of R ranks, S bytes; other collectives: their ring or chain schedule)
//
// Bandwidth: a channel gets `channelGBs` of a link, all channels together at most `maxGBs`; a
// path's bandwidth is its slowest link's. Each channel past the first adds `channelUs`
// (another runner to start and finish), so channels that add no bandwidth are not chosen.
// Protocols scale alpha and bandwidth (LL: no counter round trip, half of each line is flags).
#pragma once

#include <vector>

#include "kernels/connector_device.h"
#include "src/sched/builders.h"
#include "src/topo/search.h"
#include "transports/transport.h"

namespace ringcc {

// One kind of link: between two ranks of a host, or between hosts (a rank's share of its
// host's network: one NIC per GPU on a DGX).
struct LinkClass {
  double alphaUs = 1.0;     // one hop's latency under Simple
  double channelGBs = 1.0;  // what one channel moves over it (GB/s, one direction)
  double maxGBs = 1.0;      // what all channels together move over it
};

// How a protocol scales a link's alpha and bandwidth.
struct ProtoFactors {
  double alpha = 1.0;
  double bandwidth = 1.0;
};

// Per protocol (indexed by Protocol): on GPUs, NCCL's ratios (deviceProtoFactors); on host
// memory, the ones calibrated here (hostProtoFactors). They differ a lot: a GPU's LL saves
// the fences and flag round trips that dominate a small Simple step, while a CPU's Simple step
// costs little more than its LL one.
struct ProtoTable {
  ProtoFactors by[kNumProtocols];
  const ProtoFactors& operator[](Protocol p) const { return by[p]; }
};
ProtoTable hostProtoFactors();
ProtoTable deviceProtoFactors();

// What the model knows of a communicator's links: for host memory, from the transports in
// use (linkFiguresFor); for device memory, from the topology graph's ring search
// (deviceLinkFigures).
struct LinkFigures {
  int nHosts = 1;
  int ranksPerHost = 1;    // on the largest host
  LinkClass intra;         // shm, p2p: ranks of one host
  LinkClass inter;         // ucx: across hosts
  double callUs = 0.2;     // fixed cost of one operation (API, plan, runner start)
  double channelUs = 0.5;  // cost of each channel past the first
  ProtoTable protocols = hostProtoFactors();  // deviceLinkFigures sets the device's
};

// The figures calibrated on this project's host (docs/scale.md, "Calibration"): shared memory
// between the ranks of a host, UCX over TCP between hosts.
LinkClass hostShmLink();
LinkClass hostUcxLink();

// The figures for `peers` as the transports connect them now: hosts from PeerInfo::hostHash,
// shared memory inside a host, UCX between hosts.
LinkFigures linkFiguresFor(const std::vector<PeerInfo>& peers);

// NCCL's own latencies for its Simple-protocol ring on GPUs (src/graph/tuning.cc): per hop
// over NVLink, over PCIe or a socket link, and over the network; and per operation (a kernel
// launch and its setup). Not measured here (no GPU); bench/scale uses them too.
constexpr double kNvlinkHopUs = 3.4;
constexpr double kPciHopUs = 5.7;
constexpr double kNetHopUs = 14.0;
constexpr double kDeviceCallUs = 8.4;

// The figures of a device (CUDA) communicator: bandwidth from the topology graph as the ring
// search found it (`search.bwPerChannel` per channel, and at most that times the number of
// channels it found: more channels would share the same links), latencies by the worst link
// type inside a host (kNvlinkHopUs or kPciHopUs) and kNetHopUs between hosts. Each channel
// is a block of its own on the GPU, so channels add bandwidth and cost nothing to start.
LinkFigures deviceLinkFigures(const std::vector<PeerInfo>& peers, const RingSearch& search);

struct ModelChoice {
  Algo algo = Algo::Ring;
  Protocol protocol = kProtoSimple;
  int nChannels = 1;
};

// Estimated microseconds of `coll` moving `bytes` (NCCL's count times the element size) over
// `nranks` ranks with choice `c`. Infinity for a choice that cannot run (Doubling on a number of
// ranks that is not a power of two; Tree or Doubling for anything but all-reduce).
double estimateMicros(const LinkFigures& links, Coll coll, double bytes, int nranks,
                      const ModelChoice& c);

// Whether `algo` can run `coll` on `nranks` ranks at all.
bool algoSupports(Algo algo, Coll coll, int nranks);

}  // namespace ringcc
