#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"
#include "tests/transport/conn_pair.h"
#include "tests/transport/fifo_stream.h"
#include "transports/shm/device_slots.h"
#include "transports/shm/shm_transport.h"
#include "transports/transport.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

// Names in /dev/shm made by process `pid`.
std::vector<std::string> shmNamesOf(pid_t pid) {
  std::vector<std::string> names;
  std::string prefix = "ringcc-" + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (struct dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

ShmRecvInfo recvInfoOf(const ConnInfo& info) {
  ShmRecvInfo r;
  REQUIRE(info.payload.size() == sizeof(r));
  std::memcpy(&r, info.payload.data(), sizeof(r));
  return r;
}

// The receiver's info `info`, naming the segment `name` instead of its own.
void setPayloadName(ConnInfo* info, const char* name) {
  ShmRecvInfo r = recvInfoOf(*info);
  std::snprintf(r.name, sizeof(r.name), "%s", name);
  std::memcpy(info->payload.data(), &r, sizeof(r));
}

ConnSpec specFor(int selfRank, int peerRank, pid_t peerPid, uint32_t nSlots, uint32_t slotBytes,
                 uint32_t llSlotBytes = 1024) {
  ConnSpec s;
  s.nSlots = nSlots;
  s.slotBytes = slotBytes;
  s.llSlotBytes = llSlotBytes;
  s.self = localPeerInfo(selfRank);
  s.peer = localPeerInfo(peerRank);
  s.peer.pid = static_cast<int32_t>(peerPid);
  return s;
}

ncclResult_t setup(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                   std::unique_ptr<PendingConnection>* pending) {
  return shmTransport().setup(side, spec, info, pending);
}

// A forked child with a pipe each way. The child runs `body(in, out)` and _exits with its
// return value; it never returns into Catch2.
struct Child {
  pid_t pid = -1;
  int in = -1;   // parent reads what the child writes
  int out = -1;  // parent writes what the child reads

  template <typename F>
  explicit Child(F body) {
    int toChild[2], toParent[2];
    REQUIRE(pipe(toChild) == 0);
    REQUIRE(pipe(toParent) == 0);
    // A child forked beside another thread could inherit a lock it holds (ranks.h).
    REQUIRE(ringcc::test::otherThreadsAfterSettling() == "");
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(toChild[1]);
      close(toParent[0]);
      int rc = body(toChild[0], toParent[1]);
      _exit(rc);
    }
    close(toChild[0]);
    close(toParent[1]);
    in = toParent[0];
    out = toChild[1];
  }

  // Exit status (0..255), or 1000 + signal number.
  int wait() {
    close(in);
    close(out);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
    return -1;
  }
};

constexpr size_t kBytes = 2 << 20;

}  // namespace

