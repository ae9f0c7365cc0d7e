#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <vector>

#include "support/test_env.h"
#include "tests/transport/conn_pair.h"
#include "tests/transport/fifo_stream.h"
#include "transports/p2p/p2p_transport.h"
#include "transports/transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

ConnSpec smallSpec(uint32_t nSlots, uint32_t slotBytes, uint32_t llSlotBytes = 1024) {
  ConnSpec s;
  s.nSlots = nSlots;
  s.slotBytes = slotBytes;
  s.llSlotBytes = llSlotBytes;
  s.self = localPeerInfo(0);
  s.peer = localPeerInfo(1);
  return s;
}

// The sender's spec for a receiver's: the same geometry, seen from the other end.
ConnSpec senderOf(ConnSpec s) {
  std::swap(s.self, s.peer);
  return s;
}

ConnPair connectP2p(const ConnSpec& spec) {
  ConnPair p;
  REQUIRE(connectPair(p2pTransport(), spec, &p) == ncclSuccess);
  // One address space: the receiver reads references through the pointer (Direct).
  CHECK(p.recv->view().control->refKind == kRefPointer);
  return p;
}

ncclResult_t setup(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                   std::unique_ptr<PendingConnection>* pending) {
  return p2pTransport().setup(side, spec, info, pending);
}

template <typename T>
T payloadOf(const ConnInfo& info) {
  T t;
  REQUIRE(info.payload.size() == sizeof(T));
  std::memcpy(&t, info.payload.data(), sizeof(T));
  return t;
}

template <typename T>
void setPayload(ConnInfo* info, const T& t) {
  info->payload.resize(sizeof(T));
  std::memcpy(info->payload.data(), &t, sizeof(T));
}

}  // namespace

TEST_CASE("p2p moves a few MiB between two threads exactly, across the counter wrap", "[p2p]") {
  ConnPair c = connectP2p(smallSpec(4, 16384));
  REQUIRE(c.recv->view().control == c.send->view().control);
  REQUIRE(c.recv->view().slots == c.send->view().slots);
  REQUIRE(reinterpret_cast<uintptr_t>(c.recv->view().slots) % 64 == 0);

  // Start both counters just below 2^32 so that the transfer crosses the wrap.
  const uint32_t start = 0xFFFFFF00u;
  c.recv->view().control->tail.value = start;
  c.recv->view().control->head.value = start;

  const size_t n = 4 << 20;
  std::vector<uint8_t> in = makeStream(n, 7), out(n, 0);
  ncclResult_t sendResult = ncclInternalError;
  uint32_t tail = start;
  std::thread sender([&] {
    sendResult = sendStream(c.send->view(), &tail, in.data(), n, testWaitOptions(c.send.get()));
  });
  uint32_t step = start;
  ncclResult_t recvResult =
      recvStream(c.recv->view(), &step, out.data(), n, testWaitOptions(c.recv.get()));
  sender.join();
  CHECK(sendResult == ncclSuccess);
  CHECK(recvResult == ncclSuccess);
  CHECK(step == tail);
  CHECK(step - start > 256);  // really many slots, and past the wrap
  CHECK(step < start);
  CHECK(out == in);
}

TEST_CASE("p2p: a peer that closes ends the other side's wait, after its last slot", "[p2p]") {
  ConnPair c = connectP2p(smallSpec(2, 64));
  const ConnectorView v = c.recv->view();
  CHECK(c.recv->peerState() == PeerState::Open);
  CHECK(c.send->peerState() == PeerState::Open);

  // The sender fills one slot and closes; the receiver must still get that slot.
  uint8_t byte = 42;
  uint32_t tail = 0;
  REQUIRE(sendStream(c.send->view(), &tail, &byte, 1, testWaitOptions(c.send.get())) ==
          ncclSuccess);
  c.send.reset();
  CHECK(c.recv->peerState() == PeerState::Closed);
  uint8_t got = 0;
  uint32_t step = 0;
  CHECK(recvStream(v, &step, &got, 1, testWaitOptions(c.recv.get())) == ncclSuccess);
  CHECK(got == 42);

  // The next wait fails fast instead of waiting for the deadline; the memory is still valid
  // because the receiver still holds its reference.
  CapturedLog log;
  auto t0 = WaitClock::now();
  CHECK(waitSlotFilled(v, step, testWaitOptions(c.recv.get(), 10)) == ncclRemoteError);
  CHECK(WaitClock::now() - t0 < std::chrono::seconds(2));
  CHECK(log.contains("closed"));
}

TEST_CASE("p2p: the receiver closing first leaves the sender's memory valid", "[p2p]") {
  ConnPair c = connectP2p(smallSpec(2, 64));
  c.recv.reset();
  CHECK(c.send->peerState() == PeerState::Closed);
  // The FIFO is empty (2 free slots), so the sender may still write; its third wait fails.
  ConnectorView v = c.send->view();
  uint8_t data[128] = {};
  uint32_t tail = 0;
  CHECK(waitSlotFree(v, tail, testWaitOptions(c.send.get())) == ncclSuccess);
  std::memcpy(fifoSlotData(v, 0), data, 64);
  publishCounter(&v.control->tail, 1);
  CHECK(waitSlotFree(v, 1, testWaitOptions(c.send.get())) == ncclSuccess);
  publishCounter(&v.control->tail, 2);
  CHECK(waitSlotFree(v, 2, testWaitOptions(c.send.get(), 10)) == ncclRemoteError);
}

