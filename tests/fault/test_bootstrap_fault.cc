// The bootstrap under attack and failure: strangers, garbage, silence, dead ranks and roots.
// Every failure must be an error within a bounded time, never a hang or a crash.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using ringcc::test::CapturedLog;
using ringcc::test::newUniqueId;
using ringcc::test::runProcessesStatus;
using ringcc::test::ScopedEnv;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Loopback only, no NCCL_COMM_ID, and a short timeout for every test here.
struct FaultEnv {
  ScopedEnv ifname{"NCCL_SOCKET_IFNAME", "lo"};
  ScopedEnv commId{"NCCL_COMM_ID", std::nullopt};
  ScopedEnv timeout;
  explicit FaultEnv(const char* ms = "500") : timeout("NCCL_BOOTSTRAP_TIMEOUT", ms) {}
};

// Creates n Bootstraps from threads; results[r] is each create's return code.
std::vector<std::unique_ptr<Bootstrap>> createAll(const ncclUniqueId& id, int n,
                                                  std::vector<ncclResult_t>* results) {
  std::vector<std::unique_ptr<Bootstrap>> bs(n);
  results->assign(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { (*results)[r] = Bootstrap::create(id, r, n, nullptr, &bs[r]); });
  for (std::thread& t : threads) t.join();
  return bs;
}

// Runs fn(rank) for every rank on its own thread and returns the codes.
template <typename Fn>
std::vector<ncclResult_t> onAll(int n, Fn fn) {
  std::vector<ncclResult_t> rc(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { rc[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return rc;
}

// Allgather of the rank numbers plus a ring of tagged messages; ncclSuccess only if exact.
ncclResult_t smallWorkout(Bootstrap& b) {
  const int r = b.rank(), n = b.nranks();
  std::vector<int> v(n, -1);
  v[r] = r * 3 + 1;
  RINGCC_CHECK(b.allGather(v.data(), sizeof(int)));
  for (int p = 0; p < n; ++p)
    if (v[p] != p * 3 + 1) return ncclInternalError;
  int out = 100 + r, in = -1;
  RINGCC_CHECK(b.send((r + 1) % n, 3, &out, sizeof(out)));
  RINGCC_CHECK(b.recv((r + n - 1) % n, 3, &in, sizeof(in)));
  if (in != 100 + (r + n - 1) % n) return ncclInternalError;
  return b.barrier();
}

Socket rawConnect(const SocketAddress& where) {
  Socket s;
  REQUIRE(Socket::connect(where, "raw", WaitLimit(2000), &s) == ncclSuccess);
  return s;
}

void rawSend(Socket& s, const void* data, size_t size) {
  REQUIRE(s.sendAll(data, size, WaitLimit(2000)) == ncclSuccess);
}

// A fresh unique id (its root runs in this process) and the fields it carries.
BootstrapId freshId(ncclUniqueId* id) {
  REQUIRE(bootstrapGetUniqueId(id) == ncclSuccess);
  BootstrapId f;
  REQUIRE(bootstrapParseId(*id, &f) == ncclSuccess);
  return f;
}

// A socket that listens but never accepts or answers.
SocketAddress silentRoot(Socket* holder) {
  REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), holder) == ncclSuccess);
  return holder->localAddress();
}

}  // namespace

TEST_CASE("strangers at the root are dropped and the real ranks complete", "[bootstrap_fault]") {
  FaultEnv env("3000");
  CapturedLog log;
  ncclUniqueId id;
  const BootstrapId f = freshId(&id);

  Socket garbage = rawConnect(f.root);
  std::vector<char> junk(48, '\xab');
  rawSend(garbage, junk.data(), junk.size());
  Socket silent = rawConnect(f.root);  // says nothing; must not hold up the others
  Socket half = rawConnect(f.root);    // the right magic, then nothing more
  rawSend(half, &f.magic, sizeof(f.magic));

  std::vector<ncclResult_t> rc;
  auto t0 = Clock::now();
  auto bs = createAll(id, 4, &rc);
  CHECK(secondsSince(t0) < 2.5);  // did not wait for the silent ones to be dropped (3 s)
  for (int r = 0; r < 4; ++r) REQUIRE(rc[r] == ncclSuccess);
  for (ncclResult_t r : onAll(4, [&](int r) { return smallWorkout(*bs[r]); }))
    CHECK(r == ncclSuccess);
  CHECK(log.contains("sent a wrong magic"));
}

