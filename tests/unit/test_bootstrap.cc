// Bootstrap with real ranks: threads of one process and forked processes, on loopback.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/sub_group.h"
#include "src/bootstrap/unique_id.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using ringcc::test::ScopedEnv;

namespace {

// Catch2 assertions are not thread-safe: rank bodies report "" or what went wrong.
using RankBody = std::function<std::string(int rank)>;

std::vector<std::string> runThreads(int n, const RankBody& body) {
  std::vector<std::string> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { out[r] = body(r); });
  for (std::thread& t : threads) t.join();
  return out;
}

// Runs body in n forked children (exit status = body's result), then afterFork in this
// process, and returns their wait statuses; children still running after limitS seconds are
// killed. Forks only while this process runs no other thread (tests/support/ranks.h says why):
// a root this process serves must start in afterFork.
std::vector<int> runForked(int n, const std::function<int(int)>& body, double limitS,
                           const std::function<void()>& afterFork = {}) {
  // A root that just served its ranks may take a moment to end.
  for (int i = 0; i < 200 && ringcc::test::otherThreads() != ""; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(ringcc::test::otherThreads() == "");
  std::vector<pid_t> pids(n);
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(body(r));
  }
  if (afterFork) afterFork();
  std::vector<int> status(n, -1);
  auto t0 = std::chrono::steady_clock::now();
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (status[r] != -1 || pids[r] <= 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(limitS)) {
      for (int r = 0; r < n; ++r)
        if (status[r] == -1 && pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

#define EXPECT_OK(call)                                                             \
  do {                                                                              \
    ncclResult_t rc_ = (call);                                                      \
    if (rc_ != ncclSuccess) return std::string(#call " -> ") + std::to_string(rc_); \
  } while (0)
#define EXPECT_THAT(cond)                              \
  do {                                                 \
    if (!(cond)) return std::string("failed: " #cond); \
  } while (0)

struct Msg {
  int32_t from, to, tag, serial;
};

// Everything a Bootstrap offers, with exact content checks.
std::string workout(Bootstrap& b) {
  const int r = b.rank(), n = b.nranks();

  std::vector<uint32_t> slots(3 * n, 0xdeadbeef);
  slots[3 * r] = r;
  slots[3 * r + 1] = r * r + 7;
  slots[3 * r + 2] = 0xabc00000u + r;
  EXPECT_OK(b.allGather(slots.data(), 3 * sizeof(uint32_t)));
  for (int p = 0; p < n; ++p) {
    EXPECT_THAT(slots[3 * p] == static_cast<uint32_t>(p));
    EXPECT_THAT(slots[3 * p + 1] == static_cast<uint32_t>(p * p + 7));
    EXPECT_THAT(slots[3 * p + 2] == 0xabc00000u + p);
  }

  // A block per rank larger than a socket buffer.
  const size_t big = 96 << 10;
  std::vector<uint8_t> blocks(big * n, 0);
  for (size_t k = 0; k < big; ++k) blocks[r * big + k] = static_cast<uint8_t>(r * 31 + k * 7);
  EXPECT_OK(b.allGather(blocks.data(), big));
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < big; k += 997)
      EXPECT_THAT(blocks[p * big + k] == static_cast<uint8_t>(p * 31 + k * 7));

  EXPECT_OK(b.barrier());

  // To every rank (itself included): tag 7 twice, tag 9, an empty tag 11.
  for (int p = 0; p < n; ++p) {
    Msg a{r, p, 7, 1}, c{r, p, 7, 2};
    std::vector<int32_t> nine(5 + p);
    for (size_t k = 0; k < nine.size(); ++k) nine[k] = r * 1000 + p * 10 + static_cast<int>(k);
    EXPECT_OK(b.send(p, 7, &a, sizeof(a)));
    EXPECT_OK(b.send(p, 7, &c, sizeof(c)));
    EXPECT_OK(b.send(p, 9, nine.data(), nine.size() * sizeof(int32_t)));
    EXPECT_OK(b.send(p, 11, nullptr, 0));
  }
  // Received in another tag order than sent, from peers in another order.
  for (int i = 0; i < n; ++i) {
    const int p = (r + n - i) % n;
    std::vector<int32_t> nine(5 + r, -1);
    EXPECT_OK(b.recv(p, 9, nine.data(), nine.size() * sizeof(int32_t)));
    for (size_t k = 0; k < nine.size(); ++k)
      EXPECT_THAT(nine[k] == p * 1000 + r * 10 + static_cast<int>(k));
    EXPECT_OK(b.recv(p, 11, nullptr, 0));
    Msg m{};
    EXPECT_OK(b.recv(p, 7, &m, sizeof(m)));
    EXPECT_THAT(m.from == p && m.to == r && m.tag == 7 && m.serial == 1);
    EXPECT_OK(b.recv(p, 7, &m, sizeof(m)));
    EXPECT_THAT(m.from == p && m.to == r && m.tag == 7 && m.serial == 2);
  }
  EXPECT_OK(b.barrier());
  return "";
}

std::string createAndWorkout(const ncclUniqueId& id, int r, int n) {
  std::unique_ptr<Bootstrap> b;
  EXPECT_OK(Bootstrap::create(id, r, n, nullptr, &b));
  EXPECT_THAT(b->rank() == r && b->nranks() == n);
  return workout(*b);
}

void checkAll(const std::vector<std::string>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r);
    CHECK(results[r] == "");
  }
}

bool waitForRoots(size_t target, double limitS) {
  auto t0 = std::chrono::steady_clock::now();
  while (runningRoots() > target) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(limitS)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

TEST_CASE("bootstrap with 1, 2, 4 and 8 ranks as threads", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  for (int n : {1, 2, 4, 8}) {
    INFO("nranks " << n);
    const size_t before = runningRoots();
    ncclUniqueId id;
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
    checkAll(runThreads(n, [&](int r) { return createAndWorkout(id, r, n); }));
    // The root served its rendezvous and ended.
    CHECK(waitForRoots(before, 2.0));
  }
}

TEST_CASE("bootstrap on the default interface", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", std::nullopt);
  ScopedEnv f("NCCL_SOCKET_FAMILY", std::nullopt);
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  ncclUniqueId id;
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  checkAll(runThreads(3, [&](int r) { return createAndWorkout(id, r, 3); }));
}

TEST_CASE("bootstrap over IPv6 loopback", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "=lo");
  ScopedEnv f("NCCL_SOCKET_FAMILY", "AF_INET6");
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  bool haveV6Loopback = false;
  for (const NetInterface& nif : listInterfaces())
    haveV6Loopback |= nif.address.family() == AF_INET6 && nif.address.isLoopback();
  ncclUniqueId id;
  if (!haveV6Loopback) {
    // Without ::1 the choice must fail cleanly rather than fall back to another family.
    CHECK(bootstrapGetUniqueId(&id) == ncclInvalidArgument);
    return;
  }
  REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  BootstrapId fields;
  REQUIRE(bootstrapParseId(id, &fields) == ncclSuccess);
  CHECK(fields.root.family() == AF_INET6);
  checkAll(runThreads(3, [&](int r) -> std::string {
    std::unique_ptr<Bootstrap> b;
    EXPECT_OK(Bootstrap::create(id, r, 3, nullptr, &b));
    EXPECT_THAT(b->listenAddress(r).family() == AF_INET6);
    return workout(*b);
  }));
}

TEST_CASE("two rendezvous at once in one process", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  ncclUniqueId a, b;
  REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
  REQUIRE(bootstrapGetUniqueId(&b) == ncclSuccess);
  checkAll(runThreads(8, [&](int t) { return createAndWorkout(t % 2 ? b : a, t / 2, 4); }));
}

TEST_CASE("NCCL_COMM_ID: every rank makes its id, rank 0 starts the root", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  SocketAddress free;
  {
    Socket l;
    REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &l) == ncclSuccess);
    free = l.localAddress();
  }
  ScopedEnv c("NCCL_COMM_ID", free.toString());
  // Twice on the same port: the second root binds it again after the first one ends.
  for (int round = 0; round < 2; ++round) {
    checkAll(runThreads(4, [&](int r) -> std::string {
      ncclUniqueId id;
      EXPECT_OK(bootstrapGetUniqueId(&id));
      return createAndWorkout(id, r, 4);
    }));
  }
}