TEST_CASE("p2p: infos go both ways, and either side may connect first", "[p2p]") {
  ConnSpec spec = smallSpec(4, 256, 512);
  for (bool senderFirst : {false, true}) {
    INFO("senderFirst=" << senderFirst);
    ConnPair c;
    REQUIRE(connectPair(p2pTransport(), spec, &c, senderFirst) == ncclSuccess);
    CHECK(std::string(c.recvInfo.transport) == "p2p");
    CHECK(c.recvInfo.side == ConnSide::Recv);
    CHECK(c.recvInfo.version == kP2pInfoVersion);
    CHECK(std::string(c.sendInfo.transport) == "p2p");
    CHECK(c.sendInfo.side == ConnSide::Send);
    P2pRecvInfo r = payloadOf<P2pRecvInfo>(c.recvInfo);
    P2pSendInfo s = payloadOf<P2pSendInfo>(c.sendInfo);
    CHECK(r.pid == getpid());
    CHECK(s.pid == getpid());
    // Both infos carry the geometry of their maker's spec (Transport::setup stamps it).
    CHECK(c.recvInfo.geometry.llSlotBytes == 512);
    CHECK(c.sendInfo.geometry.nSlots == 4);
    CHECK(c.sendInfo.geometry.slotBytes == 256);
    CHECK(c.sendInfo.geometry.llSlotBytes == 512);
    CHECK(c.recv->side() == ConnSide::Recv);
    CHECK(c.send->side() == ConnSide::Send);
    CHECK(c.recv->peerRank() == 1);
    CHECK(c.send->peerRank() == 0);
    CHECK(c.recv->view().control == c.send->view().control);
    uint8_t byte = 7, got = 0;
    uint32_t tail = 0, step = 0;
    CHECK(sendStream(c.send->view(), &tail, &byte, 1, testWaitOptions(c.send.get())) ==
          ncclSuccess);
    CHECK(recvStream(c.recv->view(), &step, &got, 1, testWaitOptions(c.recv.get())) == ncclSuccess);
    CHECK(got == 7);
  }
}

TEST_CASE("p2p: LL memory is there, zeroed, aligned and shared; no progress, no doorbell",
          "[p2p]") {
  ConnPair c = connectP2p(smallSpec(8, 4096, 2048));
  const ConnectorView& v = c.recv->view();
  REQUIRE(v.llSlots != nullptr);
  CHECK(v.llSlotBytes == 2048);
  CHECK(reinterpret_cast<uintptr_t>(v.llSlots) % 64 == 0);
  CHECK(c.send->view().llSlots == v.llSlots);
  CHECK(c.send->view().llSlotBytes == 2048);
  // Apart from the Simple slots and the counters.
  CHECK(v.llSlots >= v.slots + 8 * 4096);
  const size_t llBytes = 8 * 2048;
  std::vector<char> zeros(llBytes, 0);
  CHECK(std::memcmp(v.llSlots, zeros.data(), llBytes) == 0);
  // Lines written by the sender are the receiver's to read.
  auto* line = reinterpret_cast<LlLine*>(c.send->view().llSlots) + (llBytes / kLlLineBytes - 1);
  *line = LlLine{1, 1, 2, 1};
  CHECK(reinterpret_cast<const LlLine*>(v.llSlots)[llBytes / kLlLineBytes - 1].data1 == 2);

  CHECK(v.doorbell == nullptr);
  CHECK(c.send->view().doorbell == nullptr);
  for (Connector* conn : {c.recv.get(), c.send.get()}) {
    CHECK_FALSE(conn->needsProgress());
    bool moved = true;
    CHECK(conn->progress(&moved) == ncclSuccess);
    CHECK_FALSE(moved);
  }

  // llSlotBytes 0: no LL memory at all.
  ConnPair none = connectP2p(smallSpec(4, 128, 0));
  CHECK(none.recv->view().llSlots == nullptr);
  CHECK(none.recv->view().llSlotBytes == 0);
  CHECK(none.send->view().llSlots == nullptr);
}

