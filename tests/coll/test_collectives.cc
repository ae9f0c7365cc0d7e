// Multi-rank correctness of every collective through the public NCCL API, with exact data
// (tests/coll/coll_check.h): every datatype and op, in and out of place, counts at slot,
// chunk and loop boundaries, 1..8 ranks as threads and 2..4 as processes, 1..32 channels,
// grouped mixes over several communicators, split and non-blocking communicators. Every rank's
// buffers must equal the reference bit for bit, guards and canaries included.
//
// NCCL_BUFFSIZE=64K (8 slots of 8 KiB on ring connections, 8 of 2 KiB on p2p connections)
// keeps the boundaries small; connections keep the geometry they were made with, so the
// variable is set before the communicators are made and kept for their whole life.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll_check.h"
#include "nccl.h"
#include "src/base/log.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc::test;

namespace {

constexpr size_t kSmallBuffSize = 64 * 1024;
constexpr size_t kRingSlot = kSmallBuffSize / 8;     // ring connections: BUFFSIZE / 8 slots
constexpr size_t kP2pSlot = kSmallBuffSize / 4 / 8;  // p2p connections: a quarter of it

// The environment every test here runs under: small slots, and a deadline short enough
// that a wrong schedule fails the test instead of hanging it.
struct TestEnv {
  ScopedEnv buffsize{"NCCL_BUFFSIZE", std::to_string(kSmallBuffSize)};
  ScopedEnv timeout{"NCCL_TIMEOUT", "20000"};
  ScopedEnv minCh{"NCCL_MIN_NCHANNELS", std::nullopt};
  ScopedEnv maxCh{"NCCL_MAX_NCHANNELS", std::nullopt};
  ScopedEnv p2p{"NCCL_P2P_DISABLE", std::nullopt};
};

// Channels per collective: exactly `n` (0: the library's choice by size). A communicator reads
// its channel bounds when it is made (as NCCL reads its parameters at init), so make the
// communicators inside this scope: runCases checks that they were.
struct Channels {
  ScopedEnv minCh, maxCh;
  explicit Channels(int n)
      : minCh("NCCL_MIN_NCHANNELS",
              n ? std::optional<std::string>(std::to_string(n)) : std::nullopt),
        maxCh("NCCL_MAX_NCHANNELS",
              n ? std::optional<std::string>(std::to_string(n)) : std::nullopt) {}
};

// NCCL_MAX_NCHANNELS as it is now ("" when unset).
std::string maxChannelsNow() {
  const char* v = std::getenv("NCCL_MAX_NCHANNELS");
  return v ? v : "";
}

struct Comms {
  std::vector<ncclComm_t> comms;
  std::string maxChannels = maxChannelsNow();  // the channel bound they were made with
  explicit Comms(int n) : comms(n, nullptr) {
    REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  }
  explicit Comms(std::vector<ncclComm_t> c) : comms(std::move(c)) {}
  ~Comms() {
    for (ncclComm_t c : comms)
      if (c) ncclCommDestroy(c);
  }
  int size() const { return static_cast<int>(comms.size()); }
  ncclComm_t operator[](int r) const { return comms[r]; }
};

// Collected failures, reported from the main thread (Catch2 is not thread-safe).
struct Failures {
  std::vector<std::string> list;
  void add(std::string s) { list.push_back(std::move(s)); }
  void report() const {
    for (size_t i = 0; i < list.size() && i < 12; ++i) FAIL_CHECK(list[i]);
    if (list.size() > 12) FAIL_CHECK(list.size() - 12 << " more failures");
    CHECK(list.empty());
  }
};

// How the ranks' calls are made.
enum class Drive {
  Threads,       // one thread per rank, each issuing the batch's calls one after another
  Group,         // one thread: per case, ncclGroupStart, every rank's call, ncclGroupEnd
  OneGroup,      // one thread: the whole batch, every rank, in a single group
  ThreadGroups,  // one thread per rank, each issuing the whole batch in its own group
};
constexpr Drive kDrives[] = {Drive::Threads, Drive::Group, Drive::OneGroup, Drive::ThreadGroups};
const char* driveName(Drive d) {
  switch (d) {
    case Drive::Threads:
      return "threads";
    case Drive::Group:
      return "group";
    case Drive::OneGroup:
      return "one-group";
    case Drive::ThreadGroups:
      return "thread-groups";
  }
  return "?";
}

// Element counts that sit on the boundaries of a collective's data movement: slots of
// `slotBytes` and loops of `loopSlots` slots per channel. The last spans several loops;
// with `deep`, also more than a connection's 8 slots per channel, so that a sender must
// wait for free slots within one call. (Ring collectives over blocks pass n blocks through
// each connection anyway.)
std::vector<size_t> countClasses(ncclDataType_t type, size_t slotBytes, size_t loopSlots, int nch,
                                 bool deep) {
  const size_t s = slotBytes / typeSize(type);
  const size_t loop = s * loopSlots * static_cast<size_t>(nch);
  const size_t many = std::max(3 * loop, deep ? 9 * s * static_cast<size_t>(nch) : 0) + 5;
  return {0, 1, 7, s - 1, s, s + 1, loop - 1, loop + 1, many};
}

std::vector<size_t> countsFor(Coll c, ncclDataType_t type, int n, int nch) {
  switch (c) {
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      return countClasses(type, kP2pSlot, 1, nch, true);
    case Coll::AllReduce:  // a loop moves n chunks of one slot
      return countClasses(type, kRingSlot, static_cast<size_t>(n), nch, true);
    case Coll::AllGather:
    case Coll::ReduceScatter:
      return countClasses(type, kRingSlot, 1, nch, false);
    default:
      return countClasses(type, kRingSlot, 1, nch, true);  // broadcast, reduce chains
  }
}

// Runs `cases` on `comms` in batches; failures name the case, the rank and the difference.
void runCases(const Comms& comms, const std::vector<CollCase>& cases, Drive drive, Failures& fail,
              const char* label = "") {
  const int n = comms.size();
  if (comms.maxChannels != maxChannelsNow()) {
    fail.add(std::string(label) + "communicators made with NCCL_MAX_NCHANNELS='" +
             comms.maxChannels + "' but run under '" + maxChannelsNow() +
             "': the channel count asked for is not the one run");
    return;
  }
  size_t next = 0;
  while (next < cases.size()) {
    // A batch: up to 48 cases or ~48 MiB of buffers.
    std::vector<std::unique_ptr<CaseData>> data;
    std::vector<std::vector<std::unique_ptr<CollRank>>> ranks;
    size_t bytes = 0;
    while (next < cases.size() && data.size() < 48 && bytes < (size_t{48} << 20)) {
      data.push_back(std::make_unique<CaseData>(cases[next++], n));
      const CaseData& d = *data.back();
      bytes += (d.sendElems() + d.recvElems()) * typeSize(d.c.type) * n * 3;
      ranks.emplace_back();
      for (int r = 0; r < n; ++r)
        ranks.back().push_back(std::make_unique<CollRank>(d, r, comms[r]));
    }
    const size_t nb = data.size();
    std::vector<std::vector<ncclResult_t>> res(nb, std::vector<ncclResult_t>(n, ncclSuccess));
    switch (drive) {
      case Drive::Threads: {
        std::atomic<bool> stop{false};
        runThreads(n, [&](int r) {
          for (size_t i = 0; i < nb && !stop.load(); ++i) {
            res[i][r] = ranks[i][r]->issue();
            if (res[i][r] != ncclSuccess) stop.store(true);
          }
        });
        break;
      }
      case Drive::Group:
        for (size_t i = 0; i < nb; ++i) {
          ncclGroupStart();
          for (int r = 0; r < n; ++r) res[i][r] = ranks[i][r]->issue();
          ncclResult_t e = ncclGroupEnd();
          if (e != ncclSuccess) res[i][0] = e;
        }
        break;
      case Drive::OneGroup: {
        ncclGroupStart();
        for (size_t i = 0; i < nb; ++i)
          for (int r = 0; r < n; ++r) res[i][r] = ranks[i][r]->issue();
        ncclResult_t e = ncclGroupEnd();
        if (e != ncclSuccess) res[0][0] = e;
        break;
      }
      case Drive::ThreadGroups:
        runThreads(n, [&](int r) {
          ncclGroupStart();
          for (size_t i = 0; i < nb; ++i) res[i][r] = ranks[i][r]->issue();
          ncclResult_t e = ncclGroupEnd();
          if (e != ncclSuccess) res[0][r] = e;
        });
        break;
    }
    for (size_t i = 0; i < nb; ++i)
      for (int r = 0; r < n; ++r) {
        std::string what = std::string(label) + "[" + driveName(drive) + "] " +
                           data[i]->c.describe(n) + " rank " + std::to_string(r) + ": ";
        if (res[i][r] != ncclSuccess)
          fail.add(what + "returned " + ncclGetErrorString(res[i][r]));
        else if (std::string why = ranks[i][r]->check(); !why.empty())
          fail.add(what + why);
      }
  }
}

// The full datatype x op matrix of one reducing collective on 1, 2, 3, 4 and 8 ranks: per
// (ranks, datatype, op) two cases, one in place and one out of place, with counts rotating
// through the boundary classes. A quarter of the matrix runs in each drive mode, half of
// it on several channels.
void reduceMatrix(Coll coll, Failures& fail) {
  TestEnv env;
  int rot = 0;
  for (int n : {1, 2, 3, 4, 8}) {
    std::vector<CollCase> cases[4];
    int k = 0;
    for (ncclDataType_t t : kAllTypes)
      for (Op op : kReduceOps)
        for (bool inPlace : {false, true}) {
          const int nch = k % 4 < 2 ? 1 : 2 + (k % 2) * 2;
          CollCase c;
          c.coll = coll;
          c.type = t;
          c.op = op;
          std::vector<size_t> counts = countsFor(coll, t, n, nch);
          c.count = counts[1 + (rot * 5) % (counts.size() - 1)];  // count 0: the sweeps
          c.inPlace = inPlace;
          c.root = rot % n;
          c.nullUnused = rot % 3 == 0;
          c.seed = 1000 + rot;
          ++rot;
          cases[k++ % 4].push_back(c);
        }
    for (int q = 0; q < 4; ++q) {
      Channels channels(q < 2 ? 1 : 2 + (q % 2) * 2);
      Comms comms(n);
      char label[32];
      std::snprintf(label, sizeof label, "ch=%d ", q < 2 ? 1 : 2 + (q % 2) * 2);
      runCases(comms, cases[q], kDrives[(q + n) % 4], fail, label);
    }
  }
}

// Every count class on 1, 2 and 4 channels for one collective, a few datatypes and ops.
void countSweep(Coll coll, std::initializer_list<int> rankCounts,
                std::initializer_list<ncclDataType_t> types, std::initializer_list<Op> ops,
                Failures& fail) {
  TestEnv env;
  int rot = 0;
  for (int n : rankCounts) {
    // Three ranks run over shm instead of in-process p2p.
    std::optional<ScopedEnv> shm;
    if (n == 3) shm.emplace("NCCL_P2P_DISABLE", "1");
    for (int nch : {1, 2, 4}) {
      Channels channels(nch);
      Comms comms(n);
      std::vector<CollCase> cases;
      for (ncclDataType_t t : types)
        for (size_t count : countsFor(coll, t, n, nch)) {
          CollCase c;
          c.coll = coll;
          c.type = t;
          c.op = collReduces(coll) ? *(ops.begin() + rot % ops.size()) : Op::Copy;
          c.count = count;
          c.inPlace = rot % 2 == 0;
          c.root = (rot * 5 + 1) % n;
          c.nullUnused = rot % 4 == 1;
          c.seed = 5000 + rot;
          ++rot;
          cases.push_back(c);
        }
      char label[32];
      std::snprintf(label, sizeof label, "ch=%d ", nch);
      runCases(comms, cases, (n + nch) % 2 ? Drive::Threads : Drive::Group, fail, label);
    }
  }
}

// Every datatype at three counts for a collective that only moves data, roots rotating,
// in and out of place, on 1, 2 and 4 channels, in every drive mode.
void copyMatrix(Coll coll, Failures& fail) {
  TestEnv env;
  int rot = 0;
  for (int n : {1, 2, 3, 4, 8}) {
    for (int nch : {1, 2, 4}) {
      Channels channels(nch);
      Comms comms(n);
      std::vector<CollCase> cases;
      for (ncclDataType_t t : kAllTypes) {
        std::vector<size_t> counts = countsFor(coll, t, n, nch);
        CollCase c;
        c.coll = coll;
        c.type = t;
        c.op = Op::Copy;
        c.count = counts[1 + (rot * 5) % (counts.size() - 1)];
        c.inPlace = rot % 2 == 1;
        c.root = (rot / 2) % n;
        c.nullUnused = rot % 3 == 2;
        c.seed = 9000 + rot;
        ++rot;
        cases.push_back(c);
      }
      char label[32];
      std::snprintf(label, sizeof label, "ch=%d ", nch);
      runCases(comms, cases, kDrives[(rot + n) % 4], fail, label);
    }
  }
}

// ---- point-to-point ---------------------------------------------------------------------

struct Msg {
  int src, dst;
  ncclDataType_t type;
  size_t count;
};

// One rank's part of a set of messages, posted in list order inside one group (or all
// receives first), each message's data derived from its position in the list.
class P2pRank {
 public:
  P2pRank(const std::vector<Msg>& msgs, int rank, bool recvFirst, uint64_t seed)
      : msgs_(msgs), rank_(rank), recvFirst_(recvFirst) {
    for (size_t i = 0; i < msgs.size(); ++i) {
      const Msg& m = msgs[i];
      const size_t bytes = m.count * typeSize(m.type);
      DataSpec spec;
      spec.type = m.type;
      spec.seed = seed + i;
      if (m.src == rank) {
        Region* s = run_.add("send #" + std::to_string(i), bytes, m.type, seed * 3 + i);
        genInput(spec, m.src, 0, m.count, s->data());
        s->snapshot();
        sendPtr_.push_back(s->data());
      } else {
        sendPtr_.push_back(nullptr);
      }
      if (m.dst == rank) {
        Region* r = run_.add("recv #" + std::to_string(i), bytes, m.type, seed * 5 + i);
        genInput(spec, m.src, 0, m.count, r->expected());
        recvPtr_.push_back(r->data());
      } else {
        recvPtr_.push_back(nullptr);
      }
    }
  }