TEST_CASE("shm moves data both ways between a parent and a forked child", "[shm]") {
  ScopedEnv refs("RINGCC_SHM_REFS", "1");
  const pid_t parent = getpid();
  Child child([parent](int in, int out) {
    // Both halves first, then both infos out, then the parent's two in: the way the
    // connection table does it, all sends before any receive.
    ConnSpec spec = specFor(1, 0, parent, 8, 8192);
    std::unique_ptr<PendingConnection> pr, ps;
    std::unique_ptr<Connector> recv, send;
    ConnInfo myRecv, mySend, theirRecv, theirSend;
    if (setup(ConnSide::Recv, spec, &myRecv, &pr) != ncclSuccess) return 10;
    if (setup(ConnSide::Send, spec, &mySend, &ps) != ncclSuccess) return 10;
    if (!writeInfo(out, myRecv) || !writeInfo(out, mySend)) return 11;
    if (!readInfo(in, &theirRecv) || !readInfo(in, &theirSend)) return 11;
    if (pr->connect(theirSend, &recv) != ncclSuccess) return 12;
    if (ps->connect(theirRecv, &send) != ncclSuccess) return 12;
    std::vector<uint8_t> got(kBytes);
    uint32_t step = 0, tail = 0;
    if (recvStream(recv->view(), &step, got.data(), kBytes, testWaitOptions(recv.get())) !=
        ncclSuccess)
      return 13;
    if (got != makeStream(kBytes, 1)) return 14;
    std::vector<uint8_t> data = makeStream(kBytes, 2);
    if (sendStream(send->view(), &tail, data.data(), kBytes, testWaitOptions(send.get())) !=
        ncclSuccess)
      return 15;
    // Wait until the parent drained everything before closing (closing is allowed earlier, but
    // this also checks that the head counter comes back across processes).
    if (waitForCounter(&send->view().control->head, tail, testWaitOptions(send.get())) !=
        ncclSuccess)
      return 16;
    return 0;
  });

  ConnSpec spec = specFor(0, 1, child.pid, 8, 8192);
  std::unique_ptr<PendingConnection> pr, ps;
  std::unique_ptr<Connector> recv, send;
  ConnInfo myRecv, mySend, theirRecv, theirSend;
  REQUIRE(setup(ConnSide::Recv, spec, &myRecv, &pr) == ncclSuccess);
  REQUIRE(setup(ConnSide::Send, spec, &mySend, &ps) == ncclSuccess);

  // The segment exists, under our pid, with mode 0600, until the child attaches.
  ShmRecvInfo b = recvInfoOf(myRecv);
  struct stat st;
  REQUIRE(stat((std::string("/dev/shm") + b.name).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(S_ISREG(st.st_mode));
  CHECK(st.st_uid == getuid());
  CHECK(shmNamesOf(parent).size() == 1);
  CHECK(mySend.side == ConnSide::Send);
  CHECK(std::string(mySend.transport) == "shm");

  REQUIRE(writeInfo(child.out, myRecv));
  REQUIRE(writeInfo(child.out, mySend));
  REQUIRE(readInfo(child.in, &theirRecv));
  REQUIRE(readInfo(child.in, &theirSend));
  CHECK(theirSend.side == ConnSide::Send);
  REQUIRE(ps->connect(theirRecv, &send) == ncclSuccess);
  CHECK(shmNamesOf(child.pid).empty());  // we attached to the child's segment: name gone
  REQUIRE(pr->connect(theirSend, &recv) == ncclSuccess);
  // With RINGCC_SHM_REFS=1 and the right to read the child's memory (same user, CMA allowed)
  // our receive side says so, in
  // memory the child's sender reads, and keeps the child's pid for process_vm_readv.
  CHECK(recv->view().control->refKind == kRefProcess);
  CHECK(recv->view().refPid == child.pid);

  std::vector<uint8_t> data = makeStream(kBytes, 1), got(kBytes);
  uint32_t tail = 0, step = 0;
  CHECK(sendStream(send->view(), &tail, data.data(), kBytes, testWaitOptions(send.get())) ==
        ncclSuccess);
  CHECK(recvStream(recv->view(), &step, got.data(), kBytes, testWaitOptions(recv.get())) ==
        ncclSuccess);
  CHECK(got == makeStream(kBytes, 2));
  CHECK(child.wait() == 0);
  CHECK(shmNamesOf(parent).empty());  // the child attached and unlinked ours
  recv.reset();
  send.reset();
  CHECK(shmNamesOf(parent).empty());
  CHECK(shmNamesOf(child.pid).empty());
}

TEST_CASE("shm: a futex sleeper in another process is woken by the publisher", "[shm]") {
  const pid_t parent = getpid();
  // The child fills both slots, then sleeps for a free one with a 10 s futex timeout: only a
  // cross-process FUTEX_WAKE can end that sleep quickly.
  Child child([parent](int in, int out) {
    ConnSpec spec = specFor(1, 0, parent, 2, 64);
    ConnInfo mine, theirs;
    std::unique_ptr<PendingConnection> pending;
    std::unique_ptr<Connector> send;
    if (setup(ConnSide::Send, spec, &mine, &pending) != ncclSuccess) return 10;
    if (!writeInfo(out, mine) || !readInfo(in, &theirs)) return 10;
    if (pending->connect(theirs, &send) != ncclSuccess) return 11;
    ConnectorView v = send->view();
    publishCounter(&v.control->tail, 2);
    WaitOptions o = testWaitOptions(send.get());
    o.spinCount = 0;
    o.sleepMicros = 10 * 1000 * 1000;
    auto t0 = WaitClock::now();
    if (waitSlotFree(v, 2, o) != ncclSuccess) return 12;
    auto waited = WaitClock::now() - t0;
    char done = 1;
    if (!writeAll(out, &done, 1)) return 13;
    return waited < std::chrono::seconds(3) ? 0 : 14;
  });
  ConnSpec spec = specFor(0, 1, child.pid, 2, 64);
  ConnInfo mine, theirs;
  std::unique_ptr<PendingConnection> pending;
  std::unique_ptr<Connector> recv;
  REQUIRE(setup(ConnSide::Recv, spec, &mine, &pending) == ncclSuccess);
  REQUIRE(writeInfo(child.out, mine));
  REQUIRE(readInfo(child.in, &theirs));
  REQUIRE(pending->connect(theirs, &recv) == ncclSuccess);
  ConnectorView v = recv->view();
  REQUIRE(waitSlotFilled(v, 1, testWaitOptions(recv.get())) == ncclSuccess);
  // Wait until the child is asleep on head, then free a slot.
  auto giveUp = WaitClock::now() + std::chrono::seconds(10);
  while (std::atomic_ref<uint32_t>(v.control->head.waiters).load() == 0 &&
         WaitClock::now() < giveUp)
    usleep(1000);
  CHECK(std::atomic_ref<uint32_t>(v.control->head.waiters).load() == 1);
  usleep(50 * 1000);
  publishCounter(&v.control->head, 1);
  char done = 0;
  CHECK(readAll(child.in, &done, 1));
  CHECK(child.wait() == 0);
}

TEST_CASE("shm: a child killed mid-transfer ends the parent's waits; close cleans up", "[shm]") {
  const pid_t parent = getpid();
  // Child: receives on C (never drains it), sends forever on A.
  Child child([parent](int in, int out) {
    ConnSpec spec = specFor(1, 0, parent, 4, 4096);
    std::unique_ptr<PendingConnection> pc, pa;
    std::unique_ptr<Connector> recvC, sendA;
    ConnInfo c, a, theirA, theirC;
    if (setup(ConnSide::Recv, spec, &c, &pc) != ncclSuccess) return 10;
    if (setup(ConnSide::Send, spec, &a, &pa) != ncclSuccess) return 10;
    if (!writeInfo(out, c) || !writeInfo(out, a)) return 11;
    if (!readInfo(in, &theirA) || !readInfo(in, &theirC)) return 11;
    if (pa->connect(theirA, &sendA) != ncclSuccess) return 12;
    if (pc->connect(theirC, &recvC) != ncclSuccess) return 12;
    std::vector<uint8_t> data = makeStream(8 << 20, 3);
    uint32_t tail = 0;
    sendStream(sendA->view(), &tail, data.data(), data.size(), testWaitOptions(sendA.get(), 60));
    return 13;  // not reached: killed while sending
  });

  ConnSpec spec = specFor(0, 1, child.pid, 4, 4096);
  std::unique_ptr<PendingConnection> pa, pb, pc;
  std::unique_ptr<Connector> recvA, sendC;
  ConnInfo a, b, c, theirC, theirA;
  REQUIRE(setup(ConnSide::Recv, spec, &a, &pa) == ncclSuccess);
  REQUIRE(setup(ConnSide::Recv, spec, &b, &pb) == ncclSuccess);  // never connected
  REQUIRE(setup(ConnSide::Send, spec, &c, &pc) == ncclSuccess);
  REQUIRE(readInfo(child.in, &theirC));
  REQUIRE(readInfo(child.in, &theirA));
  REQUIRE(writeInfo(child.out, a));
  REQUIRE(writeInfo(child.out, c));
  REQUIRE(pc->connect(theirC, &sendC) == ncclSuccess);
  REQUIRE(pa->connect(theirA, &recvA) == ncclSuccess);

  // Some data arrives exactly, then the child dies without closing anything.
  std::vector<uint8_t> got;
  uint32_t step = 0;
  REQUIRE(recvSlots(recvA->view(), &step, 64, &got, testWaitOptions(recvA.get())) == ncclSuccess);
  CHECK(recvA->peerState() == PeerState::Open);
  REQUIRE(kill(child.pid, SIGKILL) == 0);

  // Receiving drains what was published, then fails with ncclRemoteError long before the
  // 20 s deadline; the child is still a zombie here (not reaped), which must count as dead.
  CapturedLog log;
  auto t0 = WaitClock::now();
  CHECK(recvSlots(recvA->view(), &step, 1 << 20, &got, testWaitOptions(recvA.get())) ==
        ncclRemoteError);
  CHECK(WaitClock::now() - t0 < std::chrono::seconds(3));
  CHECK(recvA->peerState() == PeerState::Dead);
  CHECK(log.contains("dead"));
  CHECK(step >= 64);
  CHECK(got == makeStream(got.size(), 3));

  // Sending to the dead child: the free slots take data, then the wait fails.
  std::vector<uint8_t> data = makeStream(1 << 20, 4);
  uint32_t tail = 0;
  t0 = WaitClock::now();
  CHECK(sendStream(sendC->view(), &tail, data.data(), data.size(), testWaitOptions(sendC.get())) ==
        ncclRemoteError);
  CHECK(WaitClock::now() - t0 < std::chrono::seconds(3));
  CHECK(tail == 4);

  CHECK(child.wait() == 1000 + SIGKILL);
  CHECK(shmNamesOf(child.pid).empty());
  CHECK(shmNamesOf(parent).size() == 1);  // B: nobody attached
  recvA.reset();
  pb.reset();
  sendC.reset();
  CHECK(shmNamesOf(parent).empty());
}

TEST_CASE("shm segments are 0600 whatever the umask, and named after their creator", "[shm]") {
  mode_t old = umask(0277);  // would turn 0600 into 0400
  ConnSpec spec = specFor(0, 1, getpid(), 8, 4096, 2048);
  ConnInfo info;
  std::unique_ptr<PendingConnection> pending;
  ncclResult_t r = setup(ConnSide::Recv, spec, &info, &pending);
  umask(old);
  REQUIRE(r == ncclSuccess);
  ShmRecvInfo b = recvInfoOf(info);
  CHECK(std::string(info.transport) == "shm");
  CHECK(info.side == ConnSide::Recv);
  CHECK(info.version == kShmInfoVersion);
  CHECK(std::string(b.name).rfind("/ringcc-" + std::to_string(getpid()) + "-", 0) == 0);
  CHECK(b.recvPid == getpid());
  CHECK(info.geometry.nSlots == 8);
  CHECK(info.geometry.slotBytes == 4096);
  CHECK(info.geometry.llSlotBytes == 2048);
  struct stat st;
  REQUIRE(stat((std::string("/dev/shm") + b.name).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(static_cast<uint64_t>(st.st_size) >= 8 * 4096 + 8 * 2048 + fifoControlBytes(8));
  pending.reset();  // never connected: the name goes with it
  CHECK(stat((std::string("/dev/shm") + b.name).c_str(), &st) != 0);
}

TEST_CASE("shm: Simple and LL memory start zeroed and aligned; no progress, no doorbell", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 8, 4096, 2048);
  ConnPair c;
  REQUIRE(connectPair(shmTransport(), spec, &c) == ncclSuccess);
  const ConnectorView& v = c.recv->view();
  CHECK(v.control->tail.value == 0);
  CHECK(v.control->head.value == 0);
  CHECK(reinterpret_cast<uintptr_t>(v.slots) % 4096 == 0);
  CHECK(reinterpret_cast<uintptr_t>(&v.control->head) -
            reinterpret_cast<uintptr_t>(&v.control->tail) ==
        64);
  REQUIRE(v.llSlots != nullptr);
  CHECK(v.llSlotBytes == 2048);
  CHECK(reinterpret_cast<uintptr_t>(v.llSlots) % 64 == 0);
  CHECK(v.llSlots >= v.slots + 8 * 4096);
  const size_t llBytes = 8 * 2048;
  std::vector<char> zeros(llBytes, 0);
  CHECK(std::memcmp(v.llSlots, zeros.data(), llBytes) == 0);
  // Two mappings of the same LL lines.
  const ConnectorView& sv = c.send->view();
  REQUIRE(sv.llSlots != nullptr);
  CHECK(sv.llSlots != v.llSlots);
  CHECK(sv.llSlotBytes == 2048);
  reinterpret_cast<LlLine*>(sv.llSlots)[llBytes / kLlLineBytes - 1] = LlLine{5, 1, 6, 1};
  CHECK(reinterpret_cast<const LlLine*>(v.llSlots)[llBytes / kLlLineBytes - 1].data0 == 5);
  CHECK(v.doorbell == nullptr);
  CHECK(sv.doorbell == nullptr);
  for (Connector* conn : {c.recv.get(), c.send.get()}) {
    CHECK_FALSE(conn->needsProgress());
    bool moved = true;
    CHECK(conn->progress(&moved) == ncclSuccess);
    CHECK_FALSE(moved);
  }

  ConnPair none;
  REQUIRE(connectPair(shmTransport(), specFor(0, 1, getpid(), 4, 4096, 0), &none) == ncclSuccess);
  CHECK(none.recv->view().llSlots == nullptr);
  CHECK(none.send->view().llSlots == nullptr);
  CHECK(none.recv->view().llSlotBytes == 0);
}

TEST_CASE("shm works within one process too, and leaves nothing behind", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 16384);
  for (bool senderFirst : {false, true}) {
    ConnPair c;
    REQUIRE(connectPair(shmTransport(), spec, &c, senderFirst) == ncclSuccess);
    CHECK(shmNamesOf(getpid()).empty());  // attached: unlinked at once
    // Two mappings of the same pages.
    CHECK(c.recv->view().slots != c.send->view().slots);
    std::vector<uint8_t> in = makeStream(kBytes, 9), out(kBytes);
    ncclResult_t sendResult = ncclInternalError;
    std::thread sender([&] {
      uint32_t tail = 0;
      sendResult =
          sendStream(c.send->view(), &tail, in.data(), kBytes, testWaitOptions(c.send.get()));
    });
    uint32_t step = 0;
    CHECK(recvStream(c.recv->view(), &step, out.data(), kBytes, testWaitOptions(c.recv.get())) ==
          ncclSuccess);
    sender.join();
    CHECK(sendResult == ncclSuccess);
    CHECK(out == in);
    c.send.reset();
    CHECK(c.recv->peerState() == PeerState::Closed);
  }
}

namespace {

// Connects a pair whose sender's info is changed by `edit` before the receiver reads it (as
// from a sender whose probes this process cannot read): the receiver's declared RefKind.
uint32_t refKindWithSendInfo(const ConnSpec& spec, const std::function<void(ShmSendInfo&)>& edit) {
  ConnPair c;
  std::unique_ptr<PendingConnection> pr, ps;
  ConnInfo recvInfo, sendInfo;
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &pr) == ncclSuccess);
  REQUIRE(setup(ConnSide::Send, spec, &sendInfo, &ps) == ncclSuccess);
  ShmSendInfo si;
  REQUIRE(sendInfo.payload.size() == sizeof(si));
  std::memcpy(&si, sendInfo.payload.data(), sizeof(si));
  edit(si);
  std::memcpy(sendInfo.payload.data(), &si, sizeof(si));
  REQUIRE(ps->connect(recvInfo, &c.send) == ncclSuccess);
  REQUIRE(pr->connect(sendInfo, &c.recv) == ncclSuccess);
  return c.recv->view().control->refKind;
}

}  // namespace

