// The tuner: protocol lists parsed as NCCL parses them, settings checked with a WARN that names
// the variable and the valid values, the choice of channels, protocol and algorithm by size,
// and the per-operation TUNING log line.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/base/log.h"
#include "src/core/comm_topo.h"
#include "src/exec/engine_setup.h"
#include "src/topo/search.h"
#include "src/tune/tune.h"
#include "support/test_env.h"
#include "tests/topo/topo_fixtures.h"

using namespace ringcc;
using ringcc::test::CapturedLog;
using ringcc::test::ScopedEnv;

namespace {

constexpr uint32_t kSimple = 1u << kProtoSimple;
constexpr uint32_t kLL = 1u << kProtoLL;
constexpr uint32_t kDirect = 1u << kProtoDirect;

}  // namespace

TEST_CASE("NCCL_PROTO lists: names, case, ^ to exclude, unknown names reported", "[tune]") {
  std::string unknown;
  CHECK(parseProtocols("", &unknown) == kAllProtocols);
  CHECK(unknown.empty());
  CHECK(parseProtocols("LL", &unknown) == kLL);
  CHECK(parseProtocols("simple", &unknown) == kSimple);
  CHECK(parseProtocols(" Simple , ll ", &unknown) == (kSimple | kLL));
  CHECK(parseProtocols("direct", &unknown) == kDirect);
  CHECK(parseProtocols("Simple,LL,Direct", &unknown) == kAllProtocols);
  CHECK(unknown.empty());
  CHECK(parseProtocols("^LL", &unknown) == (kSimple | kDirect));
  CHECK(parseProtocols("^Direct", &unknown) == (kSimple | kLL));
  CHECK(parseProtocols("LL,xyz", &unknown) == kLL);
  CHECK(unknown == "xyz");
  // NCCL's LL128 is not provided: reported, and the rest of the list still counts.
  CHECK(parseProtocols("LL128,Simple", &unknown) == kSimple);
  CHECK(unknown == "LL128");
  // Nothing usable left: every protocol, and the reason is reported.
  CHECK(parseProtocols("^Simple,LL,Direct", &unknown) == kAllProtocols);
  CHECK(unknown.find("no protocol left") != std::string::npos);
  CHECK(parseProtocols("garbage", &unknown) == kAllProtocols);
}

TEST_CASE("settings that cannot be used get a WARN naming variable, value and valid ones",
          "[tune]") {
  {
    ScopedEnv proto("NCCL_PROTO", "xyz");
    CapturedLog log;
    TuneConfig c = tuneConfigFromEnv();
    CHECK(c.protocols == kAllProtocols);
    CHECK(log.contains("NCCL_PROTO=xyz"));
    CHECK(log.contains("valid: Simple, LL"));
  }
  {
    ScopedEnv proto("NCCL_PROTO", "LL");
    CapturedLog log;
    CHECK(tuneConfigFromEnv().protocols == kLL);
    CHECK_FALSE(log.contains("NCCL_PROTO"));
  }
  {
    ScopedEnv algo("NCCL_ALGO", "NVLS,Tree");
    CapturedLog log;
    TuneConfig c = tuneConfigFromEnv();
    CHECK(c.algos == algoBit(Algo::Tree));
    CHECK(log.contains("NCCL_ALGO=NVLS,Tree: NVLS not usable"));
    CHECK(log.contains("valid: Ring, Tree, Doubling"));
    CHECK(log.contains("allowed now: Tree"));
  }
  {
    ScopedEnv algo("NCCL_ALGO", "CollNetDirect");
    CapturedLog log;
    CHECK(tuneConfigFromEnv().algos == kAllAlgos);
    CHECK(log.contains("NCCL_ALGO=CollNetDirect"));
    CHECK(log.contains("no algorithm left"));
  }
  {
    ScopedEnv algo("NCCL_ALGO", "ring");
    CapturedLog log;
    CHECK(tuneConfigFromEnv().algos == algoBit(Algo::Ring));
    CHECK_FALSE(log.contains("NCCL_ALGO"));
  }
  {
    ScopedEnv minCh("NCCL_MIN_NCHANNELS", "100");
    ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "0");
    CapturedLog log;
    TuneConfig c = tuneConfigFromEnv();
    CHECK(c.maxChannels == 1);
    CHECK(c.minChannels == 1);
    CHECK(log.contains("NCCL_MIN_NCHANNELS=100 is outside 1..32"));
    CHECK(log.contains("NCCL_MAX_NCHANNELS=0 is outside 1..32"));
  }
  {
    ScopedEnv chunk("NCCL_CHUNKSIZE", "-5");
    CapturedLog log;
    CHECK(tuneConfigFromEnv().chunkBytes == 0);
    CHECK(log.contains("NCCL_CHUNKSIZE=-5"));
  }
}