TEST_CASE("strangers at a rank's listener are dropped; the ranks keep working",
          "[bootstrap_fault]") {
  FaultEnv env("1000");
  CapturedLog log;
  ncclUniqueId id;
  const BootstrapId f = freshId(&id);
  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 4, &rc);
  for (int r = 0; r < 4; ++r) REQUIRE(rc[r] == ncclSuccess);
  const SocketAddress target = bs[1]->listenAddress(1);

  Socket garbage = rawConnect(target);
  std::vector<char> junk(32, '\x5a');
  rawSend(garbage, junk.data(), junk.size());

  Socket oversized = rawConnect(target);
  wire::PeerHeader big{f.magic, wire::kMessage, 0, 1, 3, uint64_t{1} << 40};
  rawSend(oversized, &big, sizeof(big));

  Socket badRank = rawConnect(target);
  wire::PeerHeader stranger{f.magic, wire::kMessage, 17, 1, 3, 4};
  rawSend(badRank, &stranger, sizeof(stranger));

  Socket secondRing = rawConnect(target);  // the ring link from rank 0 already exists
  wire::PeerHeader ring{f.magic, wire::kRingHello, 0, 1, 0, 0};
  rawSend(secondRing, &ring, sizeof(ring));

  Socket silent = rawConnect(target);

  // Each refused connection is closed by the rank: the reader sees the end.
  for (Socket* s : {&garbage, &oversized, &badRank, &secondRing}) {
    char c;
    CHECK(s->recvAll(&c, 1, WaitLimit(2000)) == ncclRemoteError);
  }
  for (ncclResult_t r : onAll(4, [&](int r) { return smallWorkout(*bs[r]); }))
    CHECK(r == ncclSuccess);
  CHECK(log.contains("sent a wrong magic"));
  CHECK(log.contains("announced an oversized message"));
  CHECK(log.contains("claims to be rank 17"));
  CHECK(log.contains("unexpected ring link from rank 0"));
}

// Well-formed wire messages, right in every field but the secret (the magic): a stranger who
// knows the protocol but not the unique id.
TEST_CASE("well-formed messages without the secret are dropped, never delivered",
          "[bootstrap_fault]") {
  FaultEnv env("2000");
  CapturedLog log;
  ncclUniqueId id;
  const BootstrapId f = freshId(&id);
  const uint64_t forgedMagic = f.magic ^ 0x1;

  // At the root: a hello for rank 0 of 2, with a listen address that works.
  Socket decoyListener;
  REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &decoyListener) == ncclSuccess);
  Socket forgedHello = rawConnect(f.root);
  wire::RootHello hello{forgedMagic, wire::kHello, 0, 2, 0, decoyListener.localAddress().toWire()};
  rawSend(forgedHello, &hello, sizeof(hello));
  char c;
  CHECK(forgedHello.recvAll(&c, 1, WaitLimit(2000)) == ncclRemoteError);  // dropped, no reply

  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 2, &rc);  // rank 0 is still free: the forged hello took nothing
  for (int r = 0; r < 2; ++r) REQUIRE(rc[r] == ncclSuccess);

  // At rank 1's listener: a tagged message "from rank 0", then the real one.
  Socket forged = rawConnect(bs[1]->listenAddress(1));
  struct {
    wire::PeerHeader h;
    int value;
  } message{{forgedMagic, wire::kMessage, 0, 1, 3, sizeof(int)}, 666};
  rawSend(forged, &message, sizeof(message));
  CHECK(forged.recvAll(&c, 1, WaitLimit(2000)) == ncclRemoteError);
  int real = 42, got = -1;
  REQUIRE(bs[0]->send(1, 3, &real, sizeof(real)) == ncclSuccess);
  REQUIRE(bs[1]->recv(0, 3, &got, sizeof(got)) == ncclSuccess);
  CHECK(got == 42);
  CHECK(log.contains("bootstrap root: "));  // the root logged the forged hello it dropped
  CHECK(log.contains("sent a wrong magic"));
}