  ncclResult_t issue(ncclComm_t comm) {
    ncclResult_t first = ncclGroupStart();
    auto post = [&](bool sends, bool recvs) {
      for (size_t i = 0; i < msgs_.size(); ++i) {
        const Msg& m = msgs_[i];
        ncclResult_t r = ncclSuccess;
        if (sends && m.src == rank_)
          r = ncclSend(sendPtr_[i], m.count, m.type, m.dst, comm, nullptr);
        if (r == ncclSuccess && recvs && m.dst == rank_)
          r = ncclRecv(recvPtr_[i], m.count, m.type, m.src, comm, nullptr);
        if (first == ncclSuccess) first = r;
      }
    };
    if (recvFirst_) {
      post(false, true);
      post(true, false);
    } else {
      post(true, true);
    }
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  }

  std::string check() const { return run_.check(); }

 private:
  std::vector<Msg> msgs_;
  int rank_;
  bool recvFirst_;
  RankRun run_;
  std::vector<void*> sendPtr_, recvPtr_;
};

void runP2p(const Comms& comms, const std::vector<Msg>& msgs, Drive drive, uint64_t seed,
            const std::string& name, Failures& fail) {
  const int n = comms.size();
  std::vector<std::unique_ptr<P2pRank>> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(std::make_unique<P2pRank>(msgs, r, (r + seed) % 2 == 1, seed));
  std::vector<ncclResult_t> res(n, ncclSuccess);
  if (drive == Drive::Threads) {
    runThreads(n, [&](int r) { res[r] = ranks[r]->issue(comms[r]); });
  } else {
    ncclGroupStart();
    for (int r = 0; r < n; ++r) res[r] = ranks[r]->issue(comms[r]);
    ncclResult_t e = ncclGroupEnd();
    if (e != ncclSuccess) res[0] = e;
  }
  for (int r = 0; r < n; ++r) {
    std::string what = name + " [" + driveName(drive) + "] n=" + std::to_string(n) + " rank " +
                       std::to_string(r) + ": ";
    if (res[r] != ncclSuccess)
      fail.add(what + "returned " + ncclGetErrorString(res[r]));
    else if (std::string why = ranks[r]->check(); !why.empty())
      fail.add(what + why);
  }
}

CollCase mk(Coll coll, ncclDataType_t t, Op op, size_t count, int root, bool inPlace,
            uint64_t seed) {
  CollCase c;
  c.coll = coll;
  c.type = t;
  c.op = collReduces(coll) ? op : Op::Copy;
  c.count = count;
  c.root = root;
  c.inPlace = inPlace;
  c.seed = seed;
  return c;
}

}  // namespace