TEST_CASE("shm: references are declared only where the receiver can read the sender", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 16384);
  {
    ConnPair c;  // by default: mapped references (to ncclMemAlloc buffers)
    REQUIRE(connectPair(shmTransport(), spec, &c, false) == ncclSuccess);
    CHECK(c.recv->view().control->refKind == kRefMapped);
    CHECK(c.recv->view().refPid == getpid());
  }
  {
    ScopedEnv off("RINGCC_SHM_MAP", "0");
    ConnPair c;
    REQUIRE(connectPair(shmTransport(), spec, &c, false) == ncclSuccess);
    CHECK(c.recv->view().control->refKind == kRefNone);
    CHECK(c.recv->view().refPid == 0);
  }
  // A sender whose mapping probe is not the file it names (a process whose fds we cannot
  // open would fail the same way): no mapped references.
  CHECK(refKindWithSendInfo(spec, [](ShmSendInfo& si) {
          CHECK(si.probeRegion.ino != 0);
          si.probeRegion.ino ^= 1;
        }) == kRefNone);
  ScopedEnv on("RINGCC_SHM_REFS", "1");
  {
    ConnPair c;
    REQUIRE(connectPair(shmTransport(), spec, &c, false) == ncclSuccess);
    CHECK(c.recv->view().control->refKind == kRefProcess);
    CHECK(c.send->view().control->refKind == kRefProcess);  // the same word, mapped twice
  }
  // A sender whose probe word reads back wrong (as from a process we may not read): no
  // process_vm_readv references; the default's mapped ones are still possible.
  CHECK(refKindWithSendInfo(spec, [](ShmSendInfo& si) { si.probeValue ^= 1; }) == kRefMapped);
}