TEST_CASE("the tuner is offered only the protocols the connections run", "[tune]") {
  const ConnGeometry withLl{8, 65536, 8192, 0}, noLl{8, 65536, 0, 0};
  // LL memory on the connections: NCCL_PROTO's mask as it is.
  CHECK(protocolsConnectionsRun(kAllProtocols, withLl, 0) == kAllProtocols);
  CHECK(protocolsConnectionsRun(kLL, withLl, 0) == kLL);
  // None (a communicator that uses the network): LL is left out, quietly where others remain ...
  {
    CapturedLog log;
    CHECK(protocolsConnectionsRun(kAllProtocols, noLl, 0) == (kSimple | kDirect));
    CHECK(protocolsConnectionsRun(kSimple, noLl, 0) == kSimple);
    CHECK_FALSE(log.contains("WARN"));
  }
  // ... and with a WARN, once (rank 0), where LL was all NCCL_PROTO allowed: Simple runs.
  {
    CapturedLog log;
    CHECK(protocolsConnectionsRun(kLL, noLl, 0) == kSimple);
    CHECK(log.contains("NCCL_PROTO allows only LL"));
  }
  {
    CapturedLog log;
    CHECK(protocolsConnectionsRun(kLL, noLl, 1) == kSimple);
    CHECK_FALSE(log.contains("NCCL_PROTO allows only LL"));
  }
}

TEST_CASE("NCCL_ALGO lists: Ring, Tree, Doubling, ^ to exclude, NCCL's others reported", "[tune]") {
  std::string unknown;
  CHECK(parseAlgos("", &unknown) == kAllAlgos);
  CHECK(parseAlgos("Tree", &unknown) == algoBit(Algo::Tree));
  CHECK(parseAlgos("ring,TREE", &unknown) == (algoBit(Algo::Ring) | algoBit(Algo::Tree)));
  CHECK(parseAlgos("^tree", &unknown) == (algoBit(Algo::Ring) | algoBit(Algo::Doubling)));
  CHECK(unknown.empty());
  CHECK(parseAlgos("Ring,PAT", &unknown) == algoBit(Algo::Ring));
  CHECK(unknown == "PAT");
  CHECK(parseAlgos("^Ring,Tree,Doubling", &unknown) == kAllAlgos);
  CHECK(unknown.find("no algorithm left") != std::string::npos);
}

namespace {

// The figures of `hosts` hosts of `perHost` ranks, as linkFiguresFor makes them.
LinkFigures hostFigures(int hosts, int perHost) {
  std::vector<PeerInfo> peers;
  for (int h = 0; h < hosts; h++)
    for (int i = 0; i < perHost; i++) {
      PeerInfo p;
      p.rank = static_cast<int>(peers.size());
      p.hostHash = 1000 + static_cast<uint64_t>(h);
      peers.push_back(p);
    }
  return linkFiguresFor(peers);
}

}  // namespace

