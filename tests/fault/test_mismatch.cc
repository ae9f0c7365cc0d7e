// Ranks that make different calls get ncclInvalidUsage, at once and on every rank, with an
// error text that names both calls: never wrong data, never a hang until NCCL_TIMEOUT.
//
// Each scenario runs 2 ranks as forked processes (shm) and as threads of one process (p2p),
// each rank making its own call, with the tuner's protocols and with each one forced (the
// signature travels differently in LL lines and beside Simple slots), and with each algorithm
// forced: under Tree or Doubling an all-reduce uses point-to-point connections that a ring
// collective never makes, so one rank waits for connection infos while the other waits on its
// ring (src/exec/call_watch.h). NCCL_TIMEOUT and NCCL_BOOTSTRAP_TIMEOUT are far beyond the
// scenario's limit, so only the ranks' checks can end the calls in time.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

constexpr int kLimitS = 30;
const char* const kProtocols[] = {"", "Simple", "LL", "Direct"};
const char* const kAlgos[] = {"", "Tree", "Doubling"};

std::optional<std::string> setting(const char* value) {
  return value[0] ? std::optional<std::string>(value) : std::nullopt;
}

// One rank's call on a 2-rank communicator, over buffers big enough for any of them.
using Call = std::function<ncclResult_t(ncclComm_t comm, int rank)>;

struct Scenario {
  const char* name;
  Call calls[2];
  const char* said[2];  // how each rank's call is described in the error text
};

std::vector<char> gIn(1 << 20), gOut(1 << 20);

Call allReduce(size_t count, ncclDataType_t type, ncclRedOp_t op) {
  return [=](ncclComm_t c, int) {
    return ncclAllReduce(gIn.data(), gOut.data(), count, type, op, c, nullptr);
  };
}

std::vector<Scenario> scenarios() {
  return {
      {"all-reduce against all-gather",
       {allReduce(1000, ncclFloat32, ncclSum),
        [](ncclComm_t c, int) {
          return ncclAllGather(gIn.data(), gOut.data(), 500, ncclFloat32, c, nullptr);
        }},
       {"AllReduce(1000 x float32, sum)", "AllGather(500 x float32)"}},
      {"float32 against int32 (same size)",
       {allReduce(4096, ncclFloat32, ncclSum), allReduce(4096, ncclInt32, ncclSum)},
       {"AllReduce(4096 x float32, sum)", "AllReduce(4096 x int32, sum)"}},
      {"sum against max, 8 bytes (LL)",
       {allReduce(2, ncclFloat32, ncclSum), allReduce(2, ncclFloat32, ncclMax)},
       {"AllReduce(2 x float32, sum)", "AllReduce(2 x float32, max)"}},
      {"counts that differ",
       {allReduce(1 << 16, ncclFloat32, ncclSum), allReduce((1 << 16) + 1, ncclFloat32, ncclSum)},
       {"AllReduce(65536 x float32, sum)", "AllReduce(65537 x float32, sum)"}},
      {"reduce with different roots",
       {[](ncclComm_t c, int rank) {
          return ncclReduce(gIn.data(), gOut.data(), 100, ncclFloat32, ncclSum, rank, c, nullptr);
        },
        [](ncclComm_t c, int rank) {
          return ncclReduce(gIn.data(), gOut.data(), 100, ncclFloat32, ncclSum, rank, c, nullptr);
        }},
       {"Reduce(100 x float32, sum, root 0)", "Reduce(100 x float32, sum, root 1)"}},
  };
}

// Each protocol with the tuner's algorithms, and each forced algorithm with the tuner's protocols.
std::vector<std::pair<const char*, const char*>> settings() {
  std::vector<std::pair<const char*, const char*>> out;
  for (const char* proto : kProtocols) out.push_back({proto, ""});
  for (const char* algo : kAlgos)
    if (algo[0]) out.push_back({"", algo});
  return out;
}

