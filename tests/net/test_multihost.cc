// Ranks on several "hosts": network namespaces joined by veth pairs (net/netns_lab.h), each
// with its own NCCL_HOSTID, so ranks of one namespace use shm and ranks of different ones UCX
// (UCX_TLS=tcp over the veths: no shared-memory shortcut). The bootstrap runs over the veth
// addresses (NCCL_SOCKET_IFNAME=rcc). Ranks are forked children of this test; each enters its
// host's namespace before it touches the library, and reports into shared memory.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll_check.h"
#include "fault/fault_util.h"
#include "net/netns_lab.h"
#include "src/rma/rma_comm.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"

using namespace ringcc::test;

namespace {

constexpr int kTimeoutMs = 4000;  // NCCL_TIMEOUT of the fault scenarios

struct NetReport {
  int pid;
  int initResult;
  int cases;     // collectives that ran
  int badCases;  // ... with a wrong result or an error
  int iterations;
  int failResult;
  int64_t failEndNs;
  int64_t eventNs;  // the victim's death
  char firstBad[256];
  char lastError[512];
};

// What every rank shares: the unique id from rank 0, and the reports.
struct Shared {
  ncclUniqueId id;
  int idReady;
  int64_t linkDownNs;       // survive(LinkDown): when the cable was pulled
  char linkDownError[256];  // and what `ip` said ("" when it worked)
};

// The child's environment for `host` of `lab`. Called after fork, before the library.
bool becomeHost(const NetnsLab& lab, int host, int timeoutMs) {
  if (!lab.enter(host)) return false;
  setenv("NCCL_HOSTID", ("netns-host-" + std::to_string(host)).c_str(), 1);
  setenv("NCCL_SOCKET_IFNAME", "rcc", 1);  // a prefix: each host has its rcc<i>
  setenv("UCX_NET_DEVICES", lab.ifName(host).c_str(), 1);
  setenv("UCX_TLS", "tcp", 1);
  setenv("NCCL_TIMEOUT", std::to_string(timeoutMs).c_str(), 1);
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("RINGCC_BUFFSIZE");
  unsetenv("RINGCC_NET");
  unsetenv("NCCL_NET");
  return true;
}

// Rank 0 makes the id (its root listens on its veth address); the others wait for it.
ncclResult_t initRank(Shared* sh, int rank, int n, ncclComm_t* comm) {
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&sh->id);
    if (r != ncclSuccess) return r;
    __atomic_store_n(&sh->idReady, 1, __ATOMIC_RELEASE);
  } else {
    for (int i = 0; i < 20000 && !__atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE); ++i)
      usleep(1000);
    if (!__atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE)) return ncclSystemError;
  }
  return ncclCommInitRank(comm, n, sh->id, rank);
}

void note(char* dst, size_t cap, const std::string& text) {
  if (dst[0] == '\0') std::snprintf(dst, cap, "%s", text.c_str());
}

// Every collective, several datatypes, ops and counts (within a slot, several slots, with a
// remainder), on one and two channels; then a ring of sends and receives.
int runEveryCollective(ncclComm_t comm, int rank, int n, NetReport* rep) {
  int k = 0;
  for (int nch : {1, 2}) {
    setenv("NCCL_MIN_NCHANNELS", std::to_string(nch).c_str(), 1);
    setenv("NCCL_MAX_NCHANNELS", std::to_string(nch).c_str(), 1);
    for (Coll coll : kAllColls)
      for (size_t count : {size_t{1}, size_t{4099}, size_t{300001}}) {
        CollCase c;
        c.coll = coll;
        c.type = kAllTypes[(k * 5) % 12];
        c.op = collReduces(coll) ? kReduceOps[k % 7] : Op::Copy;
        c.count = coll == Coll::AlltoAll || coll == Coll::Gather || coll == Coll::Scatter
                      ? count / 4 + 1
                      : count;
        c.root = k % n;
        c.inPlace = k % 2 == 0;
        c.seed = 100 + k;
        ++k;
        CaseData data(c, n);
        CollRank me(data, rank, comm);
        ncclResult_t r = me.issue();
        std::string why = r != ncclSuccess ? std::string("returned ") + ncclGetErrorString(r) +
                                                 ": " + ncclGetLastError(comm)
                                           : me.check();
        rep->cases++;
        if (!why.empty()) {
          rep->badCases++;
          note(rep->firstBad, sizeof(rep->firstBad), c.describe(n) + ": " + why);
          if (r != ncclSuccess) return 1;
        }
      }
  }
  // Send/recv: each rank sends to the next and receives from the previous, in one group.
  const size_t count = 200003;
  std::vector<int32_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(rank * 1000003 + i);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  ncclGroupStart();
  ncclSend(out.data(), count, ncclInt32, next, comm, nullptr);
  ncclRecv(in.data(), count, ncclInt32, prev, comm, nullptr);
  ncclResult_t r = ncclGroupEnd();
  rep->cases++;
  bool ok = r == ncclSuccess;
  for (size_t i = 0; ok && i < count; ++i) ok = in[i] == static_cast<int32_t>(prev * 1000003 + i);
  if (!ok) {
    rep->badCases++;
    note(rep->firstBad, sizeof(rep->firstBad),
         std::string("send/recv ring: ") + (r != ncclSuccess ? ncclGetLastError(comm) : "data"));
  }
  return rep->badCases > 0 ? 1 : 0;
}