TEST_CASE("shm: CUDA ranks map the segment for their GPUs, without references", "[shm]") {
  FakeCudaScope cuda;
  CuContext ctx = nullptr;
  REQUIRE(cuda.driver().cuDevicePrimaryCtxRetain(&ctx, 0) == kCuSuccess);
  REQUIRE(cuda.driver().cuCtxSetCurrent(ctx) == kCuSuccess);
  ScopedEnv on("RINGCC_SHM_REFS", "1");  // asked for, and still refused: kernels cannot follow them
  ConnSpec spec = specFor(0, 1, getpid(), 4, 16384);
  for (PeerInfo* p : {&spec.self, &spec.peer}) {
    p->memory = MemoryKind::Cuda;
    p->cudaDev = 0;
  }
  {
    ConnPair c;
    REQUIRE(connectPair(shmTransport(), spec, &c, false) == ncclSuccess);
    CHECK(cuda.liveHostRegistrations() == 2);  // each side registers its own mapping
    for (const Connector* conn : {c.recv.get(), c.send.get()}) {
      CHECK(conn->hostControl() != nullptr);  // what the CUDA engine's peer watch writes
      CHECK(conn->view().doorbell == nullptr);
      CHECK_FALSE(conn->fedByDevice());  // no proxy: both sides map the memory
    }
    CHECK(c.recv->view().control->refKind == kRefNone);
    CHECK(c.recv->view().refPid == 0);
  }
  CHECK(cuda.liveHostRegistrations() == 0);  // unregistered with the connectors
  // Without a current context there is nothing to register with: a clear error, no crash.
  REQUIRE(cuda.driver().cuCtxSetCurrent(nullptr) == kCuSuccess);
  CapturedLog log;
  ConnInfo info;
  std::unique_ptr<PendingConnection> pending;
  CHECK(setup(ConnSide::Recv, spec, &info, &pending) == ncclInvalidUsage);
  CHECK(log.contains("no current CUDA context"));
}

