#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "support/test_env.h"
#include "transports/transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

std::string selected(const PeerInfo& self, const PeerInfo& peer) {
  Transport* t = nullptr;
  if (selectTransport(self, peer, &t) != ncclSuccess) return "error";
  return t ? t->name() : "null";
}

}  // namespace

TEST_CASE("localPeerInfo describes this process", "[select]") {
  PeerInfo a = localPeerInfo(3);
  CHECK(a.rank == 3);
  CHECK(a.pid == getpid());
  CHECK(a.hostHash != 0);
  CHECK(a.hostHash == localHostHash());
  CHECK(a.pidNamespace != 0);
  CHECK(a.memory == MemoryKind::Host);
  CHECK(a.cudaDev == -1);
  PeerInfo b = localPeerInfo(4);
  CHECK(sameProcess(a, b));
  b.pid += 1;
  CHECK(sameHost(a, b));
  CHECK_FALSE(sameProcess(a, b));
  b = localPeerInfo(4);
  b.pidNamespace += 1;  // same pid number in another container is another process
  CHECK_FALSE(sameProcess(a, b));
}

TEST_CASE("selection: p2p in one process, shm on one host, ucx between hosts", "[select]") {
  ScopedEnv n1("NCCL_NET", std::nullopt), n2("RINGCC_NET", std::nullopt);
  ScopedEnv p1("NCCL_P2P_DISABLE", std::nullopt), p2("RINGCC_P2P_DISABLE", std::nullopt);
  ScopedEnv s1("NCCL_SHM_DISABLE", std::nullopt), s2("RINGCC_SHM_DISABLE", std::nullopt);
  PeerInfo self = localPeerInfo(0);
  PeerInfo sameProc = localPeerInfo(1);
  PeerInfo otherProc = localPeerInfo(1);
  otherProc.pid = self.pid + 1;
  PeerInfo otherHost = localPeerInfo(1);
  otherHost.hostHash ^= 1;

  CHECK(selected(self, sameProc) == "p2p");
  CHECK(selected(self, otherProc) == "shm");
  CHECK(selected(self, otherHost) == "ucx");
  {
    ScopedEnv off("NCCL_P2P_DISABLE", "1");
    CHECK(selected(self, sameProc) == "shm");
    CHECK(selected(self, otherProc) == "shm");
  }
  {
    ScopedEnv off("RINGCC_SHM_DISABLE", "1");
    CHECK(selected(self, sameProc) == "p2p");
    CHECK(selected(self, otherProc) == "ucx");
  }
  {
    ScopedEnv a("NCCL_P2P_DISABLE", "1"), b("NCCL_SHM_DISABLE", "1");
    CHECK(selected(self, sameProc) == "ucx");
  }
  {
    // Nothing fits: the WARN says what each transport answered.
    PeerInfo gpu = otherHost;
    gpu.memory = MemoryKind::Cuda;
    gpu.cudaDev = 0;
    CapturedLog log;
    Transport* t = reinterpret_cast<Transport*>(1);
    CHECK(selectTransport(self, gpu, &t) == ncclSystemError);
    CHECK(t == nullptr);
    CHECK(log.contains("rank 1"));
    CHECK(log.contains("p2p: not the same process"));
    CHECK(log.contains("shm: not the same host"));
    CHECK(log.contains("ucx: one rank uses host memory, the other device memory"));
  }
  {
    // CUDA ranks on both ends: shm (mapped for the GPU) on one host, ucx (staged) across hosts.
    PeerInfo gpuSelf = self, gpuOtherProc = otherProc, gpuOtherHost = otherHost;
    for (PeerInfo* p : {&gpuSelf, &gpuOtherProc, &gpuOtherHost}) {
      p->memory = MemoryKind::Cuda;
      p->cudaDev = 0;
    }
    CHECK(selected(gpuSelf, gpuOtherProc) == "shm");
    CHECK(selected(gpuSelf, gpuOtherHost) == "ucx");
  }
  CHECK(selectTransport(self, sameProc, nullptr) == ncclInvalidArgument);
}

TEST_CASE("NCCL_NET=ucx forces the network for every pair; other values are refused", "[select]") {
  ScopedEnv n1("NCCL_NET", std::nullopt);
  PeerInfo self = localPeerInfo(0);
  PeerInfo sameProc = localPeerInfo(1);
  PeerInfo otherProc = localPeerInfo(1);
  otherProc.pid = self.pid + 1;
  {
    ScopedEnv n2("RINGCC_NET", "UCX");
    CHECK(selected(self, sameProc) == "ucx");
    CHECK(selected(self, otherProc) == "ucx");
  }
  {
    ScopedEnv n2("RINGCC_NET", "IB");
    CapturedLog log;
    Transport* t = nullptr;
    CHECK(selectTransport(self, otherProc, &t) == ncclInvalidArgument);
    CHECK(log.contains("NCCL_NET='IB'"));
  }
  ScopedEnv n2("RINGCC_NET", "");
  CHECK(selected(self, otherProc) == "shm");
}