TEST_CASE("the model picks protocol and algorithm by size, within NCCL_PROTO and NCCL_ALGO",
          "[tune]") {
  TuneConfig c;
  const LinkFigures one = hostFigures(1, 4);
  CHECK(one.nHosts == 1);
  CHECK(one.ranksPerHost == 4);
  // Small on a power of two ranks: recursive doubling under LL, as measured fastest here.
  TuneChoice t = chooseTune(c, one, Coll::AllReduce, 8, 4);
  CHECK(t.protocol == kProtoLL);
  CHECK(t.algo == Algo::Doubling);
  CHECK(t.nChannels == 1);
  CHECK(t.micros > 0);
  // LL only while it is ahead on a CPU (docs/scale.md, "Calibration": up to 64-128 B; from
  // 256 B Simple's in-cache copies cost less than LL's flags): a round of Doubling under
  // Direct moves its data as Simple does.
  CHECK(chooseTune(c, one, Coll::AllReduce, 128, 4).protocol == kProtoLL);
  t = chooseTune(c, one, Coll::AllReduce, 512, 4);
  CHECK(t.protocol == kProtoDirect);
  CHECK(t.algo == Algo::Doubling);
  // Large: the ring under Direct.
  t = chooseTune(c, one, Coll::AllReduce, 64 << 20, 4);
  CHECK(t.algo == Algo::Ring);
  CHECK(t.protocol == kProtoDirect);
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 3).algo == Algo::Ring);  // not a power of two
  CHECK(chooseTune(c, one, Coll::AllGather, 8, 4).algo == Algo::Ring);
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 1).algo == Algo::Ring);
  // Doubling only up to 2 KiB, unless NCCL_ALGO leaves nothing else.
  CHECK(chooseTune(c, one, Coll::AllReduce, 4096, 4).algo == Algo::Ring);
  c.algos = algoBit(Algo::Doubling);
  CHECK(chooseTune(c, one, Coll::AllReduce, 1 << 20, 4).algo == Algo::Doubling);
  c.algos = kAllAlgos;
  // One host: a tree is a chain, never cheaper than the ring.
  for (uint64_t bytes = 8; bytes <= (1u << 30); bytes *= 4)
    CHECK(chooseTune(c, one, Coll::AllReduce, bytes, 3).algo == Algo::Ring);

  // NCCL_ALGO=Ring: no recursive doubling.
  c.algos = algoBit(Algo::Ring);
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 4).algo == Algo::Ring);
  // NCCL_ALGO=Tree: all-reduce by tree; anything else falls back to the ring, saying why.
  c.algos = algoBit(Algo::Tree);
  t = chooseTune(c, one, Coll::AllReduce, 8, 4);
  CHECK(t.algo == Algo::Tree);
  CHECK(t.fallback == nullptr);
  t = chooseTune(c, one, Coll::AllGather, 8, 4);
  CHECK(t.algo == Algo::Ring);
  REQUIRE(t.fallback != nullptr);
  CHECK(std::string(t.fallback).find("NCCL_ALGO") != std::string::npos);
  c.algos = kAllAlgos;

  c.protocols = kSimple | kLL;  // NCCL_PROTO=^Direct
  CHECK(chooseTune(c, one, Coll::AllReduce, 1 << 20, 4).protocol == kProtoSimple);
  c.protocols = kSimple;
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 4).protocol == kProtoSimple);
  c.protocols = kDirect;
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 4).protocol == kProtoDirect);
  c.protocols = kLL;
  CHECK(chooseTune(c, one, Coll::AllReduce, 1 << 30, 4).protocol == kProtoLL);
  c.protocols = kAllProtocols;
  // Channels within NCCL_MIN/MAX_NCHANNELS; on one host they add no bandwidth, so the fewest.
  c.minChannels = 3;
  c.maxChannels = 2;
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 4).nChannels == 2);
  CHECK(chooseTune(c, one, Coll::AllReduce, 8, 1).nChannels == 1);
  c.minChannels = 1;
  c.maxChannels = 4;
  CHECK(chooseTune(c, one, Coll::AllReduce, 1 << 30, 4).nChannels == 1);
}

namespace {

// `hosts` hosts shaped like fixture `name`, a rank per device: the ring search's result and
// the peers (host hashes) it was made for.
RingSearch fixtureSearch(const char* name, int hosts, std::vector<PeerInfo>* peers) {
  const TopoGraph g = ringcc::test::loadFixture(name);
  const int perHost = static_cast<int>(rankDevices(g).size());
  const std::vector<RankPlace> places = blockPlaces(g, hosts * perHost, hosts);
  REQUIRE(places.size() == size_t(hosts * perHost));
  RingSearch s;
  std::string error;
  if (!searchRings(std::vector<const TopoGraph*>(size_t(hosts), &g), places, 32, &s, &error))
    FAIL(error);
  for (const RankPlace& p : places) {
    PeerInfo info;
    info.rank = static_cast<int>(peers->size());
    info.hostHash = 7000 + static_cast<uint64_t>(p.host);
    peers->push_back(info);
  }
  return s;
}

}  // namespace

