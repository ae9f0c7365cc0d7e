// Connection infos: typed packing, the wire header, and shipping them both ways over a real
// bootstrap the way ConnectionTable does.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/unique_id.h"
#include "src/exec/connections.h"
#include "support/test_env.h"
#include "transports/transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

struct Fixed {
  uint64_t a;
  char name[16];
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 9));
  return v;
}

}  // namespace

TEST_CASE("connection infos round-trip with a fixed part and a tail of any size", "[conn_info]") {
  Fixed in{0x1234, "hello"}, out{};
  ConnInfo info;
  REQUIRE(packConnInfo("xyz", 3, ConnSide::Send, in, &info) == ncclSuccess);
  CHECK(std::string(info.transport) == "xyz");
  CHECK(info.version == 3);
  CHECK(info.side == ConnSide::Send);
  CHECK(info.payload.size() == sizeof(Fixed));
  CHECK(unpackConnInfo(info, "xyz", 3, ConnSide::Send, &out, 1, "test") == ncclSuccess);
  CHECK(out.a == 0x1234);
  CHECK(std::string(out.name) == "hello");

  // A tail: a network worker address, say, far larger than the old 256-byte blob.
  for (size_t tailBytes : {size_t{0}, size_t{1}, size_t{300}, size_t{700} << 10}) {
    INFO("tail " << tailBytes);
    std::vector<uint8_t> tail = pattern(tailBytes, 5), got{9};
    REQUIRE(packConnInfo("ucx", 1, ConnSide::Recv, in, &info, tail) == ncclSuccess);
    CHECK(info.payload.size() == sizeof(Fixed) + tailBytes);
    out = Fixed{};
    CHECK(unpackConnInfo(info, "ucx", 1, ConnSide::Recv, &out, 1, "test", &got) == ncclSuccess);
    CHECK(out.a == 0x1234);
    CHECK(got == tail);
  }
}

TEST_CASE("connection infos of another transport, version, side or size are refused",
          "[conn_info]") {
  Fixed in{7, "x"}, out{};
  ConnInfo info;
  REQUIRE(packConnInfo("xyz", 3, ConnSide::Recv, in, &info) == ncclSuccess);
  CapturedLog log;
  CHECK(unpackConnInfo(info, "abc", 3, ConnSide::Recv, &out, 4, "test") == ncclInvalidUsage);
  CHECK(log.contains("'xyz'"));
  CHECK(log.contains("peer rank 4"));
  CHECK(unpackConnInfo(info, "xy", 3, ConnSide::Recv, &out, 4, "test") == ncclInvalidUsage);
  CHECK(unpackConnInfo(info, "xyz", 4, ConnSide::Recv, &out, 4, "test") == ncclInvalidUsage);
  CHECK(log.contains("version 3"));
  CHECK(unpackConnInfo(info, "xyz", 3, ConnSide::Send, &out, 4, "test") == ncclInvalidUsage);
  CHECK(log.contains("recv side"));
  uint64_t small = 0;
  CHECK(unpackConnInfo(info, "xyz", 3, ConnSide::Recv, &small, 4, "test") == ncclInvalidUsage);
  ConnInfo longer = info;
  longer.payload.push_back(1);
  CHECK(unpackConnInfo(longer, "xyz", 3, ConnSide::Recv, &out, 4, "test") == ncclInvalidUsage);
  // With a tail, more is fine and less is not.
  std::vector<uint8_t> tail;
  CHECK(unpackConnInfo(longer, "xyz", 3, ConnSide::Recv, &out, 4, "test", &tail) == ncclSuccess);
  CHECK(tail.size() == 1);
  struct Big {
    char b[64];
  } big;
  CHECK(unpackConnInfo(info, "xyz", 3, ConnSide::Recv, &big, 4, "test", &tail) == ncclInvalidUsage);
  // An unterminated name never matches.
  ConnInfo bad = info;
  std::memset(bad.transport, 'x', sizeof(bad.transport));
  CHECK(unpackConnInfo(bad, "xyz", 3, ConnSide::Recv, &out, 4, "test") == ncclInvalidUsage);

  // Packing refuses names and payloads beyond the limits.
  std::vector<uint8_t> huge(kMaxConnInfoBytes);
  CHECK(packConnInfo("xyz", 1, ConnSide::Send, in, &info, huge) == ncclInvalidArgument);
  CHECK(packConnInfo("a-very-long-transport-name", 1, ConnSide::Send, in, &info) ==
        ncclInvalidArgument);
}