// ---- all-reduce ---------------------------------------------------------------------------

TEST_CASE("all-reduce: every datatype x op on 1, 2, 3, 4 and 8 ranks", "[coll_allreduce]") {
  Failures fail;
  reduceMatrix(Coll::AllReduce, fail);
  fail.report();
}

TEST_CASE("all-reduce: slot, chunk and loop boundaries on 1, 2 and 4 channels",
          "[coll_allreduce]") {
  Failures fail;
  countSweep(Coll::AllReduce, {2, 3, 8}, {ncclFloat32, ncclBfloat16, ncclInt8, ncclFloat64},
             {Op::Sum, Op::Avg, Op::Max, Op::PreMulHost, Op::Prod}, fail);
  fail.report();
}

TEST_CASE("all-reduce: a device-resident scalar is read when the collective runs",
          "[coll_allreduce]") {
  TestEnv env;
  const int n = 4;
  Comms comms(n);
  for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclInt32}) {
    const size_t count = 1000;
    DataSpec spec;
    spec.type = t;
    spec.op = Op::PreMulDevice;
    spec.nranks = n;
    spec.seed = 77;
    spec.scalar = typeIsFloat(t) ? 4.0 : 7.0;  // the larger of the two bounds the inputs
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * typeSize(t)));
    std::vector<const uint8_t*> ins;
    for (int r = 0; r < n; ++r) {
      genInput(spec, r, 0, count, in[r].data());
      ins.push_back(in[r].data());
    }
    std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * typeSize(t)));
    std::vector<uint64_t> scalars(n);
    std::vector<ncclRedOp_t> ops(n);
    for (int r = 0; r < n; ++r)
      REQUIRE(ncclRedOpCreatePreMulSum(&ops[r], &scalars[r], t, ncclScalarDevice, comms[r]) ==
              ncclSuccess);
    for (double s : {typeIsFloat(t) ? 0.5 : 3.0, spec.scalar}) {
      spec.scalar = s;
      for (int r = 0; r < n; ++r) scalarBytes(spec, &scalars[r]);  // after creating the op
      ncclGroupStart();
      for (int r = 0; r < n; ++r)
        ncclAllReduce(in[r].data(), out[r].data(), count, t, ops[r], comms[r], nullptr);
      REQUIRE(ncclGroupEnd() == ncclSuccess);
      std::vector<uint8_t> expect(count * typeSize(t));
      reduceInto(spec, ins, 0, count, expect.data());
      for (int r = 0; r < n; ++r) {
        INFO(typeName(t) << " scalar " << s << " rank " << r);
        CHECK(out[r] == expect);
      }
    }
    for (int r = 0; r < n; ++r) CHECK(ncclRedOpDestroy(ops[r], comms[r]) == ncclSuccess);
  }
}

TEST_CASE("a communicator keeps the NCCL_BUFFSIZE it was made with", "[coll_allreduce]") {
  // NCCL reads its parameters once; a later change of the environment must not break the
  // connections an existing communicator has made.
  TestEnv env;
  Failures fail;
  const int n = 3;
  std::optional<Comms> comms;
  auto cases = [](uint64_t seed) {
    return std::vector<CollCase>{
        mk(Coll::AllReduce, ncclFloat32, Op::Sum, 100000, 0, false, seed),
        mk(Coll::AlltoAll, ncclInt32, Op::Copy, 5000, 0, false, seed + 1),
        mk(Coll::Broadcast, ncclUint8, Op::Copy, 70000, 1, false, seed + 2)};
  };
  {
    ScopedEnv small("NCCL_BUFFSIZE", "65536");
    comms.emplace(n);
    runCases(*comms, cases(1), Drive::Group, fail, "made with 64K ");
  }
  for (const char* size : {"4194304", "16384"}) {
    ScopedEnv other("NCCL_BUFFSIZE", size);
    runCases(*comms, cases(10), Drive::Group, fail, (std::string("now ") + size + " ").c_str());
  }
  comms.reset();
  fail.report();
}

// ---- reduce-scatter ---------------------------------------------------------------------

TEST_CASE("reduce-scatter: every datatype x op on 1, 2, 3, 4 and 8 ranks", "[coll_reducescatter]") {
  Failures fail;
  reduceMatrix(Coll::ReduceScatter, fail);
  fail.report();
}

TEST_CASE("reduce-scatter: slot, chunk and loop boundaries on 1, 2 and 4 channels",
          "[coll_reducescatter]") {
  Failures fail;
  countSweep(Coll::ReduceScatter, {2, 3, 4}, {ncclFloat16, ncclInt64, ncclFloat8e4m3},
             {Op::Sum, Op::Min, Op::Avg, Op::PreMulDevice}, fail);
  fail.report();
}

// ---- rooted: broadcast, bcast, reduce, gather, scatter -----------------------------------

TEST_CASE("reduce: every datatype x op on 1, 2, 3, 4 and 8 ranks, roots rotating",
          "[coll_rooted]") {
  Failures fail;
  reduceMatrix(Coll::Reduce, fail);
  fail.report();
}

TEST_CASE("broadcast, bcast, gather, scatter: every datatype on 1, 2, 3, 4 and 8 ranks",
          "[coll_rooted]") {
  Failures fail;
  for (Coll c : {Coll::Broadcast, Coll::Bcast, Coll::Gather, Coll::Scatter}) copyMatrix(c, fail);
  fail.report();
}

TEST_CASE("rooted collectives: slot, chunk and loop boundaries on 1, 2 and 4 channels",
          "[coll_rooted]") {
  Failures fail;
  countSweep(Coll::Broadcast, {3, 4}, {ncclUint8, ncclFloat64}, {}, fail);
  countSweep(Coll::Reduce, {2, 3}, {ncclFloat32, ncclUint32}, {Op::Sum, Op::Max, Op::Avg}, fail);
  countSweep(Coll::Gather, {3, 4}, {ncclFloat16}, {}, fail);
  countSweep(Coll::Scatter, {2, 3}, {ncclInt32}, {}, fail);
  fail.report();
}