TEST_CASE("roots end when nobody comes", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  ScopedEnv t("NCCL_BOOTSTRAP_TIMEOUT", "50");
  REQUIRE(waitForRoots(0, 5.0));
  ncclUniqueId id;
  for (int k = 0; k < 3; ++k) REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  CHECK(runningRoots() == 3);
  CHECK(waitForRoots(0, 3.0));  // 10 x 50 ms
}

TEST_CASE("sub-groups from (color, key) and from explicit member lists", "[bootstrap]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv c("NCCL_COMM_ID", "127.0.0.1:1");  // sub-groups must not use it
  CHECK(splitMembers({0, 1, 0, 1, 0}, {5, 0, 5, 0, 1}, 2) == std::vector<int>{4, 0, 2});
  CHECK(splitMembers({0, 1, 0, 1, 0}, {5, 0, 5, 0, 1}, 3) == std::vector<int>{1, 3});
  CHECK(splitMembers({0, NCCL_SPLIT_NOCOLOR}, {0, 0}, 1).empty());

  ncclUniqueId id;
  {
    ScopedEnv noCommId("NCCL_COMM_ID", std::nullopt);
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
  }
  const int n = 8;
  checkAll(runThreads(n, [&](int r) -> std::string {
    std::unique_ptr<Bootstrap> parent;
    EXPECT_OK(Bootstrap::create(id, r, n, nullptr, &parent));
    // Evens and odds, in reverse rank order; rank 7 stays out.
    const int color = r == 7 ? NCCL_SPLIT_NOCOLOR : r % 2;
    std::unique_ptr<Bootstrap> sub;
    EXPECT_OK(bootstrapSplit(*parent, color, -r, nullptr, &sub));
    if (r == 7) {
      EXPECT_THAT(sub == nullptr);
    } else {
      const std::vector<int> expect =
          r % 2 ? std::vector<int>{5, 3, 1} : std::vector<int>{6, 4, 2, 0};
      EXPECT_THAT(sub != nullptr);
      EXPECT_THAT(sub->nranks() == static_cast<int>(expect.size()));
      EXPECT_THAT(expect[sub->rank()] == r);
      std::vector<int> parents(sub->nranks(), -1);
      parents[sub->rank()] = r;
      EXPECT_OK(sub->allGather(parents.data(), sizeof(int)));
      EXPECT_THAT(parents == expect);
      std::string err = workout(*sub);
      if (!err.empty()) return "sub: " + err;
    }
    // Explicit list, only ranks 1 and 4 take part, new order {4, 1}; the parent stays usable.
    if (r == 1 || r == 4) {
      std::unique_ptr<Bootstrap> pair;
      EXPECT_OK(bootstrapSubGroup(*parent, {4, 1}, nullptr, &pair));
      EXPECT_THAT(pair->rank() == (r == 4 ? 0 : 1));
      std::string err = workout(*pair);
      if (!err.empty()) return "pair: " + err;
    }
    // A list without the caller is refused.
    std::unique_ptr<Bootstrap> none;
    EXPECT_THAT(bootstrapSubGroup(*parent, {(r + 1) % n}, nullptr, &none) == ncclInvalidArgument);
    return workout(*parent);
  }));
}