// The text of a file ("" if it cannot be read).
std::string readFile(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof(buf), f)) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

// `hostOf[r]`: the host of rank r. With `ring`, every rank's log must show that ring order.
void everyCollectiveOn(const std::vector<int>& hostOf, const std::string& ring = "") {
  const int n = static_cast<int>(hostOf.size());
  int hosts = 0;
  for (int h : hostOf) hosts = std::max(hosts, h + 1);
  NetnsLab lab(hosts);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(1);
  SharedArray<NetReport> reps(static_cast<size_t>(n));
  REQUIRE((sh.ok() && reps.ok()));
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int rank) {
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        rep->pid = getpid();
        if (!becomeHost(lab, hostOf[static_cast<size_t>(rank)], 60000)) return 20;
        const std::string log = "/tmp/ringcc-net-test-" + std::to_string(getpid()) + ".log";
        if (!ring.empty()) {
          setenv("NCCL_DEBUG", "INFO", 1);
          setenv("NCCL_DEBUG_SUBSYS", "GRAPH,INIT", 1);
          setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
        }
        ncclComm_t comm = nullptr;
        rep->initResult = initRank(&sh[0], rank, n, &comm);
        if (rep->initResult != ncclSuccess) {
          note(rep->firstBad, sizeof(rep->firstBad),
               std::string("init: ") + ncclGetLastError(comm));
          return 10;
        }
        if (!ring.empty()) {
          // The ring order, and the network's connection geometry: NCCL's 4 MiB in 8 slots
          // when NCCL_BUFFSIZE is not set, and no LL memory (on every connection).
          // Rank 0 logs every channel's ring ("Channel 00/04 : 0 2 1 3"), every rank its
          // neighbours on it ("Ring 00 : 3 -> 0 -> 2").
          const std::string text = readFile(log);
          unlink(log.c_str());
          std::vector<int> order;
          for (size_t at = 0; at < ring.size();) {
            size_t used = 0;
            order.push_back(std::stoi(ring.substr(at), &used));
            at += used;
          }
          const size_t pos =
              static_cast<size_t>(std::find(order.begin(), order.end(), rank) - order.begin());
          const std::string neighbours =
              "Ring 00 : " + std::to_string(order[(pos + order.size() - 1) % order.size()]) +
              " -> " + std::to_string(rank) + " -> " +
              std::to_string(order[(pos + 1) % order.size()]) + "\n";
          const std::string channel = rank == 0 ? " : " + ring + "\n" : neighbours;
          if (rank == 0 && text.find("Channel 00/") == std::string::npos) {
            note(rep->firstBad, sizeof(rep->firstBad), "the log lacks 'Channel 00/'");
            return 40;
          }
          for (const std::string& want :
               {neighbours, channel, std::string("via ucx (8 x 524288 B, LL 0 B)"),
                std::string("via shm (8 x 524288 B, LL 0 B)")})
            if (text.find(want) == std::string::npos) {
              note(rep->firstBad, sizeof(rep->firstBad), "the log lacks '" + want + "'");
              return 40;
            }
        }
        int rc = runEveryCollective(comm, rank, n, rep);
        if (ncclCommDestroy(comm) != ncclSuccess) rc = 30;
        return rc;
      },
      120);
  std::vector<int> pids;
  for (int r = 0; r < n; ++r) {
    const NetReport& rep = reps[static_cast<size_t>(r)];
    INFO("rank " << r << " on host " << hostOf[static_cast<size_t>(r)] << ": " << rep.firstBad);
    CHECK(status[static_cast<size_t>(r)] == 0);  // exited 0 (-1: hung and killed)
    CHECK(rep.initResult == ncclSuccess);
    CHECK(rep.cases == 2 * 9 * 3 + 1);
    CHECK(rep.badCases == 0);
    pids.push_back(rep.pid);
  }
  CHECK(describeSegments(shmSegmentsOf(pids)) == "nothing");
}