// ---- all-gather, all-to-all ---------------------------------------------------------------

TEST_CASE("all-gather and all-to-all: every datatype on 1, 2, 3, 4 and 8 ranks", "[coll_gather]") {
  Failures fail;
  copyMatrix(Coll::AllGather, fail);
  copyMatrix(Coll::AlltoAll, fail);
  fail.report();
}

TEST_CASE("all-gather and all-to-all: slot, chunk and loop boundaries on 1, 2 and 4 channels",
          "[coll_gather]") {
  Failures fail;
  countSweep(Coll::AllGather, {2, 3, 8}, {ncclFloat32, ncclInt8}, {}, fail);
  countSweep(Coll::AlltoAll, {2, 3, 4}, {ncclBfloat16, ncclUint64}, {}, fail);
  fail.report();
}

// ---- send / recv --------------------------------------------------------------------------

TEST_CASE("send/recv: shifts, exchanges, self, repeated peers, mixed datatypes", "[coll_p2p]") {
  TestEnv env;
  Failures fail;
  const size_t p2pF32 = kP2pSlot / 4;  // float elements per p2p slot
  uint64_t seed = 1;
  for (int n : {1, 2, 3, 4, 8}) {
    Comms comms(n);
    // Ring shifts by 1 and by n/2, counts around the p2p slot and several FIFO lengths.
    for (size_t count :
         {size_t{0}, size_t{1}, p2pF32 - 1, p2pF32 + 1, 8 * p2pF32 + 3, 40 * p2pF32}) {
      std::vector<Msg> msgs;
      for (int r = 0; r < n; ++r) msgs.push_back({r, (r + 1) % n, ncclFloat32, count});
      for (int r = 0; r < n; ++r) msgs.push_back({r, (r + n / 2) % n, ncclUint8, count * 3 + 1});
      runP2p(comms, msgs, seed % 2 ? Drive::Threads : Drive::Group, seed,
             "shift count " + std::to_string(count), fail);
      ++seed;
    }
    // All pairs, self included, a different count and datatype per pair; two messages
    // between every pair in each direction, matched in posting order.
    std::vector<Msg> all;
    for (int rep = 0; rep < 2; ++rep)
      for (int s = 0; s < n; ++s)
        for (int d = 0; d < n; ++d)
          all.push_back(
              {s, d, kAllTypes[(s * 5 + d * 3 + rep) % 12],
               static_cast<size_t>(rep == 0 ? 1 + s * 700 + d * 300 : 3 * p2pF32 + s + d)});
    runP2p(comms, all, Drive::Group, seed++, "all pairs", fail);
    runP2p(comms, all, Drive::Threads, seed++, "all pairs", fail);
    // Random permutations: every rank sends to perm[r] and receives from its preimage, a
    // few rounds in one group, counts varying per round.
    std::vector<Msg> perms;
    uint64_t h = 0x1234 + n;
    for (int round = 0; round < 4; ++round) {
      std::vector<int> perm(n);
      for (int r = 0; r < n; ++r) perm[r] = r;
      for (int r = n - 1; r > 0; --r) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(perm[r], perm[(h >> 33) % (r + 1)]);
      }
      for (int r = 0; r < n; ++r)
        perms.push_back({r, perm[r], kAllTypes[(round * 3 + r) % 12],
                         static_cast<size_t>(1 + (h >> 40) % (6 * kP2pSlot))});
    }
    runP2p(comms, perms, n % 2 ? Drive::Group : Drive::Threads, seed++, "permutations", fail);
    // Self only: several send/recv to self of different sizes, zero among them.
    std::vector<Msg> self;
    for (int r = 0; r < n; ++r)
      for (size_t count : {size_t{5}, size_t{0}, 4 * p2pF32 + 1})
        self.push_back({r, r, ncclFloat64, count});
    runP2p(comms, self, Drive::Threads, seed++, "self", fail);
  }
  fail.report();
}

TEST_CASE("send/recv: groups with more operations than one schedule holds", "[coll_p2p]") {
  // NCCL puts no bound on the operations of a group. A schedule (Program) holds 256 lanes
  // and 256 buffers per direction; a group beyond that must still run, in order.
  TestEnv env;
  Failures fail;
  {
    Comms comms(2);
    std::vector<Msg> msgs;
    for (int i = 0; i < 300; ++i) {
      msgs.push_back({0, 1, kAllTypes[i % 12], static_cast<size_t>(1 + (i * 37) % 600)});
      msgs.push_back({1, 0, ncclInt32, static_cast<size_t>(i % 5 == 0 ? 3 * kP2pSlot / 4 + 1 : 2)});
      if (i % 3 == 0) msgs.push_back({i % 2, i % 2, ncclUint8, static_cast<size_t>(i)});
    }
    runP2p(comms, msgs, Drive::Group, 11, "300 each way", fail);
    runP2p(comms, msgs, Drive::Threads, 12, "300 each way", fail);
  }
  {
    Comms comms(4);
    std::vector<Msg> msgs;
    for (int rep = 0; rep < 40; ++rep)
      for (int s = 0; s < 4; ++s)
        for (int d = 0; d < 4; ++d)
          msgs.push_back({s, d, ncclFloat16, static_cast<size_t>(1 + rep + s)});
    runP2p(comms, msgs, Drive::Threads, 13, "40 to every peer", fail);
  }
  {
    // Lopsided: each rank's operations split into rounds differently, and every message is
    // larger than a p2p FIFO, so a rank that waited for the wrong round would hang.
    Comms comms(3);
    std::vector<Msg> msgs;
    const size_t big = 5 * kP2pSlot + 7;  // bytes: more than the 8 slots of a connection
    for (int i = 0; i < 130; ++i) {
      msgs.push_back({0, 1, ncclUint8, big + i});
      msgs.push_back({2, 1, ncclUint8, big});
      if (i < 50) msgs.push_back({1, 0, ncclUint8, big});
      if (i < 90) msgs.push_back({2, 2, ncclUint8, 3});
    }
    runP2p(comms, msgs, Drive::Threads, 14, "lopsided", fail);
    runP2p(comms, msgs, Drive::Group, 15, "lopsided", fail);
  }
  fail.report();
}

TEST_CASE("send/recv outside a group: one sender, one receiver", "[coll_p2p]") {
  TestEnv env;
  Comms comms(2);
  for (size_t count : {size_t{1}, 3 * kP2pSlot / 2 + 1, 50 * kP2pSlot / 2}) {
    DataSpec spec;
    spec.type = ncclFloat16;
    std::vector<uint8_t> src(count * 2), dst(count * 2, 0);
    genInput(spec, 0, 0, count, src.data());
    std::vector<ncclResult_t> res(2);
    runThreads(2, [&](int r) {
      res[r] = r == 0 ? ncclSend(src.data(), count, ncclFloat16, 1, comms[0], nullptr)
                      : ncclRecv(dst.data(), count, ncclFloat16, 0, comms[1], nullptr);
    });
    CHECK(res[0] == ncclSuccess);
    CHECK(res[1] == ncclSuccess);
    CHECK(src == dst);
  }
}

// ---- groups over several communicators, split communicators -------------------------------