TEST_CASE("p2p: an info that outlived its receiver is refused, even at a reused address", "[p2p]") {
  ConnSpec spec = smallSpec(4, 128);
  std::unique_ptr<PendingConnection> recv, send;
  std::unique_ptr<Connector> conn;
  ConnInfo stale, sendInfo;
  REQUIRE(setup(ConnSide::Recv, spec, &stale, &recv) == ncclSuccess);
  recv.reset();  // the receiver aborted while its info was still on its way
  REQUIRE(setup(ConnSide::Send, senderOf(spec), &sendInfo, &send) == ncclSuccess);
  CHECK(send->connect(stale, &conn) == ncclRemoteError);
  CHECK(conn == nullptr);
  // A pending side connects once only.
  CHECK(send->connect(stale, &conn) == ncclInvalidUsage);
  // New receivers, likely at the freed address: the old info still names none of them.
  std::vector<std::unique_ptr<PendingConnection>> fresh(4);
  std::vector<ConnInfo> infos(4);
  for (size_t i = 0; i < fresh.size(); ++i)
    REQUIRE(setup(ConnSide::Recv, spec, &infos[i], &fresh[i]) == ncclSuccess);
  REQUIRE(setup(ConnSide::Send, senderOf(spec), &sendInfo, &send) == ncclSuccess);
  CHECK(send->connect(stale, &conn) == ncclRemoteError);
  REQUIRE(setup(ConnSide::Send, senderOf(spec), &sendInfo, &send) == ncclSuccess);
  REQUIRE(send->connect(infos[0], &conn) == ncclSuccess);
  CHECK(conn->peerState() == PeerState::Open);
  // The receiver gives up before its connect: to the sender that is a close.
  fresh[0].reset();
  CHECK(conn->peerState() == PeerState::Closed);
}

TEST_CASE("p2p rejects bad specs and foreign, misrouted or mismatched infos", "[p2p]") {
  std::unique_ptr<PendingConnection> recv, send;
  std::unique_ptr<Connector> conn;
  ConnInfo info;
  CHECK(setup(ConnSide::Recv, smallSpec(3, 64), &info, &recv) == ncclInvalidArgument);
  CHECK(setup(ConnSide::Recv, smallSpec(4, 100), &info, &recv) == ncclInvalidArgument);
  CHECK(setup(ConnSide::Recv, smallSpec(0, 64), &info, &recv) == ncclInvalidArgument);
  CHECK(setup(ConnSide::Send, smallSpec(4, 64, 24), &info, &send) == ncclInvalidArgument);
  CHECK(recv == nullptr);
  CHECK(send == nullptr);
  CHECK(p2pTransport().setup(ConnSide::Recv, smallSpec(4, 64), nullptr, &recv) ==
        ncclInvalidArgument);

  ConnSpec spec = smallSpec(4, 128);
  ConnInfo recvInfo, sendInfo;
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);

  auto trySend = [&](const ConnSpec& s, const ConnInfo& remote) {
    REQUIRE(setup(ConnSide::Send, s, &sendInfo, &send) == ncclSuccess);
    return send->connect(remote, &conn);
  };
  CapturedLog log;
  // Another process's pointer must never be followed.
  P2pRecvInfo r = payloadOf<P2pRecvInfo>(recvInfo);
  ConnInfo foreign = recvInfo;
  r.pid = getpid() + 1;
  setPayload(&foreign, r);
  CHECK(trySend(senderOf(spec), foreign) == ncclInvalidUsage);
  CHECK(log.contains("process"));
  // An info of another transport, another version, the wrong side or the wrong size.
  ConnInfo other = recvInfo;
  std::strcpy(other.transport, "shm");
  CHECK(trySend(senderOf(spec), other) == ncclInvalidUsage);
  CHECK(log.contains("'shm'"));
  other = recvInfo;
  other.version = kP2pInfoVersion + 1;
  CHECK(trySend(senderOf(spec), other) == ncclInvalidUsage);
  other = recvInfo;
  other.payload.push_back(0);
  CHECK(trySend(senderOf(spec), other) == ncclInvalidUsage);
  CHECK(trySend(senderOf(spec), sendInfo) == ncclInvalidUsage);  // a sender's info, not ours
  // Another geometry: slots, slot size, LL slot size.
  CHECK(trySend(senderOf(smallSpec(8, 128)), recvInfo) == ncclInvalidUsage);
  CHECK(trySend(senderOf(smallSpec(4, 256)), recvInfo) == ncclInvalidUsage);
  CHECK(trySend(senderOf(smallSpec(4, 128, 2048)), recvInfo) == ncclInvalidUsage);
  CHECK(log.contains("NCCL_BUFFSIZE"));
  CHECK(log.contains("rank 0"));
  CHECK(conn == nullptr);

  // The receiver checks the sender's info just as well.
  ConnInfo mismatched;
  std::unique_ptr<PendingConnection> otherSend;
  REQUIRE(setup(ConnSide::Send, senderOf(smallSpec(4, 128, 2048)), &mismatched, &otherSend) ==
          ncclSuccess);
  CHECK(recv->connect(mismatched, &conn) == ncclInvalidUsage);
  CHECK(conn == nullptr);
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  CHECK(recv->connect(recvInfo, &conn) == ncclInvalidUsage);  // a receiver's info, not a sender's
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  P2pSendInfo s{};
  s.pid = getpid() + 1;
  ConnInfo foreignSend;
  REQUIRE(packConnInfo("p2p", kP2pInfoVersion, ConnSide::Send, s, &foreignSend) == ncclSuccess);
  foreignSend.geometry = connGeometry(spec);  // refused for its pid, not its geometry
  CHECK(recv->connect(foreignSend, &conn) == ncclInvalidUsage);
  CHECK(log.contains("process"));

  // And a matching pair still connects.
  ConnPair ok;
  CHECK(connectPair(p2pTransport(), spec, &ok) == ncclSuccess);
}