enum class Fault { KillRemoteRank, LinkDown };

// 2 hosts x 2 ranks run exact all-reduces until the fault; every survivor must fail with an
// error naming a peer, within NCCL_TIMEOUT of the fault, and nothing may be left behind.
void survive(Fault fault) {
  const std::vector<int> hostOf = {0, 0, 1, 1};
  const int n = 4, victim = 3;
  NetnsLab lab(2);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(1);
  SharedArray<NetReport> reps(n);
  REQUIRE((sh.ok() && reps.ok()));
  std::snprintf(sh[0].linkDownError, sizeof(sh[0].linkDownError), "not tried");
  // With LinkDown, one more process (index n) pulls the cable once every rank has done a few
  // iterations: a process, not a thread of this one, since this one forks the ranks and must
  // run no thread then (tests/support/ranks.h).
  const int procs = fault == Fault::LinkDown ? n + 1 : n;
  std::vector<int> status = runProcessesStatus(
      procs,
      [&](int rank) {
        if (rank == n) {
          for (int i = 0; i < 30000; ++i) {
            int least = 1 << 30;
            for (int r = 0; r < n; ++r)
              least = std::min(least, __atomic_load_n(&reps[r].iterations, __ATOMIC_ACQUIRE));
            if (least >= 5) {
              __atomic_store_n(&sh[0].linkDownNs, nowNs(), __ATOMIC_RELEASE);
              std::snprintf(sh[0].linkDownError, sizeof(sh[0].linkDownError), "%s",
                            lab.linkDown(1).c_str());
              return 0;
            }
            usleep(1000);
          }
          return 0;
        }
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        rep->pid = getpid();
        if (!becomeHost(lab, hostOf[static_cast<size_t>(rank)], kTimeoutMs)) return 20;
        ncclComm_t comm = nullptr;
        rep->initResult = initRank(&sh[0], rank, n, &comm);
        if (rep->initResult != ncclSuccess) return 10;
        std::vector<float> in(1 << 18), out(in.size());
        for (int iter = 0; iter < 100000; ++iter) {
          if (fault == Fault::KillRemoteRank && rank == victim && iter == 10) {
            rep->eventNs = nowNs();
            raise(SIGKILL);
          }
          fillInput(in, rank, iter);
          ncclResult_t r =
              ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
          if (r != ncclSuccess) {
            rep->failEndNs = nowNs();
            rep->failResult = r;
            std::snprintf(rep->lastError, sizeof(rep->lastError), "%s", ncclGetLastError(comm));
            break;
          }
          if (!isSumOfInputs(out, n, iter)) rep->badCases++;
          __atomic_store_n(&rep->iterations, iter + 1, __ATOMIC_RELEASE);
        }
        ncclCommAbort(comm);
        return rep->failResult != 0 ? 0 : 1;
      },
      60);
  const int64_t eventNs = fault == Fault::LinkDown ? sh[0].linkDownNs : reps[victim].eventNs;
  if (fault == Fault::LinkDown) REQUIRE(std::string(sh[0].linkDownError) == "");
  REQUIRE(eventNs != 0);
  std::vector<int> pids;
  for (int r = 0; r < n; ++r) {
    const NetReport& rep = reps[static_cast<size_t>(r)];
    pids.push_back(rep.pid);
    if (fault == Fault::KillRemoteRank && r == victim) {
      CHECK(WIFSIGNALED(status[r]));
      continue;
    }
    const double ms = msBetween(eventNs, rep.failEndNs);
    INFO("rank " << r << ": " << rep.iterations << " iterations, then "
                 << ncclGetErrorString(static_cast<ncclResult_t>(rep.failResult)) << " after " << ms
                 << " ms: " << rep.lastError);
    CHECK(status[r] == 0);  // failed and returned (-1: hung, killed by the runner)
    CHECK(rep.initResult == ncclSuccess);
    CHECK(rep.iterations >= 5);
    CHECK(rep.badCases == 0);
    CHECK(rep.failResult == ncclRemoteError);
    std::fprintf(stderr, "rank %d: %d iterations, failed after %.0f ms: %s\n", r, rep.iterations,
                 ms, rep.lastError);
    CHECK(std::regex_search(std::string(rep.lastError), std::regex("peer (rank )?[0-9]")));
    CHECK(ms < kTimeoutMs + 2000);  // NCCL_TIMEOUT, plus scheduling slack on 2 cores
  }
  CHECK(describeSegments(shmSegmentsOf(pids)) == "nothing");
}

}  // namespace