TEST_CASE("NCCL_HOSTID names the host", "[select]") {
  ScopedEnv a("NCCL_HOSTID", std::nullopt), b("RINGCC_HOSTID", std::nullopt);
  const uint64_t real = localHostHash();
  uint64_t h1, h1again, h2;
  {
    ScopedEnv id("NCCL_HOSTID", "node-a");
    h1 = localHostHash();
    h1again = localPeerInfo(0).hostHash;
  }
  {
    ScopedEnv id("NCCL_HOSTID", "node-b");
    h2 = localHostHash();
  }
  CHECK(h1 == h1again);
  CHECK(h1 != h2);
  CHECK(h1 != real);
  CHECK(localHostHash() == real);
}

TEST_CASE("registry lists p2p, shm, then the network, and finds them by name", "[select]") {
  auto reg = transportRegistry();
  REQUIRE(reg.size() == 3);
  CHECK(std::string(reg[0].transport->name()) == "p2p");
  CHECK(std::string(reg[0].disableParam) == "P2P_DISABLE");
  CHECK(std::string(reg[1].transport->name()) == "shm");
  CHECK(std::string(reg[2].transport->name()) == "ucx");
  CHECK_FALSE(reg[1].network);
  CHECK(reg[2].network);
  CHECK(findTransport("shm") == reg[1].transport);
  CHECK(findTransport("ucx") == reg[2].transport);
}

TEST_CASE("NCCL_BUFFSIZE becomes nSlots x slotBytes", "[select]") {
  ScopedEnv a("NCCL_BUFFSIZE", std::nullopt), b("RINGCC_BUFFSIZE", std::nullopt);
  ConnSpec s = defaultConnSpec();
  CHECK(s.nSlots == 8);
  CHECK(s.slotBytes == 128 * 1024);  // the default NCCL_BUFFSIZE, 1 MiB, in 8 slots
  CHECK(s.llSlotBytes == kDefaultLlSlotBytes);
  CHECK(kDefaultLlSlotBytes == 8192);
  CHECK(connLlBytes(s) == 8 * 8192);
  CHECK(checkConnSpec(s, "test") == ncclSuccess);
  {
    ScopedEnv m("NCCL_BUFFSIZE", "1M");
    s = defaultConnSpec();
    CHECK(s.slotBytes == 128 * 1024);
  }
  {
    ScopedEnv m("NCCL_BUFFSIZE", "1000000");  // not a multiple of 8 x 64: rounded down
    s = defaultConnSpec();
    CHECK(s.slotBytes == 124992);
    CHECK(s.slotBytes % 64 == 0);
  }
  {
    CapturedLog log;
    ScopedEnv m("NCCL_BUFFSIZE", "100");
    s = defaultConnSpec();
    CHECK(s.slotBytes == 64);
    CHECK(log.contains("NCCL_BUFFSIZE"));
  }
  s = connSpecForBuffer(int64_t{1} << 40, 8);
  CHECK(connSlotBytes(s) == kMaxConnBytes);
  CHECK(checkConnSpec(s, "test") == ncclSuccess);
  s = connSpecForBuffer(1 << 20, 16);
  CHECK(s.nSlots == 16);
  CHECK(s.slotBytes == 65536);
}

TEST_CASE("checkConnSpec names the bad field", "[select]") {
  CapturedLog log;
  ConnSpec s = connSpecForBuffer(1 << 20);
  s.nSlots = 6;
  CHECK(checkConnSpec(s, "test") == ncclInvalidArgument);
  CHECK(log.contains("spec.nSlots=6"));
  s.nSlots = 8;
  s.slotBytes = 65;
  CHECK(checkConnSpec(s, "test") == ncclInvalidArgument);
  CHECK(log.contains("spec.slotBytes=65"));
  s.nSlots = kMaxSlots * 2;
  s.slotBytes = 64;
  CHECK(checkConnSpec(s, "test") == ncclInvalidArgument);
  s.nSlots = 8;
  s.llSlotBytes = 40;  // not a whole number of LL lines
  CHECK(checkConnSpec(s, "test") == ncclInvalidArgument);
  CHECK(log.contains("spec.llSlotBytes=40"));
  s.llSlotBytes = 0;  // no LL memory is fine
  CHECK(checkConnSpec(s, "test") == ncclSuccess);
  s.nSlots = kMaxSlots;
  s.llSlotBytes = 1u << 20;  // 4 GiB of LL lines
  CHECK(checkConnSpec(s, "test") == ncclInvalidArgument);
}