TEST_CASE("bootstrap with 4 forked processes", "[bootstrap_fork]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv c("NCCL_COMM_ID", std::nullopt);
  const size_t before = runningRoots();
  // The root lives in this process, started once the ranks are forked; they read the id from
  // memory shared with them.
  struct SharedId {
    ncclUniqueId id;
    int ready;  // 1: id made, 2: making it failed
  };
  void* mem =
      mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* shared = new (mem) SharedId{};
  ncclResult_t made = ncclInternalError;
  std::vector<int> status = runForked(
      4,
      [&](int r) {
        for (int i = 0; i < 20000 && __atomic_load_n(&shared->ready, __ATOMIC_ACQUIRE) == 0; ++i)
          usleep(1000);
        if (__atomic_load_n(&shared->ready, __ATOMIC_ACQUIRE) != 1) return 2;
        const ncclUniqueId id = shared->id;
        std::string err = createAndWorkout(id, r, 4);
        if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
        return err.empty() ? 0 : 1;
      },
      30.0,
      [&] {
        made = bootstrapGetUniqueId(&shared->id);
        __atomic_store_n(&shared->ready, made == ncclSuccess ? 1 : 2, __ATOMIC_RELEASE);
      });
  munmap(mem, sizeof(SharedId));
  CHECK(made == ncclSuccess);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << " status " << status[r]);
    CHECK(WIFEXITED(status[r]));
    CHECK(WEXITSTATUS(status[r]) == 0);
  }
  CHECK(waitForRoots(before, 2.0));
}

TEST_CASE("NCCL_COMM_ID with 4 forked processes", "[bootstrap_fork]") {
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  SocketAddress free;
  {
    Socket l;
    REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &l) == ncclSuccess);
    free = l.localAddress();
  }
  ScopedEnv c("NCCL_COMM_ID", free.toString());
  std::vector<int> status = runForked(
      4,
      [&](int r) {
        ncclUniqueId id;
        if (bootstrapGetUniqueId(&id) != ncclSuccess) return 2;
        std::string err = createAndWorkout(id, r, 4);
        if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
        return err.empty() ? 0 : 1;
      },
      30.0);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << " status " << status[r]);
    CHECK(WIFEXITED(status[r]));
    CHECK(WEXITSTATUS(status[r]) == 0);
  }
}