TEST_CASE("2 hosts x 2 ranks: shm inside a host, UCX between; every collective exact",
          "[net_hosts]") {
  everyCollectiveOn({0, 0, 1, 1});
}

TEST_CASE("2 hosts, ranks interleaved: rings group them by host; every collective exact",
          "[net_hosts]") {
  everyCollectiveOn({0, 1, 0, 1}, "0 2 1 3");  // two network hops per ring instead of four
}

TEST_CASE("launching from the environment: NCCL_COMM_ID names rank 0's veth address",
          "[net_hosts]") {
  // No id is passed around: every rank calls ncclGetUniqueId with NCCL_COMM_ID set, and rank
  // 0's init starts the root at that address (docs/launching.md).
  const int n = 3;
  NetnsLab lab(n);
  REQUIRE(lab.error() == "");
  SharedArray<NetReport> reps(n);
  REQUIRE(reps.ok());
  const std::string commId = lab.address(0) + ":" + std::to_string(20000 + getpid() % 20000);
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int rank) {
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        if (!becomeHost(lab, rank, 60000)) return 20;
        setenv("NCCL_COMM_ID", commId.c_str(), 1);
        ncclUniqueId id;
        ncclComm_t comm = nullptr;
        rep->initResult = ncclGetUniqueId(&id);
        if (rep->initResult == ncclSuccess) rep->initResult = ncclCommInitRank(&comm, n, id, rank);
        if (rep->initResult != ncclSuccess) {
          note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
          return 10;
        }
        std::vector<float> in(100000), out(in.size());
        for (int iter = 0; iter < 3; ++iter) {
          fillInput(in, rank, iter);
          if (ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm,
                            nullptr) != ncclSuccess ||
              !isSumOfInputs(out, n, iter))
            rep->badCases++;
          rep->iterations++;
        }
        return ncclCommDestroy(comm) == ncclSuccess && rep->badCases == 0 ? 0 : 1;
      },
      60);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << reps[r].firstBad);
    CHECK(status[r] == 0);
    CHECK(reps[r].initResult == ncclSuccess);
    CHECK(reps[r].iterations == 3);
    CHECK(reps[r].badCases == 0);
  }
}

TEST_CASE("4 hosts x 1 rank over UCX: every collective exact", "[net_hosts]") {
  everyCollectiveOn({0, 1, 2, 3});
}

TEST_CASE("a rank on another host is killed: every survivor fails naming a peer, in time",
          "[net_faults]") {
  survive(Fault::KillRemoteRank);
}

TEST_CASE("a veth goes down mid-collective: every rank fails naming a peer, in time",
          "[net_faults]") {
  survive(Fault::LinkDown);
}

TEST_CASE("the namespaces are gone after a lab", "[net_faults]") {
  std::string name;
  {
    NetnsLab lab(1);
    REQUIRE(lab.error() == "");
    CHECK(lab.remaining() != "");
    name = lab.nsName(0);
  }
  std::string list;
  shell("ip netns list", &list);
  CHECK(list.find(name) == std::string::npos);
}