TEST_CASE("NCCL_COMM_ID jobs: a rank with another RINGCC_COMM_SECRET cannot join",
          "[bootstrap_fault]") {
  FaultEnv env("1500");
  CapturedLog log;
  SocketAddress free;
  {
    Socket l;
    REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &l) == ncclSuccess);
    free = l.localAddress();
  }
  // What ncclGetUniqueId makes from NCCL_COMM_ID=free with each rank's secret.
  auto idFor = [&](const char* secret) {
    BootstrapId f;
    f.root = free;
    f.fromCommId = true;
    f.magic = commIdMagic(std::string(secret));
    ncclUniqueId id;
    bootstrapMakeId(f, &id);
    return id;
  };
  const ncclUniqueId good = idFor("job-4711-secret"), other = idFor("guess");
  std::vector<std::unique_ptr<Bootstrap>> bs(3);
  std::vector<ncclResult_t> rc(3, ncclInternalError);
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back(
        [&, r] { rc[r] = Bootstrap::create(r == 2 ? other : good, r, 3, nullptr, &bs[r]); });
  for (std::thread& t : threads) t.join();
  CHECK(secondsSince(t0) < 10);
  for (int r = 0; r < 3; ++r) CHECK(rc[r] != ncclSuccess);  // rank 2 never got in
  CHECK(log.contains("sent a wrong magic"));
}

// The bootstrap timeout of the flood below. ThreadSanitizer (scripts/tsan.sh) slows every
// thread of the test 5-15x, the listener that checks each flooding connection included: 3 s
// was too short there once (CI, 2026-12-01: ring messages of the small workouts timed out).
// The case still shows that the flood does not keep the job from completing.
#if defined(__SANITIZE_THREAD__)
constexpr const char* kFloodTimeoutMs = "20000";
#else
constexpr const char* kFloodTimeoutMs = "3000";
#endif

// Many connections at once, silent or sending junk, at the root while the ranks meet and at a
// rank's listener while they exchange messages: pending connections are bounded (the oldest
// is dropped) and checked first, so the job completes.
TEST_CASE("a flood of connections at the root and a listener: the ranks still complete",
          "[bootstrap_fault]") {
  FaultEnv env(kFloodTimeoutMs);
  CapturedLog log;
  ncclUniqueId id;
  const BootstrapId f = freshId(&id);

  auto flood = [](SocketAddress target, std::atomic<bool>* stop, std::vector<Socket>* held) {
    std::vector<char> junk(24, '\x77');
    for (int i = 0; i < 1200 && !stop->load(); ++i) {
      Socket s;
      if (Socket::connect(target, "flood", WaitLimit(2000), &s) != ncclSuccess) continue;
      if (i % 2) (void)s.sendAll(junk.data(), junk.size(), WaitLimit(100));
      held->push_back(std::move(s));  // silent ones stay open until the test ends
    }
  };

  std::atomic<bool> stop{false};
  std::vector<Socket> heldAtRoot, heldAtRank;
  std::thread atRoot(flood, f.root, &stop, &heldAtRoot);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the flood is under way
  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 4, &rc);
  stop = true;
  atRoot.join();
  for (int r = 0; r < 4; ++r) CHECK(rc[r] == ncclSuccess);
  REQUIRE(rc == std::vector<ncclResult_t>(4, ncclSuccess));

  stop = false;
  std::thread atRank(flood, bs[1]->listenAddress(1), &stop, &heldAtRank);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int round = 0; round < 5; ++round)
    for (ncclResult_t r : onAll(4, [&](int r) { return smallWorkout(*bs[r]); }))
      CHECK(r == ncclSuccess);
  stop = true;
  atRank.join();
  INFO("connections opened: root " << heldAtRoot.size() << ", rank " << heldAtRank.size());
  CHECK(heldAtRoot.size() + heldAtRank.size() > 300);  // it was a flood
  CHECK(log.contains("too many connections"));         // beyond the bound of pending ones
  CHECK(log.contains("sent a wrong magic"));
}

TEST_CASE("a root that never answers is an error within the timeout", "[bootstrap_fault]") {
  FaultEnv env("500");
  Socket holder;
  BootstrapId f;
  f.root = silentRoot(&holder);
  REQUIRE(bootstrapRandom64(&f.magic) == ncclSuccess);
  ncclUniqueId id;
  bootstrapMakeId(f, &id);
  std::unique_ptr<Bootstrap> b;
  auto t0 = Clock::now();
  CHECK(Bootstrap::create(id, 0, 2, nullptr, &b) == ncclRemoteError);
  double s = secondsSince(t0);
  CHECK(s >= 0.45);
  CHECK(s < 3.0);
  CHECK(b == nullptr);
}

TEST_CASE("a dead root address is an error within the timeout", "[bootstrap_fault]") {
  FaultEnv env("500");
  BootstrapId f;
  {
    Socket gone;
    f.root = silentRoot(&gone);
  }
  f.magic = 42;
  ncclUniqueId id;
  bootstrapMakeId(f, &id);
  std::unique_ptr<Bootstrap> b;
  auto t0 = Clock::now();
  CHECK(Bootstrap::create(id, 1, 2, nullptr, &b) == ncclRemoteError);
  double s = secondsSince(t0);
  CHECK(s >= 0.45);
  CHECK(s < 3.0);
}