// 0: the call failed with ncclInvalidUsage and its text names both calls; 3: it failed so and
// says the peer found the mismatch (a rank that never received); otherwise 1 (wrong result)
// or 2 (text), with the text on stderr.
int checkRank(const Scenario& s, ncclComm_t comm, int rank) {
  const ncclResult_t r = s.calls[rank](comm, rank);
  const std::string text = ncclGetLastError(comm);
  if (r != ncclInvalidUsage) {
    std::fprintf(stderr, "%s, rank %d: result %d, text: %s\n", s.name, rank, r, text.c_str());
    return 1;
  }
  const std::string mine = std::string("rank ") + std::to_string(rank) + " called " + s.said[rank];
  const std::string theirs =
      std::string("rank ") + std::to_string(1 - rank) + " called " + s.said[1 - rank];
  if (text.find(mine) != std::string::npos && text.find(theirs) != std::string::npos) return 0;
  if (text.find("found that the ranks made different calls") != std::string::npos) return 3;
  std::fprintf(stderr, "%s, rank %d: text names neither call as expected: %s\n", s.name, rank,
               text.c_str());
  return 2;
}

}  // namespace

TEST_CASE("mismatched calls between processes: ncclInvalidUsage naming both calls", "[mismatch]") {
  ScopedEnv timeout("NCCL_TIMEOUT", "600000");
  ScopedEnv bootstrapTimeout("NCCL_BOOTSTRAP_TIMEOUT", "600000");
  for (const auto& [proto, algo] : settings()) {
    ScopedEnv forcedProto("NCCL_PROTO", setting(proto));
    ScopedEnv forcedAlgo("NCCL_ALGO", setting(algo));
    for (const Scenario& s : scenarios()) {
      INFO(s.name << ", NCCL_PROTO=" << proto << ", NCCL_ALGO=" << algo);
      ncclUniqueId id = newUniqueId();
      std::vector<int> status = runProcessesStatus(
          2,
          [&](int rank) {
            ncclComm_t comm = nullptr;
            if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 4;
            const int rc = checkRank(s, comm, rank);
            ncclCommAbort(comm);
            return rc;
          },
          kLimitS);
      int named = 0;
      for (int st : status) {
        REQUIRE(st >= 0);  // not killed at the limit: nobody hung
        REQUIRE(WIFEXITED(st));
        const int code = WEXITSTATUS(st);
        CHECK((code == 0 || code == 3));
        named += code == 0;
      }
      CHECK(named >= 1);  // at least one rank names both calls
    }
  }
}

// A tag of its own: its communicators leave the hang watcher's thread running, beside which
// the [mismatch] cases could not fork their ranks (tests/support/ranks.h).
TEST_CASE("mismatched calls between threads: ncclInvalidUsage naming both calls",
          "[mismatch_threads]") {
  ScopedEnv timeout("NCCL_TIMEOUT", "600000");
  ScopedEnv bootstrapTimeout("NCCL_BOOTSTRAP_TIMEOUT", "600000");
  for (const auto& [proto, algo] : settings()) {
    ScopedEnv forcedProto("NCCL_PROTO", setting(proto));
    ScopedEnv forcedAlgo("NCCL_ALGO", setting(algo));
    for (const Scenario& s : scenarios()) {
      INFO(s.name << ", NCCL_PROTO=" << proto << ", NCCL_ALGO=" << algo);
      ncclComm_t comms[2] = {};
      REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
      int codes[2] = {-1, -1};
      runThreads(2, [&](int rank) { codes[rank] = checkRank(s, comms[rank], rank); });
      CHECK((codes[0] == 0 || codes[0] == 3));
      CHECK((codes[1] == 0 || codes[1] == 3));
      CHECK((codes[0] == 0 || codes[1] == 0));
      for (ncclComm_t c : comms) ncclCommAbort(c);
    }
  }
}