TEST_CASE(
    "elastic across hosts: a remote rank killed, shrunk out, a new process on its host "
    "grown in; every all-reduce exact",
    "[net_elastic]") {
  // Hosts 0 and 1, two ranks each; rank 3 (host 1) dies before iteration 3. The survivors
  // shrink it out, run 2 iterations on 3 ranks, then rank 0 makes a grow id (its root on host
  // 0's veth) and a new process on host 1 (index 4 here) joins as rank 3.
  const std::vector<int> hostOf = {0, 0, 1, 1, 1};
  const int n = 4, victim = 3, killAt = 3, iters = 8;
  NetnsLab lab(2);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(2);  // [0]: the init id; [1]: the grow id
  SharedArray<NetReport> reps(n + 1);
  REQUIRE((sh.ok() && reps.ok()));
  auto waitId = [&](int which) {
    for (int i = 0; i < 60000 && !__atomic_load_n(&sh[which].idReady, __ATOMIC_ACQUIRE); ++i)
      usleep(1000);
    return __atomic_load_n(&sh[which].idReady, __ATOMIC_ACQUIRE) != 0;
  };
  auto allReduce = [](ncclComm_t comm, int rank, int nranks, int iter, NetReport* rep) {
    std::vector<float> in(100000), out(in.size());
    fillInput(in, rank, iter);
    ncclResult_t r =
        ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (r == ncclSuccess && !isSumOfInputs(out, nranks, iter)) rep->badCases++;
    if (r == ncclSuccess) rep->iterations++;
    return r;
  };
  std::vector<int> status = runProcessesStatus(
      n + 1,
      [&](int proc) {
        NetReport* rep = &reps[static_cast<size_t>(proc)];
        rep->pid = getpid();
        if (!becomeHost(lab, hostOf[static_cast<size_t>(proc)], 60000)) return 20;
        setenv("NCCL_BOOTSTRAP_TIMEOUT", "20000", 1);
        ncclComm_t comm = nullptr;
        int iter = 0, rank = proc, nranks = n;
        if (proc == n) {  // the replacement
          if (!waitId(1)) return 21;
          rep->initResult = ncclCommGrow(nullptr, n, &sh[1].id, n - 1, &comm, nullptr);
          if (rep->initResult != ncclSuccess) {
            note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(nullptr));
            return 10;
          }
          iter = killAt + 2;
          rank = n - 1;
        } else {
          rep->initResult = initRank(&sh[0], proc, n, &comm);
          if (rep->initResult != ncclSuccess) return 10;
        }
        bool shrunk = proc == n, grown = proc == n;
        auto become = [&](ncclComm_t next) {  // the old one was aborted or destroyed
          comm = next;
          ncclCommUserRank(comm, &rank);
          ncclCommCount(comm, &nranks);
        };
        while (iter < iters) {
          if (proc == victim && iter == killAt) raise(SIGKILL);
          ncclResult_t r = allReduce(comm, rank, nranks, iter, rep);
          if (r != ncclSuccess) {
            rep->failResult = r;
            if (shrunk) return 11;
            int exclude[] = {victim};
            ncclComm_t small = nullptr;
            if (ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT) !=
                ncclSuccess) {
              note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
              return 12;
            }
            ncclCommAbort(comm);
            become(small);
            shrunk = true;
            continue;
          }
          ++iter;
          if (shrunk && !grown && iter == killAt + 2) {
            ncclUniqueId id{};
            if (rank == 0) {
              if (ncclCommGetUniqueId(comm, &id) != ncclSuccess) return 13;
              sh[1].id = id;
              __atomic_store_n(&sh[1].idReady, 1, __ATOMIC_RELEASE);
            }
            ncclComm_t big = nullptr;
            if (ncclCommGrow(comm, n, rank == 0 ? &id : nullptr, -1, &big, nullptr) !=
                ncclSuccess) {
              note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
              return 14;
            }
            ncclCommDestroy(comm);
            become(big);
            grown = true;
          }
        }
        const bool whole = nranks == n && rank == (proc == n ? n - 1 : proc) && grown;
        return ncclCommDestroy(comm) == ncclSuccess && rep->badCases == 0 && whole ? 0 : 15;
      },
      120);
  std::vector<int> pids;
  for (int p = 0; p <= n; ++p) {
    const NetReport& rep = reps[static_cast<size_t>(p)];
    pids.push_back(rep.pid);
    INFO("process " << p << ": " << rep.iterations << " iterations; " << rep.firstBad);
    if (p == victim) {
      CHECK(WIFSIGNALED(status[p]));
      continue;
    }
    CHECK(status[p] == 0);
    CHECK(rep.initResult == ncclSuccess);
    CHECK(rep.badCases == 0);
    // Survivors: every iteration once (the failed one redone); the replacement: those after
    // the grow.
    CHECK(rep.iterations == (p == n ? iters - killAt - 2 : iters));
    if (p != n) CHECK(rep.failResult == ncclRemoteError);
  }
  CHECK(describeSegments(shmSegmentsOf(pids)) == "nothing");
}