namespace {

// One piece of work for a communicator set: a collective case or a set of messages.
struct Work {
  const Comms* comms;
  std::unique_ptr<CaseData> data;
  std::vector<std::unique_ptr<CollRank>> coll;
  std::vector<std::unique_ptr<P2pRank>> p2p;
  std::string name;
  std::vector<ncclResult_t> res;
};

std::unique_ptr<Work> collWork(const Comms& comms, const CollCase& c) {
  auto w = std::make_unique<Work>();
  w->comms = &comms;
  w->data = std::make_unique<CaseData>(c, comms.size());
  for (int r = 0; r < comms.size(); ++r)
    w->coll.push_back(std::make_unique<CollRank>(*w->data, r, comms[r]));
  w->name = c.describe(comms.size());
  return w;
}

std::unique_ptr<Work> p2pWork(const Comms& comms, const std::vector<Msg>& msgs, uint64_t seed,
                              std::string name) {
  auto w = std::make_unique<Work>();
  w->comms = &comms;
  for (int r = 0; r < comms.size(); ++r)
    w->p2p.push_back(std::make_unique<P2pRank>(msgs, r, r % 2 == 0, seed));
  w->name = std::move(name);
  return w;
}

// Drive::Group: everything in one ncclGroupStart/End from this thread, work by work, rank
// by rank. Drive::ThreadGroups: thread r issues rank r of every work (of every
// communicator that has a rank r) in one group of its own, as a thread driving one device
// with several communicators does.
void runWorks(std::vector<std::unique_ptr<Work>>& works, Drive drive, Failures& fail,
              const std::string& label) {
  int maxRanks = 0;
  for (auto& w : works) {
    w->res.assign(w->comms->size(), ncclSuccess);
    maxRanks = std::max(maxRanks, w->comms->size());
  }
  auto issue = [&](Work& w, int r) {
    w.res[r] = w.data ? w.coll[r]->issue() : w.p2p[r]->issue((*w.comms)[r]);
  };
  std::vector<ncclResult_t> ends(maxRanks, ncclSuccess);
  if (drive == Drive::ThreadGroups) {
    runThreads(maxRanks, [&](int r) {
      ncclGroupStart();
      for (auto& w : works)
        if (r < w->comms->size()) issue(*w, r);
      ends[r] = ncclGroupEnd();
    });
  } else {
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (auto& w : works)
      for (int r = 0; r < w->comms->size(); ++r) issue(*w, r);
    ends[0] = ncclGroupEnd();
  }
  for (ncclResult_t end : ends)
    if (end != ncclSuccess)
      fail.add(label + " [" + driveName(drive) + "]: ncclGroupEnd returned " +
               ncclGetErrorString(end));
  for (auto& w : works)
    for (int r = 0; r < w->comms->size(); ++r) {
      std::string what = label + ": " + w->name + " rank " + std::to_string(r) + ": ";
      if (w->res[r] != ncclSuccess)
        fail.add(what + "returned " + ncclGetErrorString(w->res[r]));
      else if (std::string why = w->data ? w->coll[r]->check() : w->p2p[r]->check(); !why.empty())
        fail.add(what + why);
    }
}

// Splits `parent` by color (NCCL_SPLIT_NOCOLOR: none) and key; returns each color's
// communicators ordered by their new rank.
std::vector<std::unique_ptr<Comms>> split(const Comms& parent, const std::vector<int>& color,
                                          const std::vector<int>& key, int nColors) {
  const int n = parent.size();
  std::vector<ncclComm_t> sub(n, nullptr);
  std::vector<ncclResult_t> res(n);
  runThreads(n,
             [&](int r) { res[r] = ncclCommSplit(parent[r], color[r], key[r], &sub[r], nullptr); });
  for (int r = 0; r < n; ++r) REQUIRE(res[r] == ncclSuccess);
  std::vector<std::vector<ncclComm_t>> byColor(nColors);
  for (int r = 0; r < n; ++r) {
    if (color[r] == NCCL_SPLIT_NOCOLOR) {
      CHECK(sub[r] == nullptr);
      continue;
    }
    int count = 0, rank = -1;
    REQUIRE(ncclCommCount(sub[r], &count) == ncclSuccess);
    REQUIRE(ncclCommUserRank(sub[r], &rank) == ncclSuccess);
    auto& v = byColor[color[r]];
    if (v.size() < static_cast<size_t>(count)) v.resize(count, nullptr);
    REQUIRE(rank < count);
    REQUIRE(v[rank] == nullptr);
    v[rank] = sub[r];
  }
  std::vector<std::unique_ptr<Comms>> out;
  for (auto& v : byColor) out.push_back(std::make_unique<Comms>(v));
  return out;
}

}  // namespace

TEST_CASE("one group: collectives and send/recv of several datatypes on several communicators",
          "[coll_group]") {
  TestEnv env;
  Failures fail;
  for (int round = 0; round < 4; ++round) {
    Channels channels(round >= 2 ? 2 * (round - 1) : 0);
    Comms a(4), b(3), c(2);
    const uint64_t s = 100 * (round + 1);
    const size_t big = round == 1 ? 5 * kRingSlot + 3 : 37;
    std::vector<std::unique_ptr<Work>> works;
    works.push_back(collWork(a, mk(Coll::AllReduce, ncclInt32, Op::Sum, big, 0, false, s + 1)));
    works.push_back(collWork(b, mk(Coll::AllGather, ncclUint8, Op::Copy, big + 1, 0, true, s + 2)));
    works.push_back(
        collWork(a, mk(Coll::Broadcast, ncclFloat16, Op::Copy, big, 2, round == 0, s + 3)));
    works.push_back(p2pWork(a,
                            {{0, 1, ncclFloat64, big},
                             {1, 0, ncclInt8, 2 * big + 1},
                             {2, 2, ncclBfloat16, big + 5},
                             {3, 1, ncclFloat32, 9},
                             {2, 3, ncclFloat8e5m2, big},
                             {3, 3, ncclUint64, 1}},
                            s + 4, "p2p mix on a"));
    works.push_back(
        collWork(c, mk(Coll::ReduceScatter, ncclBfloat16, Op::Max, big, 0, round == 1, s + 5)));
    works.push_back(collWork(b, mk(Coll::AlltoAll, ncclFloat32, Op::Copy, big, 0, false, s + 6)));
    works.push_back(
        collWork(a, mk(Coll::ReduceScatter, ncclFloat8e4m3, Op::Avg, big, 0, true, s + 7)));
    works.push_back(collWork(b, mk(Coll::Reduce, ncclInt64, Op::Prod, big, 1, false, s + 8)));
    works.push_back(p2pWork(b,
                            {{0, 1, ncclUint32, big},
                             {1, 2, ncclUint32, big},
                             {2, 0, ncclUint32, big},
                             {0, 0, ncclFloat16, 3}},
                            s + 9, "p2p ring on b"));
    works.push_back(collWork(c, mk(Coll::Gather, ncclInt32, Op::Copy, big, 1, round == 2, s + 10)));
    works.push_back(
        collWork(a, mk(Coll::AllReduce, ncclFloat64, Op::PreMulHost, big, 0, true, s + 11)));
    works.push_back(collWork(c, mk(Coll::Scatter, ncclUint8, Op::Copy, big, 0, false, s + 12)));
    works.push_back(collWork(b, mk(Coll::AllReduce, ncclFloat16, Op::Avg, big, 0, false, s + 13)));
    runWorks(works, round % 2 ? Drive::ThreadGroups : Drive::Group, fail,
             "round " + std::to_string(round));
  }
  fail.report();
}

TEST_CASE("a PreMulSum operator destroyed inside the group still applies to its call",
          "[coll_group]") {
  // NCCL allows ncclRedOpDestroy as soon as the last call given the operator has returned;
  // the operator is resolved when the call is made, not at ncclGroupEnd.
  TestEnv env;
  Comms comms(2);
  std::vector<std::vector<float>> buf(2, std::vector<float>(1000));
  std::vector<ncclRedOp_t> ops(2);
  for (int r = 0; r < 2; ++r)
    for (size_t k = 0; k < buf[r].size(); ++k) buf[r][k] = static_cast<float>(r + 1 + k % 7);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    float scalar = 2.0f;
    REQUIRE(ncclRedOpCreatePreMulSum(&ops[r], &scalar, ncclFloat32, ncclScalarHostImmediate,
                                     comms[r]) == ncclSuccess);
    REQUIRE(ncclAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), ncclFloat32, ops[r],
                          comms[r], nullptr) == ncclSuccess);
    REQUIRE(ncclRedOpDestroy(ops[r], comms[r]) == ncclSuccess);
  }
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < 2; ++r)
    for (size_t k = 0; k < buf[r].size(); ++k) {
      const float want = 2.0f * (1 + k % 7) + 2.0f * (2 + k % 7);
      if (buf[r][k] != want) FAIL("rank " << r << " element " << k << ": " << buf[r][k]);
    }
}

