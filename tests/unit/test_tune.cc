// The tuner: protocol lists parsed as NCCL parses them, settings checked with a WARN that names
// the variable and the valid values, the choice of channels, protocol and algorithm by size,
// and the per-operation TUNING log line.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/core/log.h"
#include "src/tune/tune.h"
#include "support/test_env.h"

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
    ScopedEnv algo("NCCL_ALGO", "Tree");
    CapturedLog log;
    TuneConfig c = tuneConfigFromEnv();
    CHECK_FALSE(c.ringOnly);
    CHECK(log.contains("NCCL_ALGO=Tree"));
    CHECK(log.contains("valid: Ring, Doubling"));
  }
  {
    ScopedEnv algo("NCCL_ALGO", "ring");
    CHECK(tuneConfigFromEnv().ringOnly);
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

TEST_CASE("protocol and algorithm by size; channels within the bounds", "[tune]") {
  TuneConfig c;
  TuneChoice t = chooseTune(c, Coll::AllReduce, 8, 4);
  CHECK(t.protocol == kProtoLL);
  CHECK(t.algo == Algo::Doubling);
  CHECK(t.nChannels == 1);
  t = chooseTune(c, Coll::AllReduce, c.llMaxBytes + 1, 4);
  CHECK(t.protocol == kProtoDirect);
  CHECK(t.algo == Algo::Doubling);
  t = chooseTune(c, Coll::AllReduce, c.doublingMaxBytes + 1, 4);
  CHECK(t.algo == Algo::Ring);
  CHECK(chooseTune(c, Coll::AllReduce, 8, 3).algo == Algo::Ring);  // not a power of two
  CHECK(chooseTune(c, Coll::AllGather, 8, 4).algo == Algo::Ring);
  CHECK(chooseTune(c, Coll::AllReduce, 8, 1).algo == Algo::Ring);
  c.ringOnly = true;
  CHECK(chooseTune(c, Coll::AllReduce, 8, 4).algo == Algo::Ring);
  c.protocols = kSimple | kLL;  // NCCL_PROTO=^Direct
  CHECK(chooseTune(c, Coll::AllReduce, 1 << 20, 4).protocol == kProtoSimple);
  c.protocols = kSimple;
  CHECK(chooseTune(c, Coll::AllReduce, 8, 4).protocol == kProtoSimple);
  c.protocols = kDirect;
  CHECK(chooseTune(c, Coll::AllReduce, 8, 4).protocol == kProtoDirect);
  c.protocols = kLL;
  CHECK(chooseTune(c, Coll::AllReduce, 1 << 30, 4).protocol == kProtoLL);
  c.minChannels = 3;
  c.maxChannels = 2;
  CHECK(chooseTune(c, Coll::AllReduce, 8, 4).nChannels == 2);
  CHECK(chooseTune(c, Coll::AllReduce, 8, 1).nChannels == 1);
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
  CHECK(log.contains("AllReduce: 2 x 4 bytes, 1 ranks: algorithm Ring, protocol LL, 1 channels"));
  CHECK(
      log.contains("AllReduce: 65536 x 4 bytes, 1 ranks: algorithm Ring, protocol Direct, 1 "
                   "channels"));
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