namespace {

// Whether each of comm's peers takes the path docs/rma.md gives it: the same host's
// process_vm_writev, the other host's UCX RMA (byUcx) or its messages. "" if so.
std::string unexpectedPaths(ncclComm_t comm, const std::vector<int>& hostOf, int rank,
                            bool byUcx) {
  std::string bad;
  for (int p = 0; p < static_cast<int>(hostOf.size()); ++p) {
    const ringcc::RmaPath want = p == rank ? ringcc::RmaPath::kDirect
                                 : hostOf[p] == hostOf[rank] ? ringcc::RmaPath::kKernel
                                 : byUcx                     ? ringcc::RmaPath::kUcx
                                                             : ringcc::RmaPath::kMessage;
    const ringcc::RmaPath got = comm->rma->path(p);
    if (got != want)
      bad += "path to " + std::to_string(p) + " is " + ringcc::rmaPathName(got) + ", not " +
             ringcc::rmaPathName(want) + "; ";
  }
  return bad;
}

}  // namespace

TEST_CASE(
    "one-sided across hosts: every rank puts into every peer's window (shm peer and remote "
    "peers), then waits for their signals; every element exact",
    "[net_rma]") {
  // Hosts 0 and 1, two ranks each: a put to the rank on the same host takes the same-host path,
  // one to the other host the network's message path, or UCX's RMA (emulated over TCP) with
  // RINGCC_RMA_UCX=2 (docs/rma.md).
  // RINGCC_RMA_UCX unset: UCX only emulates RMA over TCP, so messages; 2: UCX anyway; 0: messages.
  const std::string mode = GENERATE(std::string(""), std::string("2"), std::string("0"));
  const bool byUcx = mode == "2";
  INFO("RINGCC_RMA_UCX=" << (mode.empty() ? "(unset)" : mode));
  const std::vector<int> hostOf = {0, 0, 1, 1};
  const int n = 4;
  constexpr size_t kSlot = 1200000;  // floats per sender (4.8 MB): two of the message path's chunks
  NetnsLab lab(2);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(1);
  SharedArray<NetReport> reps(n);
  REQUIRE((sh.ok() && reps.ok()));
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int rank) {
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        rep->pid = getpid();
        if (!becomeHost(lab, hostOf[static_cast<size_t>(rank)], 60000)) return 20;
        if (mode.empty())
          unsetenv("RINGCC_RMA_UCX");
        else
          setenv("RINGCC_RMA_UCX", mode.c_str(), 1);
        ncclComm_t comm = nullptr;
        rep->initResult = initRank(&sh[0], rank, n, &comm);
        if (rep->initResult != ncclSuccess) return 10;
        // Slot s of every window is sender s's; ours stays untouched (-1).
        std::vector<float> window(kSlot * n, -1.0f), mine(kSlot);
        for (size_t i = 0; i < kSlot; ++i) mine[i] = static_cast<float>(rank * 1000003 + i % 4099);
        ncclWindow_t win = nullptr;
        if (ncclCommWindowRegister(comm, window.data(), window.size() * sizeof(float), &win, 0) !=
            ncclSuccess) {
          note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
          return 11;
        }
        if (const std::string bad = unexpectedPaths(comm, hostOf, rank, byUcx); !bad.empty()) {
          note(rep->firstBad, sizeof(rep->firstBad), bad);
          return 16;
        }
        for (int peer = 0; peer < n; ++peer) {
          if (peer == rank) continue;
          if (ncclPutSignal(mine.data(), kSlot, ncclFloat32, peer, win,
                            static_cast<size_t>(rank) * kSlot * sizeof(float), 0, 0, 0, comm,
                            nullptr) != ncclSuccess) {
            note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
            return 12;
          }
        }
        std::vector<ncclWaitSignalDesc_t> descs;
        for (int peer = 0; peer < n; ++peer)
          if (peer != rank) descs.push_back(ncclWaitSignalDesc_t{1, peer, 0, 0});
        if (ncclWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr) !=
            ncclSuccess) {
          note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
          return 13;
        }
        for (int s = 0; s < n; ++s)
          for (size_t i = 0; i < kSlot; ++i) {
            const float want = s == rank ? -1.0f : static_cast<float>(s * 1000003 + i % 4099);
            if (window[static_cast<size_t>(s) * kSlot + i] != want) ++rep->badCases;
          }
        // Nobody deregisters (collective) before every rank has read its window.
        if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return 14;
        return ncclCommDestroy(comm) == ncclSuccess && rep->badCases == 0 ? 0 : 15;
      },
      120);
  for (int r = 0; r < n; ++r) {
    const NetReport& rep = reps[static_cast<size_t>(r)];
    INFO("rank " << r << ": " << rep.firstBad);
    CHECK(status[r] == 0);
    CHECK(rep.badCases == 0);
  }
}