namespace {

// A spec between CUDA ranks: this one on emulated device selfDev, the peer on peerDev (each
// named by its PCI bus id, as ranks of other processes know each other).
ConnSpec cudaSpecFor(int selfRank, int peerRank, pid_t peerPid, int selfDev, int peerDev) {
  ConnSpec spec = specFor(selfRank, peerRank, peerPid, 8, 8192);
  for (auto [p, dev] : {std::pair{&spec.self, selfDev}, std::pair{&spec.peer, peerDev}}) {
    p->memory = MemoryKind::Cuda;
    p->cudaDev = dev;
    p->busId = int64_t{0x18 + 0x10 * dev} << 8;  // the emulated driver's buses
  }
  return spec;
}

bool bindDevice(const FakeCudaScope& cuda, int dev) {
  CuContext ctx = nullptr;
  return cuda.driver().cuDevicePrimaryCtxRetain(&ctx, dev) == kCuSuccess &&
         cuda.driver().cuCtxSetCurrent(ctx) == kCuSuccess;
}

}  // namespace

TEST_CASE("shm: CUDA ranks of two processes put the slots in the receiver's GPU (CUDA IPC)",
          "[shm]") {
  const pid_t parent = getpid();
  // The child, on device 1, sends into slots in the parent's device 0.
  Child child([parent](int in, int out) {
    FakeCudaScope cuda;
    if (!bindDevice(cuda, 1)) return 10;
    const ConnSpec spec = cudaSpecFor(1, 0, parent, 1, 0);
    std::unique_ptr<PendingConnection> ps;
    std::unique_ptr<Connector> send;
    ConnInfo mySend, theirRecv;
    if (setup(ConnSide::Send, spec, &mySend, &ps) != ncclSuccess) return 11;
    if (!writeInfo(out, mySend) || !readInfo(in, &theirRecv)) return 12;
    if (ps->connect(theirRecv, &send) != ncclSuccess) return 13;
    if (cuda.ipcOpens() != 1 || cuda.liveIpcImports() != 1) return 14;
    const std::vector<uint8_t> data = makeStream(kBytes, 3);
    uint32_t tail = 0;
    const WaitOptions o = testWaitOptions(send.get());
    if (sendStream(send->view(), &tail, data.data(), kBytes, o) != ncclSuccess) return 15;
    if (waitForCounter(&send->view().control->head, tail, o) != ncclSuccess) return 16;
    // A GPU that cannot reach the receiver's cannot open its handle: an error that says why
    // and what to do.
    ShmRecvInfo r;
    std::memcpy(&r, theirRecv.payload.data(), sizeof r);
    cuda.disablePeerAccess();
    {
      CapturedLog log;
      DeviceSlots refused;
      if (DeviceSlots::open(r.ipcHandle, deviceSlotsBytes(theirRecv.geometry), 0, 0, "test",
                            &refused) != ncclSystemError)
        return 17;
      if (!log.contains("cuIpcOpenMemHandle") || !log.contains("NCCL_P2P_DISABLE=1")) return 18;
    }
    send.reset();
    return cuda.liveIpcImports() == 0 ? 0 : 19;  // closed with the connector
  });

  FakeCudaScope cuda;  // after the fork: the child inherits none of its threads
  REQUIRE(bindDevice(cuda, 0));
  const ConnSpec spec = cudaSpecFor(0, 1, child.pid, 0, 1);
  std::unique_ptr<PendingConnection> pr;
  std::unique_ptr<Connector> recv;
  ConnInfo myRecv, theirSend;
  REQUIRE(setup(ConnSide::Recv, spec, &myRecv, &pr) == ncclSuccess);
  const ShmRecvInfo r = recvInfoOf(myRecv);
  CHECK(r.deviceSlots == 1);
  struct stat st;  // the segment holds the header and control block only
  REQUIRE(stat((std::string("/dev/shm") + r.name).c_str(), &st) == 0);
  CHECK(st.st_size <= 4096);
  CHECK(cuda.liveDeviceAllocs() == 1);
  REQUIRE(writeInfo(child.out, myRecv));
  REQUIRE(readInfo(child.in, &theirSend));
  REQUIRE(pr->connect(theirSend, &recv) == ncclSuccess);
  const ConnectorView& v = recv->view();
  unsigned kind = 0;
  REQUIRE(cuda.driver().cuPointerGetAttribute(&kind, kCuPointerAttributeMemoryType,
                                              reinterpret_cast<CuDevicePtr>(v.slots)) ==
          kCuSuccess);
  CHECK(kind == kCuMemoryTypeDevice);
  REQUIRE(v.llSlots != nullptr);
  CHECK(v.llSlots == v.slots + deviceLlOffset(connGeometry(spec)));
  const std::vector<char> ll(v.llSlots, v.llSlots + uint64_t{v.nSlots} * v.llSlotBytes);
  CHECK(std::all_of(ll.begin(), ll.end(), [](char c) { return c == 0; }));  // no epoch is 0
  CHECK(recv->hostControl() != nullptr);  // the control block stays in host memory
  std::vector<uint8_t> got(kBytes);
  uint32_t step = 0;
  CHECK(recvStream(v, &step, got.data(), kBytes, testWaitOptions(recv.get())) == ncclSuccess);
  CHECK(got == makeStream(kBytes, 3));
  CHECK(child.wait() == 0);
  recv.reset();
  CHECK(cuda.liveDeviceAllocs() == 0);
  CHECK(cuda.liveHostRegistrations() == 0);
}