TEST_CASE("connection info headers are checked before anything is sized from them", "[conn_info]") {
  Fixed in{1, "h"};
  ConnInfo info, back;
  std::vector<uint8_t> tail = pattern(5000, 1);
  REQUIRE(packConnInfo("shm", 2, ConnSide::Send, in, &info, tail) == ncclSuccess);
  ConnInfoHeader h = connInfoHeader(info);
  CHECK(std::string(h.transport) == "shm");
  CHECK(h.version == 2);
  CHECK(h.side == static_cast<uint8_t>(ConnSide::Send));
  CHECK(h.payloadBytes == sizeof(Fixed) + 5000);
  info.geometry = ConnGeometry{4, 256, 512, 0};
  h = connInfoHeader(info);
  REQUIRE(connInfoFromHeader(h, 2, &back) == ncclSuccess);
  CHECK(back.geometry.nSlots == 4);  // the geometry travels in the header
  CHECK(back.geometry.slotBytes == 256);
  CHECK(back.geometry.llSlotBytes == 512);
  CHECK(std::string(back.transport) == "shm");
  CHECK(back.version == 2);
  CHECK(back.side == ConnSide::Send);
  CHECK(back.payload.size() == h.payloadBytes);

  CapturedLog log;
  ConnInfoHeader bad = h;
  bad.payloadBytes = kMaxConnInfoBytes + 1;
  CHECK(connInfoFromHeader(bad, 2, &back) == ncclRemoteError);
  CHECK(log.contains("payload bytes"));
  bad = h;
  bad.side = 7;
  CHECK(connInfoFromHeader(bad, 2, &back) == ncclRemoteError);
  bad = h;
  std::memset(bad.transport, 'y', sizeof(bad.transport));
  CHECK(connInfoFromHeader(bad, 2, &back) == ncclRemoteError);
  CHECK(log.contains("peer rank 2"));
}

TEST_CASE("large connection infos go both ways over the bootstrap", "[conn_info]") {
  // Two ranks, each with a receiving and a sending half towards the other, exchange four
  // infos (two of them far beyond a socket buffer, one empty) the way ConnectionTable does:
  // all sends first, then all receives, under the tags both sides compute.
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  std::string result[2];
  auto rank = [&](int r) -> std::string {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id, r, 2, nullptr, &b) != ncclSuccess) return "create";
    const int peer = 1 - r;
    auto infoOf = [](int maker, ConnSide side) {
      ConnInfo info;
      Fixed f{static_cast<uint64_t>(maker * 10 + static_cast<int>(side)), "f"};
      size_t tail =
          side == ConnSide::Recv ? (maker == 0 ? 600 << 10 : 3) : (maker == 0 ? 0 : 200 << 10);
      // No Catch2 assertion on this thread: a failed pack shows as a mismatch below.
      if (packConnInfo("test", 1, side, f, &info,
                       pattern(tail, static_cast<uint8_t>(maker * 2 + static_cast<int>(side)))) !=
          ncclSuccess)
        info.version = 0;
      return info;
    };
    // Ring-like: this rank receives from and sends to the peer on channel 3.
    PortKey recvKey{3, kPortRing, peer, kPortRecv}, sendKey{3, kPortRing, peer, kPortSend};
    if (sendConnInfo(*b, peer, connInfoTag(recvKey, ConnSide::Recv), infoOf(r, ConnSide::Recv)) !=
        ncclSuccess)
      return "send recv-info";
    if (sendConnInfo(*b, peer, connInfoTag(sendKey, ConnSide::Send), infoOf(r, ConnSide::Send)) !=
        ncclSuccess)
      return "send send-info";
    // The peer's sender info belongs to our receiving half, its receiver info to our sender.
    ConnInfo fromSender, fromReceiver;
    if (recvConnInfo(*b, peer, connInfoTag(recvKey, ConnSide::Send), &fromSender) != ncclSuccess)
      return "recv send-info";
    if (recvConnInfo(*b, peer, connInfoTag(sendKey, ConnSide::Recv), &fromReceiver) != ncclSuccess)
      return "recv recv-info";
    ConnInfo want = infoOf(peer, ConnSide::Send);
    if (fromSender.side != ConnSide::Send || fromSender.payload != want.payload)
      return "send-info differs";
    want = infoOf(peer, ConnSide::Recv);
    if (fromReceiver.side != ConnSide::Recv || fromReceiver.payload != want.payload ||
        std::string(fromReceiver.transport) != "test" || fromReceiver.version != 1)
      return "recv-info differs";
    if (b->barrier() != ncclSuccess) return "barrier";
    return "";
  };
  std::thread t0([&] { result[0] = rank(0); });
  std::thread t1([&] { result[1] = rank(1); });
  t0.join();
  t1.join();
  CHECK(result[0] == "");
  CHECK(result[1] == "");
  // The tags of the two directions and two kinds differ.
  PortKey k{3, kPortRing, 1, kPortRecv};
  CHECK(connInfoTag(k, ConnSide::Recv) != connInfoTag(k, ConnSide::Send));
  PortKey p{3, kPortP2p, 1, kPortRecv};
  CHECK(connInfoTag(k, ConnSide::Recv) != connInfoTag(p, ConnSide::Recv));
}