TEST_CASE(
    "one-sided across hosts: a remote peer killed after its first signal ends the wait for "
    "its second, naming it, long before NCCL_TIMEOUT",
    "[net_rma]") {
  // Host 0 has rank 0, host 1 rank 1: no process to watch. Rank 0 waits for one signal (which
  // comes), says so, rank 1 is killed, and rank 0 waits for one more. By UCX's RMA
  // (RINGCC_RMA_UCX=2) the survivor hears of the death from UCX (our endpoint to the peer
  // fails); by message from the bootstrap connection the peer's signal came on.
  // RINGCC_RMA_UCX unset: UCX only emulates RMA over TCP, so messages; 2: UCX anyway; 0: messages.
  const std::string mode = GENERATE(std::string(""), std::string("2"), std::string("0"));
  const bool byUcx = mode == "2";
  INFO("RINGCC_RMA_UCX=" << (mode.empty() ? "(unset)" : mode));
  const std::vector<int> hostOf = {0, 1};
  const int n = 2;
  NetnsLab lab(2);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(2);  // [0]: the id; [1].idReady: rank 0 got the first signal
  SharedArray<NetReport> reps(n);
  REQUIRE((sh.ok() && reps.ok()));
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int rank) {
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        rep->pid = getpid();
        if (!becomeHost(lab, hostOf[static_cast<size_t>(rank)], 60000)) return 20;
        setenv("NCCL_TIMEOUT", "60000", 1);
        if (mode.empty())
          unsetenv("RINGCC_RMA_UCX");
        else
          setenv("RINGCC_RMA_UCX", mode.c_str(), 1);
        ncclComm_t comm = nullptr;
        rep->initResult = initRank(&sh[0], rank, n, &comm);
        if (rep->initResult != ncclSuccess) return 10;
        char buf[64] = {};
        ncclWindow_t win = nullptr;
        if (ncclCommWindowRegister(comm, buf, sizeof(buf), &win, 0) != ncclSuccess) return 11;
        if (const std::string bad = unexpectedPaths(comm, hostOf, rank, byUcx); !bad.empty()) {
          note(rep->firstBad, sizeof(rep->firstBad), bad);
          return 14;
        }
        if (rank == 1) {
          if (ncclSignal(0, 0, 0, 0, comm, nullptr) != ncclSuccess) return 12;
          for (int i = 0; i < 60000 && !__atomic_load_n(&sh[1].idReady, __ATOMIC_ACQUIRE); ++i)
            usleep(1000);
          raise(SIGKILL);
        }
        ncclWaitSignalDesc_t d = {1, 1, 0, 0};
        if (ncclWaitSignal(1, &d, comm, nullptr) != ncclSuccess) {
          note(rep->firstBad, sizeof(rep->firstBad), ncclGetLastError(comm));
          return 13;
        }
        __atomic_store_n(&sh[1].idReady, 1, __ATOMIC_RELEASE);
        const auto t0 = std::chrono::steady_clock::now();
        rep->failResult = ncclWaitSignal(1, &d, comm, nullptr);
        rep->failEndNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
        note(rep->lastError, sizeof(rep->lastError), ncclGetLastError(comm));
        ncclCommAbort(comm);
        return 0;
      },
      120);
  const NetReport& rep = reps[0];
  INFO("rank 0: " << rep.firstBad << " / " << rep.lastError);
  CHECK(WIFSIGNALED(status[1]));
  REQUIRE(status[0] == 0);
  CHECK(rep.failResult == ncclRemoteError);
  CHECK(rep.failEndNs < 20'000'000'000LL);  // NCCL_TIMEOUT is 60 s
  const std::string err = rep.lastError;
  CHECK(err.find("peer 1") != std::string::npos);
  CHECK(err.find(byUcx ? "UCX endpoint ended" : "bootstrap connection") != std::string::npos);
  CHECK(err.find("got 1 of 2") != std::string::npos);  // counts run on: one came, two wanted
}