TEST_CASE("settings that differ between ranks are refused at init, on every rank", "[mismatch]") {
  struct Setting {
    const char* var;
    const char* value;  // on rank 1 only
    const char* named;  // in the error text
  };
  const Setting settings[] = {{"NCCL_BUFFSIZE", "2097152", "NCCL_BUFFSIZE differs between ranks"},
                              {"NCCL_MIN_NCHANNELS", "2", "NCCL_MIN_NCHANNELS differs"},
                              {"NCCL_PROTO", "Simple", "NCCL_PROTO differs"},
                              {"NCCL_ALGO", "Ring", "NCCL_ALGO differs"},
                              {"NCCL_CHUNKSIZE", "65536", "NCCL_CHUNKSIZE differs"}};
  for (const Setting& s : settings) {
    INFO(s.var << "=" << s.value << " on rank 1 only");
    ncclUniqueId id = newUniqueId();
    std::vector<int> status = runProcessesStatus(
        2,
        [&](int rank) {
          if (rank == 1) setenv(s.var, s.value, 1);
          ncclComm_t comm = nullptr;
          const ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
          const std::string text = ncclGetLastError(nullptr);
          if (r != ncclInvalidUsage || text.find(s.named) == std::string::npos) {
            std::fprintf(stderr, "rank %d: result %d, text: %s\n", rank, r, text.c_str());
            return 1;
          }
          return 0;
        },
        kLimitS);
    for (int st : status) {
      REQUIRE(st >= 0);
      CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
  }
}

// Matching calls must never be taken for a mismatch, however the ranks' timing falls. Ranks 1
// and 2 exchange a message that rank 0 takes no part in; then every rank broadcasts from rank 0
// and all-reduces. Rank 1 comes late to the broadcast, so rank 2 (which receives it from rank
// 1 on the ring 0 -> 1 -> 2) is stuck there and posts its call, while rank 0, whose broadcast
// left at once, is stuck in the all-reduce waiting on rank 2 and compares rank 2's posted call
// with its own. They are different calls of the same sequence, so they must carry different
// batch numbers on every rank: when the send/recv batch was numbered too (on ranks 1 and 2
// only), rank 2's broadcast and rank 0's all-reduce had the same number and rank 0 failed with
// ncclInvalidUsage ("rank 0 called AllReduce, rank 2 called Broadcast").
TEST_CASE("a send/recv between some ranks does not make later matching calls look mismatched",
          "[mismatch_threads]") {
  ScopedEnv timeout("NCCL_TIMEOUT", "600000");
  ScopedEnv ring("NCCL_ALGO", "Ring");
  // Through the FIFO, so that the root's broadcast can end before anyone reads it (Direct
  // would keep it waiting for rank 1, which reads the root's buffer itself).
  ScopedEnv simple("NCCL_PROTO", "Simple");
  constexpr int n = 3;
  constexpr size_t count = 1024;
  ncclComm_t comms[n] = {};
  REQUIRE(ncclCommInitAll(comms, n, nullptr) == ncclSuccess);
  std::vector<std::vector<float>> data(n, std::vector<float>(count)), sums(n, data[0]);
  ncclResult_t results[n][3] = {};
  runThreads(n, [&](int rank) {
    std::vector<float>& buf = data[rank];
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank == 0 ? i : 0);
    ncclResult_t* r = results[rank];
    float word = 0;
    if (rank == 1) r[0] = ncclSend(&word, 1, ncclFloat32, 2, comms[rank], nullptr);
    if (rank == 2) r[0] = ncclRecv(&word, 1, ncclFloat32, 1, comms[rank], nullptr);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    r[1] = ncclBroadcast(buf.data(), buf.data(), count, ncclFloat32, 0, comms[rank], nullptr);
    r[2] = ncclAllReduce(buf.data(), sums[rank].data(), count, ncclFloat32, ncclSum, comms[rank],
                         nullptr);
  });
  for (int rank = 0; rank < n; ++rank) {
    INFO("rank " << rank << ": " << ncclGetLastError(comms[rank]));
    for (ncclResult_t r : results[rank]) CHECK(r == ncclSuccess);
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += sums[rank][i] != static_cast<float>(3 * i);
    CHECK(wrong == 0);
  }
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}