TEST_CASE("a rank that never comes: the others fail within the timeout", "[bootstrap_fault]") {
  FaultEnv env("500");
  CapturedLog log;
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  auto t0 = Clock::now();
  std::vector<ncclResult_t> rc = onAll(2, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::create(id, r, 3, nullptr, &b);  // rank 2 of 3 never shows up
  });
  CHECK(rc[0] == ncclRemoteError);
  CHECK(rc[1] == ncclRemoteError);
  CHECK(secondsSince(t0) < 3.0);
}

TEST_CASE("the root refuses inconsistent ranks and keeps the rendezvous", "[bootstrap_fault]") {
  FaultEnv env("2000");
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  std::unique_ptr<Bootstrap> b0, b1;
  ncclResult_t rc0 = ncclInternalError;
  std::thread first([&] { rc0 = Bootstrap::create(id, 0, 2, nullptr, &b0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 is registered
  std::unique_ptr<Bootstrap> bad;
  CHECK(Bootstrap::create(id, 1, 3, nullptr, &bad) == ncclInvalidUsage);  // nranks differs
  CHECK(Bootstrap::create(id, 0, 2, nullptr, &bad) == ncclInvalidUsage);  // rank 0 again
  CHECK(Bootstrap::create(id, 2, 2, nullptr, &bad) == ncclInvalidArgument);
  CHECK(Bootstrap::create(id, 1, 2, nullptr, &b1) == ncclSuccess);
  first.join();
  REQUIRE(rc0 == ncclSuccess);
  std::vector<Bootstrap*> bs = {b0.get(), b1.get()};
  for (ncclResult_t r : onAll(2, [&](int r) { return smallWorkout(*bs[r]); }))
    CHECK(r == ncclSuccess);
}

TEST_CASE("a rank that dies before the allgather: the others fail in bounded time",
          "[bootstrap_fault]") {
  FaultEnv env("1000");
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 4, &rc);
  for (int r = 0; r < 4; ++r) REQUIRE(rc[r] == ncclSuccess);
  bs[2].reset();  // rank 2 is gone: its sockets close
  auto t0 = Clock::now();
  std::vector<ncclResult_t> res = onAll(4, [&](int r) -> ncclResult_t {
    if (r == 2) return ncclSuccess;
    std::vector<char> buf(4 * (1 << 20), static_cast<char>(r));
    return bs[r]->allGather(buf.data(), 1 << 20);
  });
  for (int r : {0, 1, 3}) CHECK(res[r] == ncclRemoteError);
  CHECK(secondsSince(t0) < 3.0);
}

// Its own tag: the only case here whose ranks are processes (scripts/tsan.sh runs the others).
TEST_CASE("a process that dies during the allgather: the others fail in bounded time",
          "[bootstrap_fault_fork]") {
  FaultEnv env("1000");
  // Its root in a helper process and its ranks forked by tests/support/ranks.h: this process
  // runs no thread when it forks them.
  const ncclUniqueId id = newUniqueId();
  const int n = 4, victim = 2;
  // A rank still running after 20 s is killed and fails the checks (status -1).
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int r) -> int {
        std::unique_ptr<Bootstrap> b;
        if (Bootstrap::create(id, r, n, nullptr, &b) != ncclSuccess) return 3;
        std::vector<char> buf(n * (4 << 20), static_cast<char>(r));
        if (r == victim) {
          // Die in the middle of the allgather, from another thread.
          std::thread killer([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            kill(getpid(), SIGKILL);
          });
          b->allGather(buf.data(), 4 << 20);
          killer.join();
          return 4;  // not reached unless the allgather was faster than the killer
        }
        auto t0 = Clock::now();
        ncclResult_t res = b->allGather(buf.data(), 4 << 20);
        if (res == ncclSuccess) res = b->barrier();
        double s = secondsSince(t0);
        return res == ncclSuccess ? 1 : (s < 3.0 ? 0 : 2);
      },
      20);
  CHECK((WIFSIGNALED(status[victim]) || WEXITSTATUS(status[victim]) == 4));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << " status " << status[r]);
    CHECK(WIFEXITED(status[r]));
    CHECK(WEXITSTATUS(status[r]) == 0);  // it saw an error, in time
  }
}