TEST_CASE(
    "one thread driving several communicators, group after group: hand-offs that poll "
    "and that sleep",
    "[coll_group]") {
  // ncclGroupEnd hands every communicator but the last to its engine thread and runs the last
  // itself; the engine threads poll for their next batch for a while, then sleep
  // (src/exec/batch_thread.h). Pauses shorter and longer than that poll take both paths, and
  // every group's result must be its own (a stale result or a lost wake-up fails or hangs).
  TestEnv env;
  constexpr int kRanks = 3;
  Comms comms(kRanks);
  const std::chrono::microseconds pauses[] = {
      std::chrono::microseconds(0), std::chrono::microseconds(30), std::chrono::microseconds(3000)};
  std::vector<std::vector<int32_t>> send(kRanks), recv(kRanks);
  for (int iter = 0; iter < 150; ++iter) {
    const size_t count = iter % 5 == 4 ? 3 * kRingSlot / sizeof(int32_t) + 1 : 13;
    for (int r = 0; r < kRanks; ++r) {
      send[r].assign(count, 0);
      recv[r].assign(count, -1);
      for (size_t k = 0; k < count; ++k) send[r][k] = (r + 1) * 1000 + iter + static_cast<int>(k);
    }
    std::this_thread::sleep_for(pauses[iter % 3]);
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      REQUIRE(ncclAllReduce(send[r].data(), recv[r].data(), count, ncclInt32, ncclSum, comms[r],
                            nullptr) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      for (size_t k = 0; k < count; ++k) {
        const int32_t want = 6000 + kRanks * (iter + static_cast<int>(k));
        if (recv[r][k] != want)
          FAIL("group " << iter << ", rank " << r << ", element " << k << ": " << recv[r][k]
                        << " instead of " << want);
      }
  }
}

TEST_CASE("split communicators run collectives, alone and grouped with their parent",
          "[coll_group]") {
  TestEnv env;
  Failures fail;
  Comms parent(8);
  // Even ranks form color 0, odd ranks color 1, in reverse order of their parent rank;
  // rank 5 opts out.
  std::vector<int> color(8), key(8);
  for (int r = 0; r < 8; ++r) {
    color[r] = r == 5 ? NCCL_SPLIT_NOCOLOR : r % 2;
    key[r] = -r;
  }
  auto subs = split(parent, color, key, 2);
  REQUIRE(subs[0]->size() == 4);
  REQUIRE(subs[1]->size() == 3);
  // Sub rank 0 of color 0 is parent rank 6 (largest rank, smallest key).
  for (int c = 0; c < 2; ++c) {
    std::vector<CollCase> cases;
    int rot = c;
    for (Coll coll : kAllColls)
      for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclBfloat16}) {
        cases.push_back(mk(coll, t, kReduceOps[rot % 7], rot % 4 == 0 ? kRingSlot + 1 : 33,
                           rot % subs[c]->size(), rot % 2 == 0, 300 + rot));
        ++rot;
      }
    runCases(*subs[c], cases, c == 0 ? Drive::Threads : Drive::Group, fail, c ? "odd " : "even ");
  }
  // A split of a split: the even ranks in halves, made on 4 channels (channel bounds are read
  // when a communicator is made), so that groups below mix them with 1-channel parents.
  auto quarters = [&] {
    Channels four(4);
    return split(*subs[0], {0, 0, 1, 1}, {0, 0, 0, 0}, 2);
  }();
  REQUIRE(quarters[0]->size() == 2);
  // Parent, children and grandchildren in one group.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<Work>> works;
    const uint64_t s = 700 + 50 * round;
    works.push_back(
        collWork(parent, mk(Coll::AllReduce, ncclFloat32, Op::Sum, 1000, 0, round == 0, s)));
    works.push_back(
        collWork(*subs[0], mk(Coll::AllReduce, ncclUint32, Op::Max, 999, 0, false, s + 1)));
    works.push_back(
        collWork(*subs[1], mk(Coll::Broadcast, ncclFloat64, Op::Copy, 1001, 2, true, s + 2)));
    works.push_back(
        collWork(*quarters[0], mk(Coll::AllGather, ncclInt64, Op::Copy, 65, 0, false, s + 3)));
    works.push_back(
        collWork(*quarters[1], mk(Coll::ReduceScatter, ncclFloat16, Op::Sum, 65, 0, true, s + 4)));
    works.push_back(p2pWork(parent,
                            {{0, 7, ncclInt32, 500}, {7, 0, ncclInt32, 500}, {3, 3, ncclUint8, 7}},
                            s + 5, "p2p on parent"));
    works.push_back(collWork(parent, mk(Coll::AlltoAll, ncclUint8, Op::Copy, 17, 0, false, s + 6)));
    runWorks(works, round % 2 ? Drive::ThreadGroups : Drive::Group, fail,
             "nested round " + std::to_string(round));
  }
  fail.report();
}

// ---- forked processes ---------------------------------------------------------------------

namespace {

// One forked rank's communicators per channel count. A communicator reads its channel bounds
// when it is made, so each is split from `base` under its count's Channels; every rank asks
// for the counts in the same order (the case lists are alike), so the splits pair up.
class ChannelComms {
 public:
  ChannelComms(ncclComm_t base, int rank) : base_(base), rank_(rank) {}
  ChannelComms(const ChannelComms&) = delete;
  ChannelComms& operator=(const ChannelComms&) = delete;
  ~ChannelComms() { (void)finish(false); }

  // Null if the split failed.
  ncclComm_t get(int nch) {
    for (auto& [n, c] : comms_)
      if (n == nch) return c;
    Channels channels(nch);
    ncclComm_t c = nullptr;
    if (ncclCommSplit(base_, 0, rank_, &c, nullptr) != ncclSuccess) return nullptr;
    comms_.push_back({nch, c});
    return c;
  }

  // Destroys them; with `settle`, after an all-gather on each: a rank's last act may be a
  // send whose data its peer has not read yet, and the all-gather completes only once every
  // rank is past it. (Not after a failure: the peers may be gone.)
  bool finish(bool settle) {
    bool ok = true;
    for (auto& [n, c] : comms_) {
      int size = 0;
      if (settle && ncclCommCount(c, &size) == ncclSuccess) {
        std::vector<int32_t> mine(1, rank_), all(static_cast<size_t>(size), -1);
        ok = ncclAllGather(mine.data(), all.data(), 1, ncclInt32, c, nullptr) == ncclSuccess && ok;
      }
      ok = ncclCommDestroy(c) == ncclSuccess && ok;
    }
    comms_.clear();
    return ok;
  }

