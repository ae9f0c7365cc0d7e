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

TEST_CASE("selection: p2p in one process, shm on one host, else a clear error", "[select]") {
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
  {
    CapturedLog log;
    Transport* t = reinterpret_cast<Transport*>(1);
    CHECK(selectTransport(self, otherHost, &t) == ncclSystemError);
    CHECK(t == nullptr);
    CHECK(log.contains("UCX"));
    CHECK(log.contains("not the same host"));
    CHECK(log.contains("rank 1"));
  }
  {
    ScopedEnv off("NCCL_P2P_DISABLE", "1");
    CHECK(selected(self, sameProc) == "shm");
    CHECK(selected(self, otherProc) == "shm");
  }
  {
    ScopedEnv off("RINGCC_SHM_DISABLE", "1");
    CHECK(selected(self, sameProc) == "p2p");
    CapturedLog log;
    CHECK(selected(self, otherProc) == "error");
    CHECK(log.contains("disabled by NCCL_SHM_DISABLE"));
    CHECK(log.contains("UCX"));
  }
  {
    ScopedEnv a("NCCL_P2P_DISABLE", "1"), b("NCCL_SHM_DISABLE", "1");
    CHECK(selected(self, sameProc) == "error");
  }
  {
    PeerInfo gpu = sameProc;
    gpu.memory = MemoryKind::Cuda;
    gpu.cudaDev = 0;
    CapturedLog log;
    CHECK(selected(self, gpu) == "error");
    CHECK(log.contains("device memory"));
  }
  CHECK(selectTransport(self, sameProc, nullptr) == ncclInvalidArgument);
}

TEST_CASE("registry lists p2p before shm and finds them by name", "[select]") {
  auto reg = transportRegistry();
  REQUIRE(reg.size() >= 2);
  CHECK(std::string(reg[0].transport->name()) == "p2p");
  CHECK(std::string(reg[0].disableParam) == "P2P_DISABLE");
  CHECK(std::string(reg[1].transport->name()) == "shm");
  CHECK(findTransport("shm") == reg[1].transport);
  CHECK(findTransport("ucx") == nullptr);
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