TEST_CASE(
    "one-sided across hosts on CUDA communicators: puts staged on the stream and sent by "
    "message, waits as kernels; every element exact",
    "[net_cuda_rma]") {
  // Host 0 has rank 0, host 1 rank 1, each its own emulated driver (support/fake_cuda.h). Each
  // rank waits (its stream) for the other's put of 1.2 MB (two staging chunks), copies what it
  // wrote after the wait, and puts (another stream) into the other's window.
  const int n = 2;
  const size_t count = 300000;
  NetnsLab lab(2);
  REQUIRE(lab.error() == "");
  SharedArray<Shared> sh(1);
  SharedArray<NetReport> reps(n);
  REQUIRE((sh.ok() && reps.ok()));
  auto value = [](int rank, size_t i) { return static_cast<int32_t>(rank * 1000003 + i); };
  std::vector<int> status = runProcessesStatus(
      n,
      [&](int rank) {
        NetReport* rep = &reps[static_cast<size_t>(rank)];
        if (!becomeHost(lab, rank, 60000)) return 20;
        ringcc::test::FakeCudaScope cuda;
        const ringcc::CudaDriver& cu = cuda.driver();
        setenv("RINGCC_DEVICE", "cuda", 1);
        setenv("NCCL_TIMEOUT", "30000", 1);
        ringcc::CuContext ctx = nullptr;
        if (cu.cuDevicePrimaryCtxRetain(&ctx, 0) != ringcc::kCuSuccess ||
            cu.cuCtxSetCurrent(ctx) != ringcc::kCuSuccess)
          return 21;
        ncclComm_t comm = nullptr;
        rep->initResult = initRank(&sh[0], rank, n, &comm);
        if (rep->initResult != ncclSuccess) return 10;
        ringcc::CuDevicePtr window = 0, src = 0, seen = 0;
        cu.cuMemAlloc(&window, n * count * 4);
        cu.cuMemAlloc(&src, count * 4);
        cu.cuMemAlloc(&seen, count * 4);
        std::memset(reinterpret_cast<void*>(window), 0, n * count * 4);
        auto* from = reinterpret_cast<int32_t*>(src);
        for (size_t i = 0; i < count; ++i) from[i] = value(rank, i);
        auto stream = reinterpret_cast<cudaStream_t>(cuda.newStream());
        auto putStream = reinterpret_cast<cudaStream_t>(cuda.newStream());
        ncclWindow_t win = nullptr;
        int bad = 0;
        auto no = [&](const char* what) {
          if (!bad) note(rep->firstBad, sizeof(rep->firstBad), what);
          note(rep->lastError, sizeof(rep->lastError), ncclGetLastError(comm));
          ++bad;
        };
        if (ncclCommWindowRegister(comm, reinterpret_cast<void*>(window), n * count * 4, &win, 0) !=
            ncclSuccess) {
          no("register");
          return 11;
        }
        const int peer = 1 - rank;
        ncclWaitSignalDesc_t d = {1, peer, 0, 0};
        if (ncclWaitSignal(1, &d, comm, stream) != ncclSuccess) no("wait");
        cu.cuMemcpyDtoDAsync(seen, window + peer * count * 4, count * 4,
                             reinterpret_cast<ringcc::CuStream>(stream));
        if (ncclPutSignal(from, count, ncclInt32, peer, win, rank * count * 4, 0, 0, 0, comm,
                          putStream) != ncclSuccess)
          no("put");
        cuda.synchronizeAll();
        const auto* got = reinterpret_cast<const int32_t*>(seen);
        for (size_t i = 0; i < count; ++i)
          if (got[i] != value(peer, i)) {
            no("the peer's put is not where the copy after the wait read it");
            break;
          }
        ncclResult_t async = ncclInternalError;
        ncclCommGetAsyncError(comm, &async);
        if (async != ncclSuccess) no("async error");
        if (ncclCommWindowDeregister(comm, win) != ncclSuccess) no("deregister");
        if (ncclCommDestroy(comm) != ncclSuccess) no("destroy");
        rep->badCases = bad;
        return bad;
      },
      120);
  for (int r = 0; r < n; ++r) {
    const NetReport& rep = reps[static_cast<size_t>(r)];
    INFO("rank " << r << ": " << rep.firstBad << " / " << rep.lastError);
    CHECK(status[r] == 0);
  }
}