TEST_CASE("a device communicator's figures come from the topology's ring search", "[tune]") {
  std::vector<PeerInfo> dgxPeers, pciePeers, clusterPeers;
  const RingSearch dgx = fixtureSearch("dgx_h100", 1, &dgxPeers);
  const RingSearch pcie = fixtureSearch("pcie_8gpu", 1, &pciePeers);
  const RingSearch cluster = fixtureSearch("dgx_h100", 4, &clusterPeers);
  REQUIRE(dgx.nChannels() > 1);
  const LinkFigures f = deviceLinkFigures(dgxPeers, dgx);
  CHECK(f.nHosts == 1);
  CHECK(f.ranksPerHost == 8);
  CHECK(f.intra.channelGBs == dgx.bwPerChannel);
  CHECK(f.intra.maxGBs == dgx.bwPerChannel * dgx.nChannels());
  CHECK(f.intra.alphaUs == kNvlinkHopUs);
  CHECK(f.callUs == kDeviceCallUs);
  // GPUs scale protocols by NCCL's factors, hosts by their own: a GPU's LL hop saves far more.
  CHECK(f.protocols[kProtoLL].alpha < hostFigures(1, 8).protocols[kProtoLL].alpha);
  CHECK(f.protocols[kProtoLL].alpha == deviceProtoFactors()[kProtoLL].alpha);
  const LinkFigures p = deviceLinkFigures(pciePeers, pcie);
  CHECK(p.intra.alphaUs == kPciHopUs);  // its rings cross the socket link
  CHECK(p.intra.maxGBs < f.intra.maxGBs);
  const LinkFigures c = deviceLinkFigures(clusterPeers, cluster);
  CHECK(c.nHosts == 4);
  CHECK(c.inter.alphaUs == kNetHopUs);
  CHECK(c.inter.maxGBs == cluster.bwPerChannel * cluster.nChannels());

  // Large messages take as many channels as the search found (each adds bandwidth), never more
  // (they would share its links); on host memory, where one thread drives every channel, one.
  TuneConfig config;
  config.maxChannels = 32;
  const TuneChoice big = chooseTune(config, f, Coll::AllReduce, 1ull << 30, 8);
  CHECK(big.nChannels == dgx.nChannels());
  CHECK(chooseTune(config, p, Coll::AllReduce, 1ull << 30, 8).nChannels == pcie.nChannels());
  CHECK(chooseTune(config, hostFigures(1, 8), Coll::AllReduce, 1ull << 30, 8).nChannels == 1);
  // NVSwitch moves a large all-reduce faster than PCIe, by the ratio of their figures.
  const double pcieUs = chooseTune(config, p, Coll::AllReduce, 1ull << 30, 8).micros;
  CHECK(pcieUs > 2 * big.micros);
  // A small one costs about a launch and its hops, not bandwidth.
  CHECK(chooseTune(config, f, Coll::AllReduce, 8, 8).micros < 100);
  // A search at speed 0 (no usable link) still gives usable figures.
  RingSearch none = dgx;
  none.bwPerChannel = 0;
  const LinkFigures z = deviceLinkFigures(dgxPeers, none);
  CHECK(z.intra.channelGBs > 0);
  CHECK(std::isfinite(chooseTune(config, z, Coll::AllReduce, 1 << 20, 8).micros));
}

TEST_CASE("across many hosts the tree wins small and mid sizes, the ring large ones", "[tune]") {
  TuneConfig c;
  const LinkFigures many = hostFigures(64, 2);
  CHECK(many.nHosts == 64);
  CHECK(chooseTune(c, many, Coll::AllReduce, 1 << 16, 128).algo == Algo::Tree);
  CHECK(chooseTune(c, many, Coll::AllReduce, 1ull << 34, 128).algo == Algo::Ring);
  // Two hosts: the tree's depth is no shorter than the ring's lap; the ring wins.
  const LinkFigures two = hostFigures(2, 2);
  CHECK(chooseTune(c, two, Coll::AllReduce, 1 << 20, 4).algo != Algo::Tree);
}