TEST_CASE("receives: timeout, peer gone, size mismatch, abort", "[bootstrap_fault]") {
  FaultEnv env("500");
  CapturedLog log;
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 2, &rc);
  REQUIRE(rc[0] == ncclSuccess);
  REQUIRE(rc[1] == ncclSuccess);
  int v = 0;

  // Nothing sent: bounded by the timeout.
  auto t0 = Clock::now();
  CHECK(bs[0]->recv(1, 5, &v, sizeof(v)) == ncclRemoteError);
  double s = secondsSince(t0);
  CHECK(s >= 0.45);
  CHECK(s < 3.0);

  // Sizes must agree; the message is consumed.
  int64_t eight = 8;
  REQUIRE(bs[1]->send(0, 6, &eight, sizeof(eight)) == ncclSuccess);
  CHECK(bs[0]->recv(1, 6, &v, sizeof(v)) == ncclInternalError);
  CHECK(log.contains("has 8 bytes, the receiver expects 4"));

  // Bad arguments.
  CHECK(bs[0]->send(2, 0, &v, sizeof(v)) == ncclInvalidArgument);
  CHECK(bs[0]->recv(-1, 0, &v, sizeof(v)) == ncclInvalidArgument);
  CHECK(bs[0]->send(1, 0, nullptr, 4) == ncclInvalidArgument);

  // abort() from another thread ends a long wait at once.
  {
    ScopedEnv longer("NCCL_BOOTSTRAP_TIMEOUT", "30000");
    std::vector<ncclResult_t> rc2;
    ncclUniqueId id2;
    REQUIRE(bootstrapGetUniqueId(&id2) == ncclSuccess);
    auto pair = createAll(id2, 2, &rc2);
    REQUIRE(rc2[0] == ncclSuccess);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      pair[0]->abort();
    });
    t0 = Clock::now();
    CHECK(pair[0]->recv(1, 1, &v, sizeof(v)) == ncclRemoteError);
    CHECK(secondsSince(t0) < 2.0);
    aborter.join();
    // Everything after an abort is refused at once.
    CHECK(pair[0]->allGather(&v, 0) == ncclRemoteError);
    CHECK(pair[0]->barrier() == ncclRemoteError);
    CHECK(pair[0]->send(1, 0, &v, sizeof(v)) == ncclRemoteError);
    CHECK(pair[0]->recv(1, 0, &v, sizeof(v)) == ncclRemoteError);
  }

  // The peer's messages arrive, then it goes: what was sent is still received, the rest
  // fails at once instead of waiting for the timeout.
  {
    ScopedEnv longer("NCCL_BOOTSTRAP_TIMEOUT", "30000");
    std::vector<ncclResult_t> rc3;
    ncclUniqueId id3;
    REQUIRE(bootstrapGetUniqueId(&id3) == ncclSuccess);
    auto pair = createAll(id3, 2, &rc3);
    REQUIRE(rc3[1] == ncclSuccess);
    int one = 1;
    REQUIRE(pair[1]->send(0, 1, &one, sizeof(one)) == ncclSuccess);
    pair[1].reset();
    t0 = Clock::now();
    CHECK(pair[0]->recv(1, 1, &v, sizeof(v)) == ncclSuccess);
    CHECK(v == 1);
    CHECK(pair[0]->recv(1, 2, &v, sizeof(v)) == ncclRemoteError);
    CHECK(secondsSince(t0) < 2.0);
  }
}

TEST_CASE("an external abort flag ends create and waits", "[bootstrap_fault]") {
  FaultEnv env("30000");
  Socket holder;
  BootstrapId f;
  f.root = silentRoot(&holder);
  f.magic = 7;
  ncclUniqueId id;
  bootstrapMakeId(f, &id);
  std::atomic<bool> abortFlag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abortFlag = true;
  });
  std::unique_ptr<Bootstrap> b;
  auto t0 = Clock::now();
  CHECK(Bootstrap::create(id, 0, 2, &abortFlag, &b) == ncclRemoteError);
  CHECK(secondsSince(t0) < 2.0);
  setter.join();
}

TEST_CASE("ranks that disagree on an allgather see an error, not garbage", "[bootstrap_fault]") {
  FaultEnv env("1000");
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclResult_t> rc;
  auto bs = createAll(id, 2, &rc);
  REQUIRE(rc[0] == ncclSuccess);
  REQUIRE(rc[1] == ncclSuccess);
  std::vector<ncclResult_t> res = onAll(2, [&](int r) {
    std::vector<char> buf(2 * 8);
    return bs[r]->allGather(buf.data(), r == 0 ? 4 : 8);
  });
  CHECK(res[0] == ncclInternalError);
  CHECK(res[1] == ncclInternalError);
}