TEST_CASE("shm: slots stay in host memory where the sender's GPU cannot write the receiver's",
          "[shm]") {
  FakeCudaScope cuda;
  REQUIRE(bindDevice(cuda, 0));
  const pid_t other = getppid();  // another process: only the decision is tested here
  CHECK(deviceSlotsFor(cudaSpecFor(0, 1, other, 0, 1)));
  CHECK(deviceSlotsFor(cudaSpecFor(0, 1, other, 0, 0)));           // two processes on one GPU
  CHECK_FALSE(deviceSlotsFor(cudaSpecFor(0, 1, getpid(), 0, 1)));  // one process: p2p's job
  ConnSpec hidden = cudaSpecFor(0, 1, other, 0, 1);
  hidden.peer.busId = int64_t{0x99} << 8;  // a GPU this process does not see
  CHECK_FALSE(deviceSlotsFor(hidden));
  ConnSpec host = specFor(0, 1, other, 8, 8192);
  CHECK_FALSE(deviceSlotsFor(host));
  ConnSpec container = cudaSpecFor(0, 1, other, 0, 1);
  container.peer.pidNamespace ^= 1;  // another container's process
  CHECK_FALSE(deviceSlotsFor(container));
  {
    ScopedEnv off("NCCL_P2P_DISABLE", "1");
    CHECK_FALSE(deviceSlotsFor(cudaSpecFor(0, 1, other, 0, 1)));
  }
  cuda.disablePeerAccess();
  CHECK_FALSE(deviceSlotsFor(cudaSpecFor(0, 1, other, 0, 1)));
  CHECK(deviceSlotsFor(cudaSpecFor(0, 1, other, 0, 0)));  // its own GPU it can always reach
  // Such a receiver's info says so, and its segment holds the slots.
  ConnInfo info;
  std::unique_ptr<PendingConnection> pending;
  REQUIRE(setup(ConnSide::Recv, cudaSpecFor(0, 1, other, 0, 1), &info, &pending) == ncclSuccess);
  CHECK(recvInfoOf(info).deviceSlots == 0);
  struct stat st;
  REQUIRE(stat((std::string("/dev/shm") + recvInfoOf(info).name).c_str(), &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) > uint64_t{8} * 8192);
  CHECK(cuda.liveDeviceAllocs() == 0);
}