 private:
  ncclComm_t base_;
  int rank_;
  std::vector<std::pair<int, ncclComm_t>> comms_;
};

// Runs `cases` (channels, case) as rank `rank` of `n` on the split children of `byChannels`,
// exact data: the number of failed cases, each named on stderr after `tag`. Stops at the first
// that returns an error, since the other ranks may then wait for this one.
int runOnChannels(const std::vector<std::pair<int, CollCase>>& cases, int n, int rank,
                  ChannelComms& byChannels, const char* tag) {
  int bad = 0;
  for (const auto& [nch, c] : cases) {
    ncclComm_t onChannels = byChannels.get(nch);
    if (!onChannels) {
      std::fprintf(stderr, "[%s ch=%d] rank %d: ncclCommSplit failed\n", tag, nch, rank);
      return bad + 1;
    }
    CaseData data(c, n);
    CollRank me(data, rank, onChannels);
    ncclResult_t r = me.issue();
    std::string why =
        r != ncclSuccess ? std::string("returned ") + ncclGetErrorString(r) : me.check();
    if (!why.empty()) {
      std::fprintf(stderr, "[%s ch=%d] %s rank %d: %s\n", tag, nch, c.describe(n).c_str(), rank,
                   why.c_str());
      ++bad;
      if (r != ncclSuccess) break;
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("every collective from forked processes over shm", "[coll_fork]") {
  TestEnv env;
  for (int n : {2, 3, 4}) {
    // The case list: every collective with every datatype on one and on two channels, ops,
    // roots and boundary counts rotating; every collective twice on four channels.
    std::vector<std::pair<int, CollCase>> cases;  // (channels, case)
    int rot = n;
    for (int nch : {1, 2, 4})
      for (Coll coll : kAllColls)
        for (int k = 0; k < (nch == 4 ? 2 : 12); ++k) {
          ncclDataType_t t = kAllTypes[(rot * 5) % 12];
          std::vector<size_t> counts = countsFor(coll, t, n, nch);
          CollCase c = mk(coll, t, kReduceOps[rot % 7], counts[(rot * 7) % counts.size()], rot % n,
                          rot % 2 == 0, 4000 + rot);
          c.nullUnused = rot % 3 == 0;
          cases.push_back({nch, c});
          ++rot;
        }
    std::vector<Msg> msgs;
    for (int r = 0; r < n; ++r) {
      msgs.push_back({r, (r + 1) % n, ncclFloat32, 3 * kP2pSlot + 1});
      msgs.push_back({r, r, ncclInt8, 100});
      msgs.push_back({(r + 1) % n, r, ncclFloat16, 17});
    }
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      ChannelComms byChannels(comm, rank);
      int bad = runOnChannels(cases, n, rank, byChannels, "fork");
      if (!byChannels.finish(bad == 0)) ++bad;
      for (int round = 0; round < 2 && bad == 0; ++round) {
        P2pRank me(msgs, rank, (rank + round) % 2 == 0, 60 + round);
        ncclResult_t r = me.issue(comm);
        std::string why =
            r != ncclSuccess ? std::string("returned ") + ncclGetErrorString(r) : me.check();
        if (!why.empty()) {
          std::fprintf(stderr, "[fork] p2p n=%d rank %d: %s\n", n, rank, why.c_str());
          ++bad;
        }
      }
      // One group per process: several collectives and the messages together.
      if (bad == 0) {
        std::vector<std::unique_ptr<CaseData>> data;
        std::vector<std::unique_ptr<CollRank>> mine;
        for (int k = 0; k < 6; ++k) {
          data.push_back(std::make_unique<CaseData>(
              mk(kAllColls[(k * 4 + n) % 9], kAllTypes[(k * 7 + n) % 12], kReduceOps[k % 7],
                 k % 2 ? 3 * kRingSlot / 2 + k : 11 + k, k % n, k % 3 == 0, 7000 + k),
              n));
          mine.push_back(std::make_unique<CollRank>(*data.back(), rank, comm));
        }
        P2pRank p2p(msgs, rank, rank % 2 == 1, 80);
        ncclResult_t r = ncclGroupStart();
        for (auto& m : mine)
          if (r == ncclSuccess) r = m->issue();
        if (r == ncclSuccess) r = p2p.issue(comm);
        ncclResult_t end = ncclGroupEnd();
        if (r == ncclSuccess) r = end;
        for (size_t k = 0; k <= mine.size(); ++k) {
          std::string why = r != ncclSuccess  ? std::string("returned ") + ncclGetErrorString(r)
                            : k < mine.size() ? mine[k]->check()
                                              : p2p.check();
          if (!why.empty()) {
            std::fprintf(stderr, "[fork group] %s rank %d: %s\n",
                         k < mine.size() ? data[k]->c.describe(n).c_str() : "p2p", rank,
                         why.c_str());
            ++bad;
          }
        }
      }
      if (ncclCommDestroy(comm) != ncclSuccess) ++bad;
      return bad > 0 ? 1 : 0;
    });
    INFO("ranks " << n);
    CHECK(failed == 0);
  }
}

// ---- tree all-reduce ----------------------------------------------------------------------

TEST_CASE("tree all-reduce (NCCL_ALGO=Tree): every datatype x op on 1..8 ranks, threads",
          "[coll_tree]") {
  ScopedEnv algo("NCCL_ALGO", "Tree");
  {
    // The tuner takes the tree for an all-reduce, and falls back to the ring (with a WARN) for
    // an all-gather, which no tree builds.
    TestEnv env;
    CapturedLog log;
    ScopedEnv debug("NCCL_DEBUG", "INFO");
    ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "TUNING");
    ringcc::resetLogging();
    Comms comms(3);
    std::vector<CollCase> cases = {mk(Coll::AllReduce, ncclFloat32, Op::Sum, 1000, 0, false, 1),
                                   mk(Coll::AllGather, ncclInt32, Op::Copy, 10, 0, false, 2)};
    Failures fail;
    runCases(comms, cases, Drive::Threads, fail, "");
    fail.report();
    INFO(log.text());
    CHECK(log.contains("AllReduce: 1000 x 4 bytes, 3 ranks: algorithm Tree"));
    CHECK(log.contains("AllGather: 10 x 4 bytes, 3 ranks: algorithm Ring"));
    CHECK(log.contains("NCCL_ALGO: AllGather: no algorithm NCCL_ALGO allows runs it"));
  }
  ringcc::resetLogging();
  Failures fail;
  reduceMatrix(Coll::AllReduce, fail);
  countSweep(Coll::AllReduce, {2, 3, 8}, {ncclFloat32, ncclBfloat16, ncclInt8, ncclFloat64},
             {Op::Sum, Op::Avg, Op::Max, Op::PreMulHost, Op::Prod}, fail);
  fail.report();
}

namespace {

// Peer buffers this process has mapped read-only (the Direct protocol's mapped references):
// /proc/self/maps lines of ringcc's memfds, mapped "r--s", larger than the one-page probe.
int mappedPeerBuffers() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
        std::strstr(line, "memfd:ringcc-mem") && std::strcmp(perms, "r--s") == 0 && hi - lo > 4096)
      ++n;
  }
  std::fclose(f);
  return n;
}

}  // namespace

TEST_CASE("processes whose buffers come from ncclMemAlloc: read in place, exact", "[coll_fork]") {
  TestEnv env;
  ScopedEnv direct("NCCL_PROTO", "Direct");
  ScopedEnv buffsize("NCCL_BUFFSIZE", std::nullopt);  // the default: slices of 16 KiB and more
  // Shared memory between the processes, with the default references (the suite's _ucx and
  // _direct variants set these for the other cases).
  ScopedEnv net("RINGCC_NET", std::nullopt), refs("RINGCC_SHM_REFS", std::nullopt),
      map("RINGCC_SHM_MAP", std::nullopt);
  for (int n : {2, 3}) {
    // Slices of 16 KiB and more go by reference; the small case and the 4-channel split
    // (smaller slices) mix references and copies.
    std::vector<std::pair<int, CollCase>> cases;
    int rot = n;
    for (int nch : {1, 4})
      for (Coll coll : kAllColls) {
        for (size_t count : {size_t{100000}, size_t{777}}) {
          cases.push_back({nch, mk(coll, ncclFloat32, kReduceOps[rot % 7], count, rot % n,
                                   rot % 2 == 0, 7000 + rot)});
          ++rot;
        }
      }
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      setRegionsFromNcclMemAlloc(true);
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      ChannelComms byChannels(comm, rank);
      int bad = runOnChannels(cases, n, rank, byChannels, "memalloc");
      if (!byChannels.finish(bad == 0)) ++bad;
      // Every rank received large slices from a peer's ncclMemAlloc buffers: mapped here.
      if (bad == 0 && mappedPeerBuffers() <= 0) {
        std::fprintf(stderr, "[memalloc] rank %d mapped no peer buffer\n", rank);
        ++bad;
      }
      if (ncclCommDestroy(comm) != ncclSuccess) ++bad;
      return bad > 0 ? 1 : 0;
    });
    INFO("ranks " << n);
    CHECK(failed == 0);
  }
}

