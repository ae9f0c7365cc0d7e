// The ucx transport in one process: both sides of a connection over UCX's loopback, moved by
// the proxy thread. Multi-process and multi-host runs are in tests/net.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/base/log.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"
#include "transport/conn_pair.h"
#include "transport/fifo_stream.h"
#include "transports/proxy/proxy.h"
#include "transports/ucx/ucx_ep_info.h"
#include "transports/ucx/ucx_transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

ConnSpec ucxSpec(uint32_t nSlots, uint32_t slotBytes) {
  ConnSpec s;
  s.nSlots = nSlots;
  s.slotBytes = slotBytes;
  s.llSlotBytes = 0;
  s.self = localPeerInfo(0);
  s.peer = localPeerInfo(1);
  s.peer.hostHash ^= 1;  // another host
  return s;
}

WaitOptions opts(const Connector* c, int ms = 20000) {
  WaitOptions o;
  o.spinCount = 100;
  o.conn = c;
  o.deadline = WaitClock::now() + std::chrono::milliseconds(ms);
  o.what = "ucx test";
  return o;
}

}  // namespace

TEST_CASE("ucx: a stream arrives exact through the proxy, then close is seen", "[ucx]") {
  ConnPair c;
  REQUIRE(connectPair(ucxTransport(), ucxSpec(4, 4096), &c) == ncclSuccess);
  for (Connector* conn : {c.recv.get(), c.send.get()}) {
    CHECK(conn->needsProgress());
    CHECK(std::string(conn->transportName()) == "ucx");
    CHECK(conn->view().doorbell == Proxy::get().doorbell());
    CHECK(conn->view().llSlots == nullptr);
    CHECK(conn->peerState() == PeerState::Open);
  }
  // The sender's FIFO is read by our proxy, which can send from a reference; the receiver's
  // cannot read the sender's memory.
  CHECK(c.send->view().control->refKind == kRefNetwork);
  CHECK(c.recv->view().control->refKind == kRefNone);
  // The two FIFOs are distinct memory: the proxy carries the data between them.
  CHECK(c.recv->view().slots != c.send->view().slots);

  const size_t n = 3 * 1024 * 1024 + 17;  // many laps of the 4 slots, counters and sizes vary
  std::vector<uint8_t> in = makeStream(n, 9), out(n);
  ncclResult_t sendRc = ncclInternalError;
  uint32_t tail = 0, step = 0;
  std::thread sender(
      [&] { sendRc = sendStream(c.send->view(), &tail, in.data(), n, opts(c.send.get())); });
  ncclResult_t recvRc = recvStream(c.recv->view(), &step, out.data(), n, opts(c.recv.get()));
  sender.join();
  CHECK(sendRc == ncclSuccess);
  REQUIRE(recvRc == ncclSuccess);
  CHECK(out == in);
  CHECK(step == tail);

  // The sender's head catches up once UCX finished every send.
  CHECK(waitForCounter(&c.send->view().control->head, tail, opts(c.send.get())) == ncclSuccess);

  // Closing one side: the other sees Closed soon, and a wait fails naming the peer.
  c.send.reset();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (c.recv->peerState() == PeerState::Open && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(c.recv->peerState() == PeerState::Closed);
  CapturedLog log;
  CHECK(waitSlotFilled(c.recv->view(), step, opts(c.recv.get())) == ncclRemoteError);
  CHECK(log.contains("closed"));
  CHECK(log.contains("rank 1"));
}

TEST_CASE("ucx: a slice published by reference leaves from the user's buffer as plain data",
          "[ucx]") {
  ConnPair c;
  REQUIRE(connectPair(ucxTransport(), ucxSpec(4, 65536), &c) == ncclSuccess);
  // As a Direct runner publishes a reference: the SlotRef in the slot, the size with
  // kSlotRefBit, then tail and the doorbell. The slot's own bytes are not the data.
  const uint32_t n = 40000;
  std::vector<uint8_t> user = makeStream(n, 5), out(n);
  const ConnectorView& v = c.send->view();
  std::memset(fifoSlotData(v, 0), 0xee, v.slotBytes);
  reinterpret_cast<SlotRef*>(fifoSlotData(v, 0))->addr = reinterpret_cast<uintptr_t>(user.data());
  v.control->meta[0].size = kSlotRefBit | n;
  publishCounter(&v.control->tail, 1);
  publishCounter(v.doorbell, 1);
  // The receiver gets the user's bytes in a plain slot (recvStream refuses a size with
  // kSlotRefBit), and the sender's head passing the slot releases the buffer.
  uint32_t step = 0;
  REQUIRE(recvStream(c.recv->view(), &step, out.data(), n, opts(c.recv.get())) == ncclSuccess);
  CHECK(out == user);
  CHECK(c.recv->view().control->meta[0].size == n);
  CHECK(waitForCounter(&v.control->head, 1, opts(c.send.get())) == ncclSuccess);
}

TEST_CASE("ucx: an idle proxy sleeps instead of spinning", "[ucx]") {
  ConnPair c;
  REQUIRE(connectPair(ucxTransport(), ucxSpec(2, 1024), &c) == ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t before = Proxy::get().sleeps();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Asleep: at most a few wake-ups (the 100 ms cap) in 300 ms, not thousands of sweeps.
  CHECK(Proxy::get().sleeps() - before <= 5);
  // And a publish wakes it through the doorbell's eventfd (not the sleep's time limit).
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const uint64_t wakesBefore = Proxy::get().doorbellWakes();
  // As the runner publishes: tail, then the doorbell.
  const ConnectorView& v = c.send->view();
  *fifoSlotData(v, 0) = 42;
  v.control->meta[0].size = 1;
  publishCounter(&v.control->tail, 1);
  publishCounter(v.doorbell, 1);
  uint8_t got = 0;
  uint32_t step = 0;
  REQUIRE(recvStream(c.recv->view(), &step, &got, 1, opts(c.recv.get())) == ncclSuccess);
  CHECK(got == 42);
  CHECK(Proxy::get().doorbellWakes() > wakesBefore);
}

TEST_CASE("ucx: a CUDA rank's side is mapped for its GPU, has no doorbell and no references",
          "[ucx]") {
  FakeCudaScope cuda;
  CuContext ctx = nullptr;
  REQUIRE(cuda.driver().cuDevicePrimaryCtxRetain(&ctx, 0) == kCuSuccess);
  REQUIRE(cuda.driver().cuCtxSetCurrent(ctx) == kCuSuccess);
  ConnSpec spec = ucxSpec(4, 4096);
  for (PeerInfo* p : {&spec.self, &spec.peer}) {
    p->memory = MemoryKind::Cuda;
    p->cudaDev = 0;
  }
  {
    ConnPair c;
    REQUIRE(connectPair(ucxTransport(), spec, &c) == ncclSuccess);
    CHECK(cuda.liveHostRegistrations() == 2);  // each side's FIFO
    for (const Connector* conn : {c.recv.get(), c.send.get()}) {
      CHECK(conn->fedByDevice());               // the proxy polls it
      CHECK(conn->view().doorbell == nullptr);  // a kernel could not ring it
      CHECK(conn->hostControl() != nullptr);
    }
    CHECK(c.send->view().control->refKind == kRefNone);  // device buffers: no references
    // Published as a kernel does (counters only, no doorbell): the proxy still moves it.
    const size_t n = 100000;
    std::vector<uint8_t> in = makeStream(n, 3), out(n);
    ncclResult_t sendRc = ncclInternalError;
    uint32_t tail = 0, step = 0;
    std::thread sender(
        [&] { sendRc = sendStream(c.send->view(), &tail, in.data(), n, opts(c.send.get())); });
    const ncclResult_t recvRc =
        recvStream(c.recv->view(), &step, out.data(), n, opts(c.recv.get()));
    sender.join();
    CHECK(sendRc == ncclSuccess);
    CHECK(recvRc == ncclSuccess);
    CHECK(out == in);
  }
  CHECK(cuda.liveHostRegistrations() == 0);  // the Connectors' end unregistered them
  REQUIRE(cuda.driver().cuCtxSetCurrent(nullptr) == kCuSuccess);
}

TEST_CASE("ucx: infos are checked", "[ucx]") {
  ConnSpec spec = ucxSpec(4, 4096);
  ConnSpec other = spec;
  other.slotBytes = 8192;
  std::swap(other.self, other.peer);
  ConnPair c;
  CapturedLog log;
  CHECK(connectPair(ucxTransport(), spec, other, &c) == ncclInvalidUsage);
  // An shm info is not a ucx info.
  std::unique_ptr<PendingConnection> p;
  ConnInfo mine;
  REQUIRE(ucxTransport().setup(ConnSide::Recv, spec, &mine, &p) == ncclSuccess);
  ConnInfo wrong = mine;
  std::snprintf(wrong.transport, sizeof(wrong.transport), "shm");
  std::unique_ptr<Connector> conn;
  CHECK(p->connect(wrong, &conn) == ncclInvalidUsage);
  CHECK(conn == nullptr);
}

// A tag of its own: it forks, which the other [ucx] cases (UCX's threads running) would forbid.
TEST_CASE("ucx: NCCL_IB_DISABLE=1 keeps UCX off InfiniBand unless UCX_TLS is set", "[ucx_env]") {
  // The worker is made once per process, so each setting runs in a child of its own.
  for (const bool userTls : {false, true}) {
    int failed = runProcesses(1, [&](int) {
      setenv("NCCL_IB_DISABLE", "1", 1);
      if (userTls)
        setenv("UCX_TLS", "tcp", 1);
      else
        unsetenv("UCX_TLS");
      CapturedLog log;
      setenv("NCCL_DEBUG", "INFO", 1);
      setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
      resetLogging();
      std::unique_ptr<PendingConnection> p;
      ConnInfo info;
      if (ucxTransport().setup(ConnSide::Recv, ucxSpec(2, 1024), &info, &p) != ncclSuccess)
        return 2;
      const std::string want = userTls ? "UCX_TLS=tcp is set; UCX_TLS wins" : "UCX_TLS=^rc,ud,dc";
      if (!log.contains(want)) {
        std::fprintf(stderr, "log lacks '%s':\n%s\n", want.c_str(), log.text().c_str());
        return 1;
      }
      return 0;
    });
    INFO("UCX_TLS set by the user: " << userTls);
    CHECK(failed == 0);
  }
}

TEST_CASE("ucx: an endpoint's lanes say whether UCX has RMA and atomics or emulates them",
          "[ucx]") {
  // Captured here (UCX 1.13.1, UCX_NET_DEVICES=lo): one TCP lane, nothing but active messages.
  const std::string tcp =
      "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
      "#                 lane[0]:  1:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] am "
      "am_bw#0 keepalive wireup\n#\n"
      "#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)\n"
      "#                  rma_bw: mds rndv_rkey_size 9\n";
  CHECK_FALSE(lanesServe(tcp, "rma"));
  CHECK_FALSE(lanesServe(tcp, "amo"));
  CHECK(lanesServe(tcp, "am"));
  CHECK(laneTransports(tcp) == "tcp/lo.0");
  // Written after UCX's format (ucp_ep_config_lane_info_str; no InfiniBand here to capture
  // one): rendezvous-only puts on one lane, RMA and atomics on another.
  const std::string ib =
      "#                 lane[0]:  3:rc_mlx5/mlx5_0:1.0 md[0]  -> md[0]/ib/sysdev[255] am "
      "am_bw#0 rma_bw#0 keepalive wireup\n"
      "#                 lane[1]:  3:rc_mlx5/mlx5_0:1.0 md[0]  -> md[0]/ib/sysdev[255] rma#0 "
      "amo#0\n";
  CHECK(lanesServe(ib, "rma"));
  CHECK(lanesServe(ib, "amo"));
  CHECK(laneTransports(ib) == "rc_mlx5/mlx5_0:1.0");
  // Rendezvous lanes are not RMA lanes; and text without lanes has none.
  CHECK_FALSE(lanesServe(ib.substr(0, ib.find("lane[1]")), "rma"));
  CHECK_FALSE(lanesServe("", "rma"));
  CHECK(laneTransports("") == "?");
}
