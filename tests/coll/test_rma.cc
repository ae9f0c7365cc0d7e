// NCCL's one-sided calls on host communicators: windows (ncclCommWindowRegister, collective),
// ncclPutSignal, ncclSignal, ncclWaitSignal, ncclWinGetUserPtr. Exact data at offsets, several
// puts then one wait with opCnt, counts kept per (peer, sigIdx, ctx) and consumed by waits, data
// visible once its signal is, grouped calls driven by one thread, a peer that never signals
// (NCCL_TIMEOUT) and one that has exited. Threads of one process (the direct path), forked
// processes (process_vm_writev), and under RINGCC_NET=ucx the network's path for every peer:
// UCX's RMA and atomics (ucx_rma) where UCX has lanes for them, else bootstrap messages (loopback
// TCP here: messages); RINGCC_RMA_UCX=2 forces UCX (emulated over TCP), 0 forces messages.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/rma/rma_comm.h"
#include "support/ranks.h"
#include "support/test_env.h"
#include "transports/shm/process_watch.h"

using ringcc::RmaPath;
using ringcc::test::CapturedLog;
using ringcc::test::newUniqueId;
using ringcc::test::runProcesses;
using ringcc::test::runThreads;
using ringcc::test::ScopedEnv;

namespace {

constexpr size_t kSlot = 3000;  // floats each peer writes per put (not a multiple of a page)
constexpr int kPuts = 3;        // puts per peer before one wait
constexpr size_t kRoundFloats = size_t{1} << 18;  // 1 MiB: a put the reader could catch half done

bool netForced() {
  const char* a = std::getenv("RINGCC_NET");
  const char* b = std::getenv("NCCL_NET");
  return (a && *a) || (b && *b);
}

// RINGCC_RMA_UCX (or NCCL_RMA_UCX): 0 messages, 2 UCX always, unset or 1 UCX where it offers
// RMA and atomics (either path, by the machine's transports).
int ucxRmaMode() {
  for (const char* name : {"RINGCC_RMA_UCX", "NCCL_RMA_UCX"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 1;
}

float valueOf(int from, int put, size_t i) {
  return static_cast<float>(from * 100000 + put * 10000 + static_cast<int>(i % 9973));
}

struct Failures {
  int rank;
  std::string* why;
  int count = 0;
  void no(const std::string& what) {
    *why += "rank " + std::to_string(rank) + ": " + what + "; ";
    ++count;
  }
};

// Which path this rank's puts to each peer take, as the test expects it.
// Under RINGCC_NET=ucx with RINGCC_RMA_UCX unset, network peers may take either of its paths:
// `others` is kUcx then, and kMessage passes too.
void checkPaths(ncclComm_t comm, int rank, int nranks, RmaPath others, Failures& f) {
  for (int p = 0; p < nranks; ++p) {
    const RmaPath want = p == rank ? RmaPath::kDirect : others;
    const RmaPath got = comm->rma->path(p);
    const bool either = p != rank && others == RmaPath::kUcx && ucxRmaMode() == 1;
    if (got != want && !(either && got == RmaPath::kMessage))
      f.no(std::string("path to ") + std::to_string(p) + " is " + ringcc::rmaPathName(got) +
           ", expected " + ringcc::rmaPathName(want));
  }
}

// One rank's whole scenario over `comm`; the number of failures (0: all held).
int rmaScenario(ncclComm_t comm, int rank, int nranks, RmaPath others, std::string* why) {
  Failures f{rank, why};
  // Window: one slot per (peer, put), plus a guard float at the end that nobody writes.
  const size_t winFloats = static_cast<size_t>(nranks) * kPuts * kSlot + 1;
  std::vector<float> win(winFloats, -1.0f);
  ncclWindow_t w = nullptr;
  if (ncclCommWindowRegister(comm, win.data(), winFloats * sizeof(float), &w, 0) != ncclSuccess)
    return 100;
  void* user = nullptr;
  if (ncclWinGetUserPtr(comm, w, &user) != ncclSuccess || user != win.data())
    f.no("ncclWinGetUserPtr is not the registered buffer");
  checkPaths(comm, rank, nranks, others, f);

  // 1. Several puts to every peer (itself included) at exact offsets, then one wait per peer
  //    with opCnt kPuts.
  std::vector<std::vector<float>> src(kPuts, std::vector<float>(kSlot));
  for (int k = 0; k < kPuts; ++k)
    for (size_t i = 0; i < kSlot; ++i) src[k][i] = valueOf(rank, k, i);
  for (int p = 0; p < nranks; ++p)
    for (int k = 0; k < kPuts; ++k) {
      const size_t offset = (static_cast<size_t>(rank) * kPuts + k) * kSlot * sizeof(float);
      if (ncclPutSignal(src[k].data(), kSlot, ncclFloat, p, w, offset, 0, 0, 0, comm, nullptr) !=
          ncclSuccess)
        return f.count + 101;
    }
  std::vector<ncclWaitSignalDesc_t> all;
  for (int p = 0; p < nranks; ++p) all.push_back({kPuts, p, 0, 0});
  if (ncclWaitSignal(nranks, all.data(), comm, nullptr) != ncclSuccess) return f.count + 102;
  for (int from = 0; from < nranks; ++from)
    for (int k = 0; k < kPuts; ++k) {
      const float* got = win.data() + (static_cast<size_t>(from) * kPuts + k) * kSlot;
      size_t bad = 0;
      for (size_t i = 0; i < kSlot; ++i) bad += got[i] == valueOf(from, k, i) ? 0 : 1;
      if (bad) f.no(std::to_string(bad) + " wrong floats from rank " + std::to_string(from));
    }
  if (win.back() != -1.0f) f.no("the guard float past every slot was written");

  // 2. Signals without data, kept apart per (peer, sigIdx): every rank signals its right
  //    neighbour twice on sigIdx 1 and once on sigIdx 2, its left neighbour once on sigIdx 1.
  const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  for (int s : {1, 1, 2})
    if (ncclSignal(right, s, 0, 0, comm, nullptr) != ncclSuccess) return f.count + 103;
  if (ncclSignal(left, 1, 0, 0, comm, nullptr) != ncclSuccess) return f.count + 104;
  // From the left: 2 on sigIdx 1, 1 on sigIdx 2; from the right: 1 on sigIdx 1 (with
  // nranks 2, left == right: the same counter, named twice, sums to 3).
  std::vector<ncclWaitSignalDesc_t> descs = {{1, left, 2, 0}, {2, left, 1, 0}, {1, right, 1, 0}};
  if (ncclWaitSignal(3, descs.data(), comm, nullptr) != ncclSuccess) return f.count + 105;
  // Those were consumed: one more signal is one more wait of opCnt 1.
  if (ncclSignal(right, 1, 0, 0, comm, nullptr) != ncclSuccess) return f.count + 106;
  ncclWaitSignalDesc_t one = {1, left, 1, 0};
  if (ncclWaitSignal(1, &one, comm, nullptr) != ncclSuccess) return f.count + 107;

  // 3. Data visible once the signal is: rank 0 and rank 1 play ping-pong with 1 MiB puts into
  //    each other's second window; each round's every float is checked after the wait.
  if (nranks >= 2) {
    std::vector<float> big(kRoundFloats, 0.0f), out(kRoundFloats);
    ncclWindow_t bw = nullptr;
    if (ncclCommWindowRegister(comm, big.data(), big.size() * sizeof(float), &bw,
                               NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
      return f.count + 108;
    if (rank < 2) {
      const int peer = 1 - rank;
      for (int round = 0; round < 6; ++round) {
        const bool sends = (round % 2) == rank;
        if (sends) {
          for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(round * 7 + i % 5);
          if (ncclPutSignal(out.data(), out.size(), ncclFloat, peer, bw, 0, 3, 0, 0, comm,
                            nullptr) != ncclSuccess)
            return f.count + 109;
        } else {
          ncclWaitSignalDesc_t d = {1, peer, 3, 0};
          if (ncclWaitSignal(1, &d, comm, nullptr) != ncclSuccess) return f.count + 110;
          size_t bad = 0;
          for (size_t i = 0; i < big.size(); ++i)
            bad += big[i] == static_cast<float>(round * 7 + i % 5) ? 0 : 1;
          if (bad) f.no("round " + std::to_string(round) + ": " + std::to_string(bad) + " stale");
        }
      }
    }
    if (ncclCommWindowDeregister(comm, bw) != ncclSuccess) return f.count + 111;
  }
  // The first window stays registered: ncclCommDestroy frees it.
  return f.count;
}

RmaPath networkPath() { return ucxRmaMode() == 0 ? RmaPath::kMessage : RmaPath::kUcx; }
RmaPath threadPath() { return netForced() ? networkPath() : RmaPath::kDirect; }
RmaPath processPath() { return netForced() ? networkPath() : RmaPath::kKernel; }

}  // namespace

TEST_CASE("puts and signals between threads: exact data, counts per peer and sigIdx", "[rma]") {
  for (int n : {2, 3}) {
    std::vector<ncclComm_t> comms(n);
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
    std::vector<int> bad(n, 0);
    std::vector<std::string> why(n);
    runThreads(n, [&](int r) { bad[r] = rmaScenario(comms[r], r, n, threadPath(), &why[r]); });
    for (int r = 0; r < n; ++r) {
      INFO("nranks " << n << ": " << why[r]);
      CHECK(bad[r] == 0);
    }
    for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
}

TEST_CASE("one thread drives every rank: windows, puts and waits inside groups", "[rma]") {
  const int n = 3;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(64, 0));
  std::vector<ncclWindow_t> wins(n, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(ncclCommWindowRegister(comms[r], bufs[r].data(), 64 * sizeof(int32_t), &wins[r], 0) ==
            ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(wins[r] != nullptr);
  // Sources stay untouched until ncclGroupEnd: the grouped puts read them then.
  std::vector<std::vector<int32_t>> srcs(n, std::vector<int32_t>(16));
  for (int round = 0; round < 3; ++round) {
    // Rank 0 waits before it puts, the others put first: run one call at a time on this
    // thread, rank 0's wait would never end. Grouped calls run at ncclGroupEnd, each
    // communicator's in call order, the communicators concurrently.
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < n; ++r) {
      ncclWaitSignalDesc_t d = {1, (r + n - 1) % n, 0, 0};
      for (int i = 0; i < 16; ++i) srcs[r][i] = round * 1000 + r * 100 + i;
      auto put = [&] {
        return ncclPutSignal(srcs[r].data(), 16, ncclInt32, (r + 1) % n, wins[r],
                             16 * sizeof(int32_t), 0, 0, 0, comms[r], nullptr);
      };
      if (r == 0) REQUIRE(ncclWaitSignal(1, &d, comms[r], nullptr) == ncclSuccess);
      REQUIRE(put() == ncclSuccess);
      if (r != 0) REQUIRE(ncclWaitSignal(1, &d, comms[r], nullptr) == ncclSuccess);
    }
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    for (int r = 0; r < n; ++r) {
      const int from = (r + n - 1) % n;
      for (int i = 0; i < 16; ++i) CHECK(bufs[r][16 + i] == round * 1000 + from * 100 + i);
      CHECK(bufs[r][15] == 0);
      CHECK(bufs[r][32] == 0);
    }
  }
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(ncclCommWindowDeregister(comms[r], wins[r]) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("signals are counted per ctx with config numRmaCtx 2", "[rma]") {
  const int n = 2;
  ncclUniqueId id = newUniqueId();
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<int> bad(n, 0);
  runThreads(n, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.numRmaCtx = 2;
    if (ncclCommInitRankConfig(&comms[r], n, id, r, &config) != ncclSuccess) {
      bad[r] = 100;
      return;
    }
    int32_t buf[8] = {};
    ncclWindow_t w = nullptr;
    if (ncclCommWindowRegister(comms[r], buf, sizeof(buf), &w, 0) != ncclSuccess) {
      bad[r] = 101;
      return;
    }
    const int peer = 1 - r;
    // Two on ctx 1, one on ctx 0, same sigIdx: the counts do not mix.
    const int32_t v = 7 + r;
    bad[r] +=
        ncclPutSignal(&v, 1, ncclInt32, peer, w, 4, 0, 1, 0, comms[r], nullptr) != ncclSuccess;
    bad[r] += ncclSignal(peer, 0, 1, 0, comms[r], nullptr) != ncclSuccess;
    bad[r] += ncclSignal(peer, 0, 0, 0, comms[r], nullptr) != ncclSuccess;
    ncclWaitSignalDesc_t d[2] = {{2, peer, 0, 1}, {1, peer, 0, 0}};
    bad[r] += ncclWaitSignal(2, d, comms[r], nullptr) != ncclSuccess;
    bad[r] += buf[1] != 7 + peer;
    bad[r] += ncclSignal(peer, 0, 2, 0, comms[r], nullptr) != ncclInvalidArgument;  // ctx 2
    // Both ranks are done with the other's window before either frees it.
    bad[r] += ncclCommWindowDeregister(comms[r], w) != ncclSuccess;
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(bad[r] == 0);
  }
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("a wait for a signal that never comes ends at NCCL_TIMEOUT, naming peer and signal",
          "[rma]") {
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  std::vector<char> bufs[2] = {std::vector<char>(64), std::vector<char>(64)};
  ScopedEnv timeout("NCCL_TIMEOUT", "700");
  CapturedLog log;
  std::vector<ncclResult_t> res(n, ncclSuccess);
  double waited = 0;
  runThreads(n, [&](int r) {
    ncclWindow_t w = nullptr;
    res[r] = ncclCommWindowRegister(comms[r], bufs[r].data(), 64, &w, 0);
    if (res[r] != ncclSuccess) return;
    if (r == 1) {
      // Signals on sigIdx 1 only: they must not count for sigIdx 2.
      res[r] = ncclSignal(0, 1, 0, 0, comms[r], nullptr);
      return;
    }
    ncclWaitSignalDesc_t d[2] = {{1, 1, 1, 0}, {1, 1, 2, 0}};
    const auto t0 = std::chrono::steady_clock::now();
    res[r] = ncclWaitSignal(2, d, comms[r], nullptr);
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  CHECK(res[1] == ncclSuccess);
  CHECK(res[0] == ncclRemoteError);
  CHECK(waited >= 0.6);
  CHECK(waited < 10.0);
  CHECK(log.contains("timed out after NCCL_TIMEOUT (700 ms)"));
  CHECK(log.contains("signal (sigIdx 2, ctx 0) from peer 1 and got 0 of 1"));
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("a wait ends when the communicator is revoked", "[rma]") {
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  char bufs[2][64];
  std::vector<ncclResult_t> res(n, ncclSuccess);
  runThreads(n, [&](int r) {
    ncclWindow_t w = nullptr;
    res[r] = ncclCommWindowRegister(comms[r], bufs[r], 64, &w, 0);
    if (res[r] != ncclSuccess) return;
    if (r == 0) {
      ncclWaitSignalDesc_t d = {1, 1, 0, 0};
      res[r] = ncclWaitSignal(1, &d, comms[r], nullptr);
    } else {
      // Rank 0 is waiting, or about to (then it is refused): never a hang.
      res[r] = ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT);
    }
  });
  CHECK(res[0] == ncclInvalidUsage);
  CHECK(res[1] == ncclSuccess);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("puts and signals between forked processes; a peer that exits ends the wait",
          "[rma_fork]") {
  const int n = 3;
  ncclUniqueId id = newUniqueId();
  int failed = runProcesses(n, [&](int rank) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
    std::string why;
    const int bad = rmaScenario(comm, rank, n, processPath(), &why);
    if (bad) std::fprintf(stderr, "[rma fork] %s\n", why.c_str());
    if (ncclCommDestroy(comm) != ncclSuccess) return 12;
    return bad ? 1 : 0;
  });
  CHECK(failed == 0);

  // Rank 1 exits without signalling; rank 0's wait ends long before NCCL_TIMEOUT.
  ncclUniqueId id2 = newUniqueId();
  failed = runProcesses(2, [&](int rank) {
    setenv("NCCL_TIMEOUT", "60000", 1);
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 2, id2, rank) != ncclSuccess) return 10;
    char buf[64];
    ncclWindow_t w = nullptr;
    if (ncclCommWindowRegister(comm, buf, sizeof(buf), &w, 0) != ncclSuccess) return 11;
    if (rank == 1) _exit(0);
    ncclWaitSignalDesc_t d = {1, 1, 0, 0};
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclWaitSignal(1, &d, comm, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string err = ncclGetLastError(comm);
    if (r != ncclRemoteError) return 20;
    if (s > 20.0) return 21;
    if (err.find("exited") == std::string::npos || err.find("peer 1") == std::string::npos) {
      std::fprintf(stderr, "[rma fork] unexpected error: %s\n", err.c_str());
      return 22;
    }
    ncclCommAbort(comm);
    return 0;
  });
  CHECK(failed == 0);
  if (!netForced() || ucxRmaMode() != 2) return;  // UCX for certain: forced

  // By UCX: rank 1 exits; once it is gone, rank 0's put to it fails, naming it, long before
  // NCCL_TIMEOUT (UCX reports the endpoint failed, or the put fails on its closed connection).
  ncclUniqueId id3 = newUniqueId();
  failed = runProcesses(2, [&](int rank) {
    setenv("NCCL_TIMEOUT", "60000", 1);
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 2, id3, rank) != ncclSuccess) return 10;
    char buf[64] = {};
    ncclWindow_t w = nullptr;
    if (ncclCommWindowRegister(comm, buf, sizeof(buf), &w, 0) != ncclSuccess) return 11;
    if (rank == 1) _exit(0);
    ringcc::ProcessWatch peer(comm->peers[1].pid);
    for (int i = 0; i < 20000 && peer.alive(); ++i) usleep(1000);
    if (peer.alive()) return 24;
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclPutSignal(buf, 8, ncclChar, 1, w, 0, 0, 0, 0, comm, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string err = ncclGetLastError(comm);
    if (r != ncclRemoteError || s > 20.0 || err.find("rank 1") == std::string::npos) {
      std::fprintf(stderr, "[rma fork] put to the dead peer: %d after %.1f s: %s\n", r, s,
                   err.c_str());
      return 25;
    }
    ncclCommAbort(comm);
    return 0;
  });
  CHECK(failed == 0);

  // By UCX: rank 1 is stopped (SIGSTOP: alive, its proxy too, so nothing acknowledges).
  // Rank 0's put to it ends at NCCL_TIMEOUT, naming it (UCX lets go of the buffer: the endpoint
  // is closed). Then rank 0 kills it.
  ncclUniqueId id4 = newUniqueId();
  std::vector<int> status = ringcc::test::runProcessesStatus(2, [&](int rank) {
    setenv("NCCL_TIMEOUT", "60000", 1);
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 2, id4, rank) != ncclSuccess) return 10;
    char buf[64] = {};
    ncclWindow_t w = nullptr;
    if (ncclCommWindowRegister(comm, buf, sizeof(buf), &w, 0) != ncclSuccess) return 11;
    if (rank == 1) {
      raise(SIGSTOP);
      return 0;  // (killed while stopped)
    }
    const pid_t pid = comm->peers[1].pid;
    setenv("NCCL_TIMEOUT", "1000", 1);  // read by each call
    usleep(100000);  // rank 1 has stopped itself by now (its stop is all that is left)
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclPutSignal(buf, 8, ncclChar, 1, w, 0, 0, 0, 0, comm, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string err = ncclGetLastError(comm);
    kill(pid, SIGKILL);
    if (r != ncclRemoteError || s < 0.9 || s > 10.0 ||
        err.find("within NCCL_TIMEOUT (1000 ms)") == std::string::npos ||
        err.find("rank 1") == std::string::npos) {
      std::fprintf(stderr, "[rma fork] put to the stopped peer: %d after %.1f s: %s\n", r, s,
                   err.c_str());
      return 26;
    }
    ncclCommAbort(comm);
    return 0;
  });
  CHECK(status[0] == 0);
  CHECK(WIFSIGNALED(status[1]));
}