// Its own tag: a process that made communicators before (the threads case above, under
// RINGCC_NET=ucx) must not fork with UCX set up.
TEST_CASE("tree all-reduce (NCCL_ALGO=Tree) in forked processes: one host, and hosts of two",
          "[coll_tree_fork]") {
  TestEnv env;
  ScopedEnv algo("NCCL_ALGO", "Tree");
  // Hosts of two (NCCL_HOSTID per process pair): a double binary tree across 3 hosts over UCX,
  // chains of two inside them over shm.
  for (int perHost : {0, 2}) {
    const int n = perHost ? 6 : 4;
    std::vector<std::pair<int, CollCase>> cases;  // (channels, case)
    int rot = n + perHost;
    for (int nch : {1, 2, 4})
      for (int k = 0; k < 6; ++k) {
        ncclDataType_t t = kAllTypes[(rot * 5) % 12];
        std::vector<size_t> counts = countsFor(Coll::AllReduce, t, n, nch);
        cases.push_back({nch, mk(Coll::AllReduce, t, kReduceOps[rot % 7],
                                 counts[(rot * 7) % counts.size()], 0, rot % 2 == 0, 9000 + rot)});
        ++rot;
      }
    ncclUniqueId id = newUniqueId();
    int failed = runProcesses(n, [&](int rank) {
      if (perHost)
        setenv("NCCL_HOSTID", ("tree-host-" + std::to_string(rank / perHost)).c_str(), 1);
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
      ChannelComms byChannels(comm, rank);
      int bad = runOnChannels(cases, n, rank, byChannels, "tree fork");
      // A tree rank's last act is a send down: finish() runs a ring all-gather (the ring under
      // NCCL_ALGO=Tree) on each child before destroying it, so the tree's data is consumed
      // before any rank tears its connections down.
      if (!byChannels.finish(bad == 0)) ++bad;
      if (ncclCommDestroy(comm) != ncclSuccess) ++bad;
      return bad > 0 ? 1 : 0;
    });
    INFO("ranks " << n << ", " << (perHost ? "hosts of 2" : "one host"));
    CHECK(failed == 0);
  }
}

// ---- large --------------------------------------------------------------------------------

TEST_CASE("32 MiB all-reduce, all-gather and reduce-scatter", "[coll_large]") {
  // The default NCCL_BUFFSIZE (4 MiB) and channel choice: 32 MiB picks several channels.
  ScopedEnv timeout("NCCL_TIMEOUT", "60000");
  Failures fail;
  const size_t mib32 = size_t{32} << 20;
  {
    Comms comms(2);
    runCases(comms, {mk(Coll::AllReduce, ncclFloat32, Op::Sum, mib32 / 4 + 3, 0, false, 1)},
             Drive::Threads, fail);
    runCases(comms, {mk(Coll::AllReduce, ncclFloat32, Op::Avg, mib32 / 4, 0, true, 2)},
             Drive::Group, fail);
    runCases(comms, {mk(Coll::AllGather, ncclFloat32, Op::Copy, mib32 / 4 / 2 + 1, 0, false, 3)},
             Drive::Threads, fail);
    runCases(comms, {mk(Coll::ReduceScatter, ncclFloat32, Op::Max, mib32 / 4 / 2 + 5, 0, true, 4)},
             Drive::Group, fail);
  }
  {
    Comms comms(3);
    runCases(comms, {mk(Coll::AllReduce, ncclFloat32, Op::Sum, mib32 / 4 + 1, 0, true, 5)},
             Drive::Group, fail);
  }
  fail.report();
}

// ---- more channels, non-blocking communicators ------------------------------------------

TEST_CASE("every collective on 8 and 32 channels: most channels get little or nothing",
          "[coll_channels]") {
  TestEnv env;
  Failures fail;
  int rot = 0;
  for (int nch : {8, 32}) {
    Channels channels(nch);
    Comms comms(3);
    std::vector<CollCase> cases;
    for (Coll coll : kAllColls)
      for (size_t count : countsFor(coll, ncclFloat16, 3, nch)) {
        CollCase c = mk(coll, ncclFloat16, kReduceOps[rot % 7], count, rot % 3, rot % 2, 600 + rot);
        c.nullUnused = rot % 5 == 0;
        cases.push_back(c);
        ++rot;
      }
    runCases(comms, cases, nch == 8 ? Drive::Group : Drive::ThreadGroups, fail,
             ("ch=" + std::to_string(nch) + " ").c_str());
  }
  fail.report();
}

TEST_CASE("non-blocking communicators run collectives", "[coll_channels]") {
  // A call on a non-blocking communicator may answer ncclInProgress; the result is valid
  // once ncclCommGetAsyncError says ncclSuccess.
  TestEnv env;
  Failures fail;
  const int n = 3;
  ncclUniqueId id = newUniqueId();
  std::vector<ncclComm_t> raw(n, nullptr);
  std::vector<ncclResult_t> res(n);
  runThreads(n, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    res[r] = ncclCommInitRankConfig(&raw[r], n, id, r, &config);
    if (res[r] == ncclInProgress || res[r] == ncclSuccess)
      res[r] = ringcc::test::waitCommReady(raw[r]);
  });
  for (int r = 0; r < n; ++r) REQUIRE(res[r] == ncclSuccess);
  Comms comms(raw);
  int rot = 0;
  for (Coll coll : kAllColls)
    for (Drive drive : {Drive::Threads, Drive::Group}) {
      CaseData data(mk(coll, ncclBfloat16, kReduceOps[rot % 7], 3 * kRingSlot / 2 + rot, rot % n,
                       rot % 2, 650 + rot),
                    n);
      ++rot;
      std::vector<std::unique_ptr<CollRank>> ranks;
      for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<CollRank>(data, r, comms[r]));
      if (drive == Drive::Threads) {
        runThreads(n, [&](int r) {
          res[r] = ranks[r]->issue();
          if (res[r] == ncclInProgress) res[r] = ringcc::test::waitCommReady(comms[r]);
        });
      } else {
        ncclGroupStart();
        for (int r = 0; r < n; ++r) res[r] = ranks[r]->issue();
        ncclResult_t end = ncclGroupEnd();
        for (int r = 0; r < n; ++r) {
          if (res[r] == ncclSuccess && end != ncclSuccess) res[r] = end;
          if (res[r] == ncclInProgress) res[r] = ringcc::test::waitCommReady(comms[r]);
        }
      }
      for (int r = 0; r < n; ++r) {
        std::string what = std::string("[") + driveName(drive) + "] " + data.c.describe(n) +
                           " rank " + std::to_string(r) + ": ";
        if (res[r] != ncclSuccess)
          fail.add(what + "returned " + ncclGetErrorString(res[r]));
        else if (std::string why = ranks[r]->check(); !why.empty())
          fail.add(what + why);
      }
    }
  fail.report();
}