TEST_CASE("shm: attaching after the receiver closed fails cleanly; mismatches are refused",
          "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 4096);
  ConnInfo recvInfo, sendInfo;
  std::unique_ptr<PendingConnection> recv, send;
  std::unique_ptr<Connector> conn;
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  recv.reset();
  CHECK(shmNamesOf(getpid()).empty());
  REQUIRE(setup(ConnSide::Send, spec, &sendInfo, &send) == ncclSuccess);
  CHECK(send->connect(recvInfo, &conn) == ncclRemoteError);
  CHECK(conn == nullptr);

  // Geometry mismatch is misuse, found before anything is mapped, on either side.
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  CapturedLog log;
  for (ConnSpec other : {specFor(0, 1, getpid(), 8, 4096), specFor(0, 1, getpid(), 4, 8192),
                         specFor(0, 1, getpid(), 4, 4096, 4096)}) {
    REQUIRE(setup(ConnSide::Send, other, &sendInfo, &send) == ncclSuccess);
    CHECK(send->connect(recvInfo, &conn) == ncclInvalidUsage);
  }
  CHECK(log.contains("NCCL_BUFFSIZE"));
  CHECK(shmNamesOf(getpid()).size() == 1);
  // The receiver refuses the last sender's LL size too, and infos that are not a sender's.
  CHECK(recv->connect(sendInfo, &conn) == ncclInvalidUsage);
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  CHECK(recv->connect(recvInfo, &conn) == ncclInvalidUsage);
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  ConnInfo p2pInfo = sendInfo;
  p2pInfo.geometry = connGeometry(spec);  // refused for its transport, not its geometry
  std::strcpy(p2pInfo.transport, "p2p");
  CHECK(recv->connect(p2pInfo, &conn) == ncclInvalidUsage);
  CHECK(log.contains("'p2p'"));
  // A receiver's info that names a segment of another geometry than its header says: the
  // segment is checked before anything in it is used.
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  std::unique_ptr<PendingConnection> bigger;
  ConnInfo biggerInfo;
  REQUIRE(setup(ConnSide::Recv, specFor(0, 1, getpid(), 4, 8192), &biggerInfo, &bigger) ==
          ncclSuccess);
  ConnInfo lying = recvInfo;
  setPayloadName(&lying, recvInfoOf(biggerInfo).name);
  REQUIRE(setup(ConnSide::Send, spec, &sendInfo, &send) == ncclSuccess);
  CHECK(send->connect(lying, &conn) == ncclInvalidUsage);
  CHECK(log.contains("bytes, the connection's geometry needs"));
  CHECK(conn == nullptr);
  recv.reset();
  bigger.reset();
  CHECK(shmNamesOf(getpid()).empty());
}

