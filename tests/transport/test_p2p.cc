#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "support/test_env.h"
#include "tests/transport/fifo_stream.h"
#include "transports/p2p/p2p_transport.h"
#include "transports/transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

struct P2pPair {
  std::unique_ptr<Connector> recv, send;
};

ConnSpec smallSpec(uint32_t nSlots, uint32_t slotBytes) {
  ConnSpec s;
  s.nSlots = nSlots;
  s.slotBytes = slotBytes;
  s.self = localPeerInfo(0);
  s.peer = localPeerInfo(1);
  return s;
}

P2pPair connectP2p(const ConnSpec& spec) {
  P2pPair p;
  ConnBlob blob;
  REQUIRE(p2pTransport().setupRecv(spec, &blob, &p.recv) == ncclSuccess);
  REQUIRE(p2pTransport().connectSend(spec, blob, &p.send) == ncclSuccess);
  return p;
}

}  // namespace

TEST_CASE("p2p moves a few MiB between two threads exactly, across the counter wrap", "[p2p]") {
  P2pPair c = connectP2p(smallSpec(4, 16384));
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
  P2pPair c = connectP2p(smallSpec(2, 64));
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
  P2pPair c = connectP2p(smallSpec(2, 64));
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

TEST_CASE("p2p: a blob that outlived its receiver is refused, even at a reused address", "[p2p]") {
  ConnSpec spec = smallSpec(4, 128);
  std::unique_ptr<Connector> recv, send;
  ConnBlob stale;
  REQUIRE(p2pTransport().setupRecv(spec, &stale, &recv) == ncclSuccess);
  recv.reset();  // the receiver aborted while its offer was still on its way
  CHECK(p2pTransport().connectSend(spec, stale, &send) == ncclRemoteError);
  CHECK(send == nullptr);
  // New receivers, likely at the freed address: the old blob still names none of them.
  std::vector<std::unique_ptr<Connector>> fresh(4);
  std::vector<ConnBlob> blobs(4);
  for (size_t i = 0; i < fresh.size(); ++i)
    REQUIRE(p2pTransport().setupRecv(spec, &blobs[i], &fresh[i]) == ncclSuccess);
  CHECK(p2pTransport().connectSend(spec, stale, &send) == ncclRemoteError);
  CHECK(send == nullptr);
  REQUIRE(p2pTransport().connectSend(spec, blobs[0], &send) == ncclSuccess);
  CHECK(send->peerState() == PeerState::Open);
}

TEST_CASE("p2p rejects bad specs and foreign blobs", "[p2p]") {
  std::unique_ptr<Connector> recv, send;
  ConnBlob blob;
  CHECK(p2pTransport().setupRecv(smallSpec(3, 64), &blob, &recv) == ncclInvalidArgument);
  CHECK(p2pTransport().setupRecv(smallSpec(4, 100), &blob, &recv) == ncclInvalidArgument);
  CHECK(p2pTransport().setupRecv(smallSpec(0, 64), &blob, &recv) == ncclInvalidArgument);
  CHECK(recv == nullptr);

  ConnSpec spec = smallSpec(4, 128);
  REQUIRE(p2pTransport().setupRecv(spec, &blob, &recv) == ncclSuccess);
  CHECK(std::string(blob.transport) == "p2p");

  // Another process's pointer must never be followed.
  P2pBlob b;
  std::memcpy(&b, blob.payload, sizeof(b));
  CHECK(b.pid == getpid());
  ConnBlob foreign = blob;
  b.pid = getpid() + 1;
  std::memcpy(foreign.payload, &b, sizeof(b));
  CHECK(p2pTransport().connectSend(spec, foreign, &send) == ncclInvalidUsage);

  // A blob of another transport, or for another geometry.
  ConnBlob other = blob;
  std::strcpy(other.transport, "shm");
  CHECK(p2pTransport().connectSend(spec, other, &send) == ncclInvalidUsage);
  CHECK(p2pTransport().connectSend(smallSpec(8, 128), blob, &send) == ncclInvalidUsage);
  CHECK(send == nullptr);

  CHECK(p2pTransport().connectSend(spec, blob, &send) == ncclSuccess);
}