TEST_CASE("the model is monotonic: more bytes never cost less, a choice's time is positive",
          "[tune]") {
  for (const LinkFigures& links : {hostFigures(1, 2), hostFigures(1, 8), hostFigures(16, 8)}) {
    const int n = links.nHosts * links.ranksPerHost;
    for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                      Coll::Reduce, Coll::AllToAll, Coll::Send}) {
      for (int a = 0; a < kNumAlgos; a++) {
        for (Protocol p : {kProtoSimple, kProtoLL, kProtoDirect}) {
          for (int ch : {1, 2, 4}) {
            const ModelChoice m{static_cast<Algo>(a), p, ch};
            double last = 0;
            for (double bytes = 0; bytes <= 1e10; bytes = bytes * 2 + 8) {
              const double t = estimateMicros(links, coll, bytes, n, m);
              if (!algoSupports(m.algo, coll, n)) {
                CHECK(std::isinf(t));
                break;
              }
              CHECK(t > 0);
              CHECK(t >= last);
              last = t;
            }
          }
        }
      }
    }
    // The tuner's pick is never more expensive than any choice it considers (Doubling: up to
    // 2 KiB per rank, where it was measured).
    TuneConfig c;
    for (double bytes = 8; bytes <= 1e10; bytes *= 8) {
      const TuneChoice t = chooseTune(c, links, Coll::AllReduce, (uint64_t)bytes, n);
      for (int a = 0; a < kNumAlgos; a++)
        if (static_cast<Algo>(a) != Algo::Doubling || bytes <= 2048)
          for (Protocol p : {kProtoSimple, kProtoLL, kProtoDirect})
            CHECK(t.micros <=
                  estimateMicros(links, Coll::AllReduce, bytes, n, {static_cast<Algo>(a), p, 1}));
    }
  }
}

TEST_CASE("NCCL_DEBUG_SUBSYS=TUNING logs algorithm, protocol and channels per operation",
          "[tune]") {
  CapturedLog log;
  ScopedEnv debug("NCCL_DEBUG", "INFO");
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "TUNING");
  resetLogging();
  ncclComm_t comm = nullptr;
  int dev = 0;
  REQUIRE(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
  std::vector<float> buf(1 << 16, 1.0f);
  REQUIRE(ncclAllReduce(buf.data(), buf.data(), 2, ncclFloat32, ncclSum, comm, nullptr) ==
          ncclSuccess);
  REQUIRE(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) ==
          ncclSuccess);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
  INFO(log.text());
  CHECK(log.contains("AllReduce: 2 x 4 bytes, 1 ranks: algorithm Ring, protocol "));
  CHECK(
      log.contains("AllReduce: 65536 x 4 bytes, 1 ranks: algorithm Ring, protocol Direct, 1 "
                   "channels (model: "));
}

TEST_CASE("an NCCL_BUFFSIZE out of range is clamped with a WARN when a communicator is made",
          "[tune]") {
  for (const char* value : {"1", "0", "-5", "100000000000"}) {
    ScopedEnv buffsize("NCCL_BUFFSIZE", value);
    CapturedLog log;
    ncclComm_t comm = nullptr;
    int dev = 0;
    REQUIRE(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
    REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
    INFO(log.text());
    CHECK(log.contains(std::string("NCCL_BUFFSIZE=") + value + " is out of range"));
  }
}

TEST_CASE("ncclGroupSimulateEnd reports the model's estimate of the tuner's choice", "[tune]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
  std::vector<float> buf(1 << 20, 1.0f);
  // The estimate of one all-reduce of `count` floats on both ranks (one operation per rank).
  auto simulate = [&](size_t count) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (ncclComm_t c : comms)
      REQUIRE(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, c, nullptr) ==
              ncclSuccess);
    REQUIRE(ncclGroupSimulateEnd(&info) == ncclSuccess);
    return info.estimatedTime;
  };
  const float small = simulate(2), large = simulate(buf.size());
  const LinkFigures links = hostFigures(1, 2);
  const TuneConfig config = tuneConfigFromEnv();
  CHECK(small == Approx(2 * chooseTune(config, links, Coll::AllReduce, 8, 2).micros));
  CHECK(large == Approx(2 * chooseTune(config, links, Coll::AllReduce, buf.size() * 4, 2).micros));
  CHECK(large > small);
  // Nothing ran: the buffer still holds its ones.
  CHECK(buf[0] == 1.0f);
  for (ncclComm_t c : comms) REQUIRE(ncclCommDestroy(c) == ncclSuccess);
}