TEST_CASE("shm: a receiver that gives up before its connect looks closed to its sender", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 4096);
  ConnInfo recvInfo, sendInfo;
  std::unique_ptr<PendingConnection> recv, send;
  std::unique_ptr<Connector> conn;
  REQUIRE(setup(ConnSide::Recv, spec, &recvInfo, &recv) == ncclSuccess);
  REQUIRE(setup(ConnSide::Send, spec, &sendInfo, &send) == ncclSuccess);
  REQUIRE(send->connect(recvInfo, &conn) == ncclSuccess);
  CHECK(conn->peerState() == PeerState::Open);
  recv.reset();
  CHECK(conn->peerState() == PeerState::Closed);
  CHECK(waitSlotFree(conn->view(), 4, testWaitOptions(conn.get(), 10)) == ncclRemoteError);
}

TEST_CASE("shm: cleanUpAfter removes what a dead receiver left, never a live one's", "[shm]") {
  const pid_t parent = getpid();
  // The child sets up a receiver and reports, then waits for word to die without closing.
  Child child([parent](int in, int out) {
    ConnSpec spec = specFor(1, 0, parent, 4, 4096);
    std::unique_ptr<PendingConnection> recv;
    ConnInfo info;
    if (setup(ConnSide::Recv, spec, &info, &recv) != ncclSuccess) return 10;
    if (!writeInfo(out, info)) return 11;
    char go;
    if (!readAll(in, &go, 1)) return 12;
    kill(getpid(), SIGKILL);
    return 13;
  });
  ConnInfo info;
  REQUIRE(readInfo(child.in, &info));
  PeerInfo self = localPeerInfo(0);
  PeerInfo dead = localPeerInfo(1);
  dead.pid = static_cast<int32_t>(child.pid);
  REQUIRE(shmNamesOf(child.pid).size() == 1);
  // Alive: its segment waits for a sender, and stays.
  shmTransport().cleanUpAfter(self, dead);
  CHECK(shmNamesOf(child.pid).size() == 1);
  // Another pid namespace: the pid means another process, whose names are not ours to touch.
  REQUIRE(writeAll(child.out, "x", 1));
  CHECK(child.wait() == 1000 + SIGKILL);
  PeerInfo foreign = dead;
  foreign.pidNamespace ^= 1;
  shmTransport().cleanUpAfter(self, foreign);
  CHECK(shmNamesOf(child.pid).size() == 1);
  // Dead, in our namespace: the orphan goes (through the registry, as a communicator does).
  PeerInfo peers[] = {self, dead};
  cleanUpAfterPeers(self, peers);
  CHECK(shmNamesOf(child.pid).empty());
  std::unique_ptr<PendingConnection> send;
  std::unique_ptr<Connector> conn;
  ConnInfo sendInfo;
  REQUIRE(setup(ConnSide::Send, specFor(0, 1, child.pid, 4, 4096), &sendInfo, &send) ==
          ncclSuccess);
  CHECK(send->connect(info, &conn) == ncclRemoteError);
}
