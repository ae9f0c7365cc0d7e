#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/test_env.h"
#include "tests/transport/fifo_stream.h"
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

ShmBlob shmBlobOf(const ConnBlob& blob) {
  ShmBlob b;
  std::memcpy(&b, blob.payload, sizeof(b));
  return b;
}

ConnSpec specFor(int selfRank, int peerRank, pid_t peerPid, uint32_t nSlots, uint32_t slotBytes) {
  ConnSpec s;
  s.nSlots = nSlots;
  s.slotBytes = slotBytes;
  s.self = localPeerInfo(selfRank);
  s.peer = localPeerInfo(peerRank);
  s.peer.pid = static_cast<int32_t>(peerPid);
  return s;
}

bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
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
  const pid_t parent = getpid();
  Child child([parent](int in, int out) {
    ConnSpec spec = specFor(1, 0, parent, 8, 8192);
    std::unique_ptr<Connector> recv, send;
    ConnBlob mine, theirs;
    if (shmTransport().setupRecv(spec, &mine, &recv) != ncclSuccess) return 10;
    if (!writeAll(out, &mine, sizeof(mine)) || !readAll(in, &theirs, sizeof(theirs))) return 11;
    if (shmTransport().connectSend(spec, theirs, &send) != ncclSuccess) return 12;
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
  std::unique_ptr<Connector> recv, send;
  ConnBlob mine, theirs;
  REQUIRE(shmTransport().setupRecv(spec, &mine, &recv) == ncclSuccess);

  // The segment exists, under our pid, with mode 0600, until the child attaches.
  ShmBlob b = shmBlobOf(mine);
  struct stat st;
  REQUIRE(stat((std::string("/dev/shm") + b.name).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(S_ISREG(st.st_mode));
  CHECK(st.st_uid == getuid());
  CHECK(shmNamesOf(parent).size() == 1);

  REQUIRE(writeAll(child.out, &mine, sizeof(mine)));
  REQUIRE(readAll(child.in, &theirs, sizeof(theirs)));
  REQUIRE(shmTransport().connectSend(spec, theirs, &send) == ncclSuccess);
  CHECK(shmNamesOf(child.pid).empty());  // we attached to the child's segment: name gone

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
    ConnBlob blob;
    std::unique_ptr<Connector> send;
    if (!readAll(in, &blob, sizeof(blob))) return 10;
    if (shmTransport().connectSend(spec, blob, &send) != ncclSuccess) return 11;
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
  ConnBlob blob;
  std::unique_ptr<Connector> recv;
  REQUIRE(shmTransport().setupRecv(spec, &blob, &recv) == ncclSuccess);
  REQUIRE(writeAll(child.out, &blob, sizeof(blob)));
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
    std::unique_ptr<Connector> recvC, sendA;
    ConnBlob c, a;
    if (shmTransport().setupRecv(spec, &c, &recvC) != ncclSuccess) return 10;
    if (!writeAll(out, &c, sizeof(c)) || !readAll(in, &a, sizeof(a))) return 11;
    if (shmTransport().connectSend(spec, a, &sendA) != ncclSuccess) return 12;
    std::vector<uint8_t> data = makeStream(8 << 20, 3);
    uint32_t tail = 0;
    sendStream(sendA->view(), &tail, data.data(), data.size(), testWaitOptions(sendA.get(), 60));
    return 13;  // not reached: killed while sending
  });

  ConnSpec spec = specFor(0, 1, child.pid, 4, 4096);
  std::unique_ptr<Connector> recvA, recvB, sendC;
  ConnBlob a, b, c;
  REQUIRE(shmTransport().setupRecv(spec, &a, &recvA) == ncclSuccess);
  REQUIRE(shmTransport().setupRecv(spec, &b, &recvB) == ncclSuccess);  // never attached
  REQUIRE(readAll(child.in, &c, sizeof(c)));
  REQUIRE(writeAll(child.out, &a, sizeof(a)));
  REQUIRE(shmTransport().connectSend(spec, c, &sendC) == ncclSuccess);

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
  recvB.reset();
  sendC.reset();
  CHECK(shmNamesOf(parent).empty());
}

TEST_CASE("shm segments are 0600 whatever the umask, and named after their creator", "[shm]") {
  mode_t old = umask(0277);  // would turn 0600 into 0400
  ConnSpec spec = specFor(0, 1, getpid(), 8, 4096);
  ConnBlob blob;
  std::unique_ptr<Connector> recv;
  ncclResult_t r = shmTransport().setupRecv(spec, &blob, &recv);
  umask(old);
  REQUIRE(r == ncclSuccess);
  ShmBlob b = shmBlobOf(blob);
  CHECK(std::string(blob.transport) == "shm");
  CHECK(std::string(b.name).rfind("/ringcc-" + std::to_string(getpid()) + "-", 0) == 0);
  CHECK(b.recvPid == getpid());
  CHECK(b.nSlots == 8);
  CHECK(b.slotBytes == 4096);
  struct stat st;
  REQUIRE(stat((std::string("/dev/shm") + b.name).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(static_cast<uint64_t>(st.st_size) == b.bytes);
  CHECK(b.bytes >= 8 * 4096 + fifoControlBytes(8));
  // The FIFO starts zeroed and page-aligned.
  const ConnectorView& v = recv->view();
  CHECK(v.control->tail.value == 0);
  CHECK(v.control->head.value == 0);
  CHECK(reinterpret_cast<uintptr_t>(v.slots) % 4096 == 0);
  CHECK(reinterpret_cast<uintptr_t>(&v.control->head) -
            reinterpret_cast<uintptr_t>(&v.control->tail) ==
        64);
  recv.reset();
  CHECK(stat((std::string("/dev/shm") + b.name).c_str(), &st) != 0);
}

TEST_CASE("shm works within one process too, and leaves nothing behind", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 16384);
  ConnBlob blob;
  std::unique_ptr<Connector> recv, send;
  REQUIRE(shmTransport().setupRecv(spec, &blob, &recv) == ncclSuccess);
  REQUIRE(shmTransport().connectSend(spec, blob, &send) == ncclSuccess);
  CHECK(shmNamesOf(getpid()).empty());  // attached: unlinked at once
  // Two mappings of the same pages.
  CHECK(recv->view().slots != send->view().slots);
  std::vector<uint8_t> in = makeStream(kBytes, 9), out(kBytes);
  ncclResult_t sendResult = ncclInternalError;
  std::thread sender([&] {
    uint32_t tail = 0;
    sendResult = sendStream(send->view(), &tail, in.data(), kBytes, testWaitOptions(send.get()));
  });
  uint32_t step = 0;
  CHECK(recvStream(recv->view(), &step, out.data(), kBytes, testWaitOptions(recv.get())) ==
        ncclSuccess);
  sender.join();
  CHECK(sendResult == ncclSuccess);
  CHECK(out == in);
  send.reset();
  CHECK(recv->peerState() == PeerState::Closed);
}

TEST_CASE("shm: attaching after the receiver closed fails cleanly", "[shm]") {
  ConnSpec spec = specFor(0, 1, getpid(), 4, 4096);
  ConnBlob blob;
  std::unique_ptr<Connector> recv, send;
  REQUIRE(shmTransport().setupRecv(spec, &blob, &recv) == ncclSuccess);
  recv.reset();
  CHECK(shmNamesOf(getpid()).empty());
  CHECK(shmTransport().connectSend(spec, blob, &send) == ncclRemoteError);
  CHECK(send == nullptr);

  // Geometry mismatch is misuse, found before anything is mapped.
  REQUIRE(shmTransport().setupRecv(spec, &blob, &recv) == ncclSuccess);
  ConnSpec other = specFor(0, 1, getpid(), 8, 4096);
  CHECK(shmTransport().connectSend(other, blob, &send) == ncclInvalidUsage);
  CHECK(shmNamesOf(getpid()).size() == 1);
  recv.reset();
  CHECK(shmNamesOf(getpid()).empty());
}

TEST_CASE("shm: cleanUpAfter removes what a dead receiver left, never a live one's", "[shm]") {
  const pid_t parent = getpid();
  // The child sets up a receiver and reports, then waits for word to die without closing.
  Child child([parent](int in, int out) {
    ConnSpec spec = specFor(1, 0, parent, 4, 4096);
    std::unique_ptr<Connector> recv;
    ConnBlob blob;
    if (shmTransport().setupRecv(spec, &blob, &recv) != ncclSuccess) return 10;
    if (!writeAll(out, &blob, sizeof(blob))) return 11;
    char go;
    if (!readAll(in, &go, 1)) return 12;
    kill(getpid(), SIGKILL);
    return 13;
  });
  ConnBlob blob;
  REQUIRE(readAll(child.in, &blob, sizeof(blob)));
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
  std::unique_ptr<Connector> send;
  CHECK(shmTransport().connectSend(specFor(0, 1, child.pid, 4, 4096), blob, &send) ==
        ncclRemoteError);
}
