// Schedules: builders, the runner, and every collective simulated across 1..32 ranks with
// exact integer data, in and out of place, on 1, 2 and 4 channels with different rings.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/prims.h"
#include "src/sched/builders.h"
#include "src/sched/program.h"
#include "src/sched/simulator.h"
#include "support/test_env.h"

using namespace ringcc;

namespace {

constexpr size_t kSlice = 16;  // elements per slot in most simulations
constexpr size_t kChunk = 32;  // two slots per chunk
constexpr uint64_t kUntouched = 0xEEEEEEEEEEEEEEEEull;

// Distinct per rank and element: the low 32 bits sum to 2^n - 1 exactly once each rank
// contributes once; the high bits make every element differ.
uint64_t value(int rank, size_t idx) {
  return (1ull << rank) | ((uint64_t)(idx * 2654435761u + 12345) << 32);
}

Bytes toBytes(const std::vector<uint64_t>& v) {
  Bytes b(v.size() * 8);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint64_t> fromBytes(const Bytes& b) {
  std::vector<uint64_t> v(b.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Ring orders that differ per channel, so blocks indexed by rank (not ring position) are
// exercised: identity, reversed, a stride permutation, a seeded shuffle.
std::vector<std::vector<int>> ringsFor(int n, int nChannels) {
  std::vector<std::vector<int>> rings(nChannels, std::vector<int>(n));
  for (int c = 0; c < nChannels; c++) {
    auto& r = rings[c];
    std::iota(r.begin(), r.end(), 0);
    if (c % 4 == 1) std::reverse(r.begin(), r.end());
    if (c % 4 == 2) {
      int k = n / 2 + 1;
      while (std::gcd(k, n) != 1) k++;
      for (int i = 0; i < n; i++) r[i] = (int)((int64_t)i * k % n);
    }
    if (c % 4 == 3) std::shuffle(r.begin(), r.end(), std::mt19937(n * 7 + c));
  }
  return rings;
}

// The expected outputs of a uint64 sum collective, computed directly.
std::vector<std::vector<uint64_t>> expected(const SimSpec& s,
                                            const std::vector<std::vector<uint64_t>>& in,
                                            const std::vector<std::vector<uint64_t>>& out0) {
  const int n = s.nranks;
  const size_t c = s.count;
  std::vector<std::vector<uint64_t>> out(n);
  for (int r = 0; r < n; r++) {
    out[r].assign(simOutputElems(s, r), kUntouched);
    auto& o = out[r];
    switch (s.coll) {
      case Coll::AllReduce:
        for (size_t k = 0; k < c; k++)
          for (int q = 0; q < n; q++) o[k] = (q == 0 ? 0 : o[k]) + in[q][k];
        break;
      case Coll::ReduceScatter:
        for (size_t k = 0; k < c; k++) {
          o[k] = 0;
          for (int q = 0; q < n; q++) o[k] += in[q][r * c + k];
        }
        break;
      case Coll::AllGather:
        for (int q = 0; q < n; q++)
          for (size_t k = 0; k < c; k++) o[q * c + k] = in[q][k];
        break;
      case Coll::Broadcast:
        for (size_t k = 0; k < c; k++) o[k] = in[s.root][k];
        break;
      case Coll::Reduce:
        if (r != s.root) {
          // Untouched: the initial output, which in place is the rank's own input.
          o = s.inPlace ? in[r] : out0[r];
          break;
        }
        for (size_t k = 0; k < c; k++) {
          o[k] = 0;
          for (int q = 0; q < n; q++) o[k] += in[q][k];
        }
        break;
      case Coll::AllToAll:
        for (int q = 0; q < n; q++)
          for (size_t k = 0; k < c; k++) o[q * c + k] = in[q][r * c + k];
        break;
      case Coll::Gather:
        if (r == s.root)
          for (int q = 0; q < n; q++)
            for (size_t k = 0; k < c; k++) o[q * c + k] = in[q][k];
        break;
      case Coll::Scatter:
        for (size_t k = 0; k < c; k++) o[k] = in[s.root][r * c + k];
        break;
      default:
        break;
    }
  }
  return out;
}

// Simulates `s` (uint64 sum) and checks every rank's output exactly. Returns false on the
// first failure, with Catch2 context describing the case.
// A uint64-sum case of `s` with per-rank distinct inputs (offset by `salt`) and the
// expected outputs.
struct Uint64Case {
  SimCase sim;
  std::vector<std::vector<uint64_t>> want;
};

Uint64Case makeCase(SimSpec s, int salt = 0) {
  s.type = ncclUint64;
  s.op = ncclSum;
  if (s.rings.empty()) s.rings = ringsFor(s.nranks, s.nChannels);
  std::vector<std::vector<uint64_t>> in(s.nranks), out0(s.nranks);
  Uint64Case c;
  c.sim.inputs.resize(s.nranks);
  c.sim.outputs.resize(s.nranks);
  for (int r = 0; r < s.nranks; r++) {
    in[r].resize(simInputElems(s, r));
    for (size_t k = 0; k < in[r].size(); k++) in[r][k] = value(r, k + 7919 * salt);
    out0[r].assign(simOutputElems(s, r), kUntouched);
    c.sim.inputs[r] = toBytes(in[r]);
    c.sim.outputs[r] = toBytes(out0[r]);
  }
  c.want = expected(s, in, out0);
  c.sim.spec = s;
  return c;
}

bool sameOutputs(const std::vector<Bytes>& outputs,
                 const std::vector<std::vector<uint64_t>>& want) {
  for (size_t r = 0; r < want.size(); r++) {
    auto got = fromBytes(outputs[r]);
    if (got != want[r]) {
      size_t k = 0;
      while (k < got.size() && k < want[r].size() && got[k] == want[r][k]) k++;
      INFO("rank " << r << " first difference at element " << k);
      CHECK(got == want[r]);
      return false;
    }
  }
  return true;
}

bool runCase(SimSpec spec) {
  Uint64Case c = makeCase(spec);
  const SimSpec& s = c.sim.spec;
  SimResult res = simulate(s, c.sim.inputs, c.sim.outputs);
  INFO(collName(s.coll) << " n=" << s.nranks << " count=" << s.count << " channels=" << s.nChannels
                        << " inPlace=" << s.inPlace << " root=" << s.root);
  INFO(res.error);
  if (res.result != ncclSuccess) {
    CHECK(res.result == ncclSuccess);
    return false;
  }
  return sameOutputs(res.outputs, c.want);
}

// Counts around the interesting boundaries for n ranks: 0, 1, 7, a slot -1/+1, a chunk,
// several loops (all-reduce loops over n chunks), and one large.
std::vector<size_t> countsFor(Coll coll, int n, size_t large) {
  const size_t loop = coll == Coll::AllReduce ? n * kChunk : kChunk;
  return {0, 1, 7, kSlice - 1, kSlice + 1, kChunk, 3 * loop + 5, large};
}

// Runs one collective over ranks 1..32 (every count for the small and boundary rank counts,
// a rotating sample for the rest), 1/2/4 channels, in and out of place.
void sweep(Coll coll, size_t large) {
  const std::vector<int> fullRanks = {1, 2, 3, 4, 5, 8, 32};
  int sampled = 0, failures = 0;
  for (int n = 1; n <= 32; n++) {
    bool full = std::find(fullRanks.begin(), fullRanks.end(), n) != fullRanks.end();
    auto counts = countsFor(coll, n, large);
    for (size_t ci = 0; ci < counts.size(); ci++) {
      for (int nch : {1, 2, 4}) {
        for (int inPlace = 0; inPlace < 2; inPlace++) {
          if (inPlace && coll == Coll::AllToAll) continue;
          // Sampled rank counts: each (count, channels, in-place) cell for some n only.
          if (!full && (n + ci * 3 + nch + inPlace) % 5 != 0) continue;
          // The large count only on a few rank counts, to keep the suite fast.
          if (ci + 1 == counts.size() && n != 2 && n != 5 && n != 32) continue;
          SimSpec s;
          s.coll = coll;
          s.count = counts[ci];
          s.nranks = n;
          s.nChannels = nch;
          s.inPlace = inPlace;
          s.root = (n * 5 + 3) % n;
          s.sliceElems = kSlice;
          // Mostly two slots per chunk; sometimes one and a half (a partial slice per chunk).
          s.chunkElems = (n + ci) % 4 == 3 ? kChunk - kSlice / 2 : kChunk;
          s.slicesPerTurn = (n + nch) % 3 == 0 ? ~0u : 1 + (unsigned)(n % 3);
          sampled++;
          if (!runCase(s) && ++failures > 3) return;
        }
      }
    }
  }
  INFO("cases run: " << sampled);
  CHECK(sampled > 100);
}

// Flags of every step of one rank's single-lane Program.
std::vector<uint8_t> flagsOf(const Program& p) {
  std::vector<uint8_t> f;
  for (int i = 0; i < p.nSteps; i++) f.push_back(p.steps[i].flags);
  return f;
}

CollDesc desc(Coll coll, int n, int rank, size_t count) {
  CollDesc d;
  d.coll = coll;
  d.count = count;
  d.elemSize = 8;
  d.nranks = n;
  d.rank = rank;
  d.sliceElems = kSlice;
  d.chunkElems = kChunk;
  return d;
}

}  // namespace

// ---------------------------------------------------------------------------------- [sched]

TEST_CASE("ring all-reduce body is send, rrs x n-2, rrcs+post, rcs x n-2, recv", "[sched]") {
  for (int n : {2, 3, 8}) {
    Program p;
    REQUIRE(buildProgram(desc(Coll::AllReduce, n, 1, 1000), &p) == ncclSuccess);
    REQUIRE(p.nLanes == 1);
    REQUIRE(p.nPorts == 2);
    std::vector<uint8_t> want;
    want.push_back(kStepLocal | kStepSend);
    for (int i = 0; i < n - 2; i++) want.push_back(kStepRecv | kStepLocal | kStepSend);
    want.push_back(kStepRecv | kStepLocal | kStepOut | kStepSend | kStepPost);
    for (int i = 0; i < n - 2; i++) want.push_back(kStepRecv | kStepOut | kStepSend);
    want.push_back(kStepRecv | kStepOut);
    CHECK(flagsOf(p) == want);
    // Ports: receive from the previous rank on the ring, send to the next.
    for (int i = 0; i < p.nPorts; i++) {
      const Port& port = p.ports[i];
      CHECK(port.peer == (port.dir == kPortRecv ? 0 : 2 % n));
    }
    // Each ring chunk appears once in the reduce-scatter half and the post lands on the own one.
    const Step& post = p.steps[n - 1];
    CHECK(post.pos == (uint64_t)ringOrigin(1, n, n) * (post.count));
  }
}

TEST_CASE("single rank: one local step with pre and post", "[sched]") {
  for (Coll c : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
    Program p;
    REQUIRE(buildProgram(desc(c, 1, 0, 100), &p) == ncclSuccess);
    CHECK(p.nPorts == 0);
    CHECK(flagsOf(p) == std::vector<uint8_t>{kStepLocal | kStepOut | kStepPost});
  }
  for (Coll c : {Coll::AllGather, Coll::Broadcast}) {
    Program p;
    REQUIRE(buildProgram(desc(c, 1, 0, 100), &p) == ncclSuccess);
    CHECK(flagsOf(p) == std::vector<uint8_t>{kStepLocal | kStepOut});
  }
}

TEST_CASE("program size grows with ranks, not bytes", "[sched]") {
  Program small, big;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 8, 3, 10), &small) == ncclSuccess);
  REQUIRE(buildProgram(desc(Coll::AllReduce, 8, 3, 100000000), &big) == ncclSuccess);
  CHECK(small.nSteps == big.nSteps);
  CHECK(big.lanes[0].nLoops > small.lanes[0].nLoops);
  // Builders are pure: the same description gives the same bytes.
  Program again;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 8, 3, 100000000), &again) == ncclSuccess);
  CHECK(std::memcmp(&big, &again, sizeof(Program)) == 0);
}

TEST_CASE("channel ranges tile the buffer and even chunks cover it", "[sched]") {
  for (uint64_t count : {0ull, 1ull, 7ull, 100ull, 12345ull}) {
    for (int nch : {1, 2, 3, 4, 7}) {
      uint64_t next = 0;
      for (int c = 0; c < nch; c++) {
        ElemRange r = channelRange(count, nch, c, 2);
        CHECK(r.begin == std::min(next, count));
        next = r.begin + r.count;
      }
      CHECK(next == count);
    }
    for (uint64_t parts : {1ull, 3ull, 8ull}) {
      uint64_t loops;
      uint64_t chunk = evenChunk(count, parts, 32, 2, &loops);
      CHECK(chunk <= 32);
      CHECK(parts * loops * chunk >= count);
      if (count) CHECK(parts * (loops - 1) * chunk < count);
    }
  }
}

TEST_CASE("builders reject bad descriptors and programs that do not fit", "[sched]") {
  test::CapturedLog log;
  Program p;
  CollDesc d = desc(Coll::AllReduce, 4, 4, 10);
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d = desc(Coll::AllReduce, 4, 1, 10);
  d.ring = {0, 1, 1, 3};
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  CHECK(log.contains("ring is not a permutation"));
  d = desc(Coll::Broadcast, 4, 1, 10);
  d.root = 9;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d = desc(Coll::AllReduce, 4, 1, 10);
  d.sliceElems = 0;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d = desc(Coll::AllReduce, 4, 1, 10);
  d.channel = 2;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);

  // 128 ranks fit; 129 need more steps (all-reduce) or lanes (all-to-all) than a Program has.
  CHECK(buildProgram(desc(Coll::AllReduce, 128, 5, 10), &p) == ncclSuccess);
  CHECK(buildProgram(desc(Coll::AllReduce, 129, 5, 10), &p) == ncclInvalidUsage);
  CHECK(log.contains("needs more steps than 256"));
  CHECK(buildProgram(desc(Coll::AllToAll, 128, 5, 10), &p) == ncclSuccess);
  CHECK(buildProgram(desc(Coll::AllToAll, 130, 5, 10), &p) == ncclInvalidUsage);

  P2pDesc pd;
  pd.nranks = 2;
  pd.rank = 0;
  pd.sliceElems = 4;
  pd.ops = {P2pOp{true, 0, 5, 0}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);  // send to self without its receive
  pd.ops = {P2pOp{true, 0, 5, 0}, P2pOp{false, 0, 6, 1}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);  // counts differ
  pd.ops = {P2pOp{true, 3, 5, 0}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);
}

TEST_CASE("checkProgram catches inconsistent programs", "[sched]") {
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 4, 0, 100), &p) == ncclSuccess);
  CHECK(checkProgram(p) == nullptr);
  Program q = p;
  q.steps[0].sendPort = q.steps[1].recvPort;  // a send into a receive port
  CHECK(checkProgram(q) != nullptr);
  q = p;
  q.steps[0].flags = kStepSend;  // no source
  CHECK(checkProgram(q) != nullptr);
  // Two lanes on one port must be chained with `after`.
  P2pDesc pd;
  pd.nranks = 2;
  pd.rank = 0;
  pd.sliceElems = 4;
  pd.ops = {P2pOp{true, 1, 5, 0}, P2pOp{true, 1, 9, 1}};
  REQUIRE(buildP2p(pd, &p) == ncclSuccess);
  CHECK(p.nLanes == 2);
  CHECK(p.nPorts == 1);
  CHECK(p.lanes[1].after == 0);
  CHECK(checkProgram(p) == nullptr);
  p.lanes[1].after = kNoLane;
  CHECK(checkProgram(p) != nullptr);
}

namespace {

struct Fifo {
  std::vector<char> slots;
  std::vector<uint64_t> control;  // 8-byte aligned storage for FifoControl
  ConnectorView view;
  Fifo(uint32_t nSlots, uint32_t slotBytes)
      : slots((size_t)nSlots * slotBytes), control(fifoControlBytes(nSlots) / 8 + 8, 0) {
    view = ConnectorView{slots.data(), reinterpret_cast<FifoControl*>(control.data()), nSlots,
                         slotBytes, nullptr, 0, 0, nullptr};
  }
};

struct WakeLog {
  std::vector<uint32_t*> words;
  static void wake(void* ctx, uint32_t* word) { static_cast<WakeLog*>(ctx)->words.push_back(word); }
};

}  // namespace

TEST_CASE("runner reports the counter it is blocked on and wakes sleepers", "[sched]") {
  // Rank 0 sends 40 elements to rank 1 through a FIFO of 2 slots of 16 elements.
  P2pDesc pd;
  pd.nranks = 2;
  pd.elemSize = 8;
  pd.sliceElems = 16;
  Program send, recv;
  pd.rank = 0;
  pd.ops = {P2pOp{true, 1, 40, 0}};
  REQUIRE(buildP2p(pd, &send) == ncclSuccess);
  pd.rank = 1;
  pd.ops = {P2pOp{false, 0, 40, 0}};
  REQUIRE(buildP2p(pd, &recv) == ncclSuccess);

  Fifo f(2, 16 * 8);
  std::vector<uint64_t> src(40), dst(40, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = value(0, i);
  const void* srcPtr = src.data();
  void* dstPtr = dst.data();
  void* none = nullptr;
  WakeLog wl;
  RedOp op = makeRedOp(ncclSum, ncclUint64, 2);
  ProgramRunner tx, rx;
  REQUIRE(tx.init({&send, &f.view, &srcPtr, &none, ncclUint64, op, &WakeLog::wake, &wl}) ==
          nullptr);
  REQUIRE(rx.init({&recv, &f.view, &srcPtr, &dstPtr, ncclUint64, op, &WakeLog::wake, &wl}) ==
          nullptr);

  // The receiver has nothing yet: blocked on tail, at value 0.
  AdvanceResult r = rx.advance();
  CHECK_FALSE(r.done);
  CHECK_FALSE(r.progressed);
  CHECK(r.nBlocked == 1);
  CHECK(r.waitOn == &f.view.control->tail);
  CHECK(r.waitValue == 0);

  // The sender fills both slots, then blocks on head at 0.
  f.view.control->tail.waiters = 1;  // pretend the receiver sleeps
  r = tx.advance();
  CHECK(r.progressed);
  CHECK(r.slices == 2);
  CHECK(r.waitOn == &f.view.control->head);
  CHECK(r.waitValue == 0);
  CHECK(f.view.control->tail.value == 2);
  CHECK(f.view.control->sizes[0] == 16 * 8);
  REQUIRE(wl.words.size() == 2);
  CHECK(wl.words[0] == &f.view.control->tail.value);

  // A budget of one slice moves exactly one slice.
  r = rx.advance(1);
  CHECK(r.slices == 1);
  CHECK(r.waitOn == nullptr);
  r = rx.advance();
  CHECK(r.slices == 1);
  CHECK(r.waitValue == 2);
  CHECK(wl.words.size() == 2);  // nobody sleeps on head

  r = tx.advance();
  CHECK(r.done);
  CHECK(r.slices == 1);  // the last 8 elements
  CHECK(f.view.control->sizes[0] == 8 * 8);
  r = rx.advance();
  CHECK(r.done);
  CHECK(dst == src);
  CHECK(f.view.control->head.value == 3);
}

TEST_CASE("runner refuses connections it cannot use", "[sched]") {
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 2, 0, 100), &p) == ncclSuccess);
  Fifo a(3, kSlice * 8), b(4, kSlice * 8 - 8), ok(4, kSlice * 8);
  uint64_t buf[100] = {};
  const void* in = buf;
  void* out = buf;
  RedOp op = makeRedOp(ncclSum, ncclUint64, 2);
  ProgramRunner run;
  ConnectorView views[2] = {ok.view, a.view};
  CHECK(std::string(run.init({&p, views, &in, &out, ncclUint64, op, nullptr, nullptr})) ==
        "connection nSlots is not a power of two");
  views[1] = b.view;
  CHECK(std::string(run.init({&p, views, &in, &out, ncclUint64, op, nullptr, nullptr})) ==
        "connection slots are smaller than a slice");
}

// --------------------------------------------------------------------------- [sim_allreduce]

TEST_CASE("all-reduce: ranks 1..32, every count class, 1/2/4 channels, in and out of place",
          "[sim_allreduce]") {
  sweep(Coll::AllReduce, 20000);
}

TEST_CASE("all-reduce survives counter wrap-around, shuffled turns and big slots",
          "[sim_allreduce]") {
  for (int n : {2, 3, 7}) {
    SimSpec s;
    s.coll = Coll::AllReduce;
    s.nranks = n;
    s.count = 5000;
    s.nChannels = 2;
    s.sliceElems = kSlice;
    s.chunkElems = 3 * kSlice;
    s.counterStart = 0xFFFFFFF0u;
    s.seed = 17 + n;
    s.slotBytes = 1024;  // larger than a slice: only sliceElems are used per slot
    s.nSlots = 4;        // the fewest a 3-slot chunk allows
    CHECK(runCase(s));
  }
}

TEST_CASE("a batch of different collectives shares the FIFOs in call order", "[sim_allreduce]") {
  // Every collective back to back on the same connections, all bound up front and run in
  // order per rank and channel (as the host engine does), with varying channel counts.
  for (int n : {2, 3, 5}) {
    for (uint32_t seed : {0u, 99u}) {
      std::vector<Uint64Case> cases;
      int salt = 0;
      for (Coll coll :
           {Coll::AllReduce, Coll::Broadcast, Coll::ReduceScatter, Coll::AllToAll, Coll::AllGather,
            Coll::Reduce, Coll::Gather, Coll::Scatter, Coll::AllReduce}) {
        SimSpec s;
        s.coll = coll;
        s.nranks = n;
        s.count = 100 + 37 * salt;
        s.root = salt % n;
        s.nChannels = 1 + salt % 3;
        s.inPlace = salt % 2 && coll != Coll::AllToAll;
        s.sliceElems = kSlice;
        s.chunkElems = kChunk;
        s.counterStart = 0xFFFFFF00u;
        s.seed = seed;
        cases.push_back(makeCase(s, salt++));
      }
      std::vector<SimCase> sims;
      for (auto& c : cases) sims.push_back(c.sim);
      SimResult res = simulateBatch(&sims);
      INFO("n=" << n << " seed=" << seed << ": " << res.error);
      REQUIRE(res.result == ncclSuccess);
      for (size_t i = 0; i < cases.size(); i++) {
        INFO("collective " << i << " " << collName(cases[i].sim.spec.coll));
        CHECK(sameOutputs(sims[i].outputs, cases[i].want));
      }
    }
  }
}

namespace {

// Avg over n ranks of inputs n * (small integer): exact in int32 (sum, then post divides once)
// and, for power-of-two n, in float (pre scales each rank's input by 1/n exactly once).
template <class T>
void checkAvg(ncclDataType_t type, Coll coll, int n) {
  SimSpec s;
  s.coll = coll;
  s.type = type;
  s.op = ncclAvg;
  s.nranks = n;
  s.count = 3 * n * kChunk + 3;
  s.root = n - 1;
  s.nChannels = 2;
  s.sliceElems = kSlice;
  s.chunkElems = kChunk;
  std::vector<Bytes> in(n), out(n);
  std::vector<std::vector<T>> vin(n);
  for (int r = 0; r < n; r++) {
    vin[r].resize(simInputElems(s, r));
    for (size_t k = 0; k < vin[r].size(); k++) vin[r][k] = (T)(n * (r * 1000 + k % 977));
    in[r].resize(vin[r].size() * sizeof(T));
    std::memcpy(in[r].data(), vin[r].data(), in[r].size());
    out[r].assign(simOutputElems(s, r) * sizeof(T), 0);
  }
  SimResult res = simulate(s, in, out);
  INFO(collName(coll) << " type=" << type << " n=" << n << ": " << res.error);
  REQUIRE(res.result == ncclSuccess);
  for (int r = 0; r < n; r++) {
    if (coll == Coll::Reduce && r != s.root) continue;
    std::vector<T> got(s.count);
    std::memcpy(got.data(), res.outputs[r].data(), s.count * sizeof(T));
    bool same = true;
    for (size_t k = 0; k < s.count; k++) {
      int64_t sum = 0;
      size_t at = coll == Coll::ReduceScatter ? r * s.count + k : k;
      for (int q = 0; q < n; q++) sum += (int64_t)vin[q][at];
      same &= got[k] == (T)(sum / n);
    }
    CHECK(same);
  }
}

}  // namespace

TEST_CASE("avg: pre once per input, post once per result", "[sim_allreduce]") {
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
    for (int n : {1, 2, 3, 5, 8}) checkAvg<int32_t>(ncclInt32, coll, n);
    for (int n : {1, 2, 4, 8}) checkAvg<float>(ncclFloat32, coll, n);
  }
}

// ------------------------------------------------------------------------------ [sim_other]

TEST_CASE("reduce-scatter: ranks 1..32, all counts, channels, in place", "[sim_other]") {
  sweep(Coll::ReduceScatter, 3000);
}

TEST_CASE("all-gather: ranks 1..32, all counts, channels, in place", "[sim_other]") {
  sweep(Coll::AllGather, 3000);
}

TEST_CASE("broadcast: ranks 1..32, all counts, channels, in place", "[sim_other]") {
  sweep(Coll::Broadcast, 20000);
}

TEST_CASE("reduce: ranks 1..32, all counts, channels, in place; non-roots untouched",
          "[sim_other]") {
  sweep(Coll::Reduce, 20000);
}

TEST_CASE("broadcast and reduce from every root", "[sim_other]") {
  for (Coll coll : {Coll::Broadcast, Coll::Reduce}) {
    for (int root = 0; root < 6; root++) {
      SimSpec s;
      s.coll = coll;
      s.nranks = 6;
      s.root = root;
      s.count = 3 * kChunk + 1;
      s.nChannels = 4;
      s.sliceElems = kSlice;
      s.chunkElems = kChunk;
      CHECK(runCase(s));
    }
  }
}

// -------------------------------------------------------------------------------- [sim_p2p]

TEST_CASE("all-to-all: ranks 1..32, all counts, channels", "[sim_p2p]") {
  sweep(Coll::AllToAll, 2000);
}

TEST_CASE("gather: ranks 1..32, all counts, channels, in place", "[sim_p2p]") {
  sweep(Coll::Gather, 3000);
}

TEST_CASE("scatter: ranks 1..32, all counts, channels, in place", "[sim_p2p]") {
  sweep(Coll::Scatter, 3000);
}

TEST_CASE("grouped send/recv: many peers, repeated peers, self, 1-2 slot FIFOs", "[sim_p2p]") {
  // Every rank sends to every rank (itself included) twice, with counts that differ per pair,
  // posting sends before receives: it only completes because lanes progress independently.
  for (int n : {1, 2, 3, 6}) {
    for (int nch : {1, 3}) {
      for (uint32_t nSlots : {1u, 2u}) {
        SimP2pSpec s;
        s.type = ncclUint64;
        s.nranks = n;
        s.nChannels = nch;
        s.sliceElems = 8;
        s.nSlots = nSlots;
        s.seed = n * 31 + nch;
        auto countOf = [&](int from, int to, int rep) -> size_t {
          return (size_t)(from * 7 + to * 3 + rep * 11) % 40;
        };
        std::vector<std::vector<P2pOp>> ops(n);
        std::vector<std::vector<Bytes>> bufs(n);
        for (int r = 0; r < n; r++) {
          for (int rep = 0; rep < 2; rep++)
            for (int p = 0; p < n; p++) {
              size_t c = countOf(r, p, rep);
              ops[r].push_back(P2pOp{true, p, c, 0});
              std::vector<uint64_t> v(c);
              for (size_t k = 0; k < c; k++) v[k] = value(r, k + 1000 * (p + n * rep));
              bufs[r].push_back(toBytes(v));
            }
          for (int rep = 0; rep < 2; rep++)
            for (int p = n - 1; p >= 0; p--) {
              size_t c = countOf(p, r, rep);
              ops[r].push_back(P2pOp{false, p, c, 0});
              bufs[r].push_back(Bytes(c * 8, 0xEE));
            }
        }
        SimResult res = simulateP2p(s, ops, &bufs);
        INFO("n=" << n << " channels=" << nch << " slots=" << nSlots << ": " << res.error);
        REQUIRE(res.result == ncclSuccess);
        for (int r = 0; r < n; r++) {
          size_t i = 2 * n;
          for (int rep = 0; rep < 2; rep++)
            for (int p = n - 1; p >= 0; p--, i++) {
              size_t c = countOf(p, r, rep);
              std::vector<uint64_t> want(c);
              for (size_t k = 0; k < c; k++) want[k] = value(p, k + 1000 * (r + n * rep));
              CHECK(fromBytes(bufs[r][i]) == want);
            }
        }
      }
    }
  }
}

TEST_CASE("collPortKind names the connection set every Program's ports use", "[sched]") {
  for (Coll c :
       {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce,
        Coll::AllToAll, Coll::Gather, Coll::Scatter, Coll::Send, Coll::Recv}) {
    for (int rank : {0, 2}) {
      Program p;
      CollDesc d = desc(c, 4, rank, 100);
      d.root = 1;
      REQUIRE(buildProgram(d, &p) == ncclSuccess);
      INFO(collName(c) << " rank " << rank);
      CHECK(p.nPorts > 0);
      for (int i = 0; i < p.nPorts; i++) CHECK(p.ports[i].kind == collPortKind(c));
    }
  }
}

TEST_CASE("send/recv as single collectives", "[sim_p2p]") {
  Program p;
  CollDesc d = desc(Coll::Send, 4, 1, 100);
  d.root = 3;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  CHECK(p.nPorts == 1);
  CHECK(p.ports[0].peer == 3);
  CHECK(p.ports[0].dir == kPortSend);
  CHECK(p.ports[0].kind == kPortP2p);
  d.coll = Coll::Recv;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  CHECK(p.ports[0].dir == kPortRecv);
  CHECK(flagsOf(p) == std::vector<uint8_t>{kStepRecv | kStepOut});
}

// ----------------------------------------------------------------------------- [sim_broken]

TEST_CASE("a broken schedule is reported as a deadlock naming the stuck lanes", "[sim_broken]") {
  SimSpec s;
  s.type = ncclUint64;
  s.coll = Coll::AllReduce;
  s.nranks = 4;
  s.count = 1000;
  s.sliceElems = kSlice;
  s.chunkElems = kChunk;
  // Every rank receives before its first send: each waits for its predecessor forever.
  s.mutate = [](int, int, Program* p) { std::swap(p->steps[0], p->steps[1]); };
  std::vector<Bytes> in(4, Bytes(1000 * 8)), out(4, Bytes(1000 * 8));
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  INFO(res.error);
  CHECK(res.error.find("deadlock") == 0);
  CHECK(res.error.find("rank 2 channel 0 lane 0") != std::string::npos);
  CHECK(res.error.find("waits for data from rank 1") != std::string::npos);
}

TEST_CASE("an unmatched send is reported as leftover data", "[sim_broken]") {
  // The last rank of a broadcast chain stops after its first chunk; its predecessor's
  // remaining slots fit the FIFO, so nothing blocks, and they are left unreceived.
  SimSpec s;
  s.type = ncclUint64;
  s.coll = Coll::Broadcast;
  s.nranks = 3;
  s.count = 40;
  s.sliceElems = kSlice;
  s.chunkElems = kChunk;
  s.nSlots = 8;
  s.mutate = [](int rank, int, Program* p) {
    if (rank == 2) p->lanes[0].nLoops = 1;  // the last rank stops after the first chunk
  };
  std::vector<Bytes> in(3, Bytes(40 * 8)), out(3, Bytes(40 * 8));
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  INFO(res.error);
  CHECK(res.error.find("unmatched send: rank 1 -> rank 2 channel 0") == 0);
}

TEST_CASE("mismatched slices and out-of-bounds steps are caught", "[sim_broken]") {
  std::vector<Bytes> in(2, Bytes(100 * 8)), out(2, Bytes(100 * 8));
  SimSpec s;
  s.type = ncclUint64;
  s.coll = Coll::AllReduce;
  s.nranks = 2;
  s.count = 100;
  s.sliceElems = kSlice;
  s.chunkElems = kChunk;
  s.mutate = [](int rank, int, Program* p) {
    if (rank == 0) p->steps[0].count -= 1;  // sends one element less than rank 1 expects
  };
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("received slot size differs") != std::string::npos);

  s.mutate = [](int rank, int, Program* p) {
    if (rank == 1) p->steps[p->nSteps - 1].outOffset += 90;
  };
  res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("output range") != std::string::npos);
}

TEST_CASE("a ring whose chunk fills the FIFO deadlocks; the runner refuses such FIFOs",
          "[sim_broken]") {
  SimSpec s;
  s.type = ncclUint64;
  s.coll = Coll::AllReduce;
  s.nranks = 3;
  s.count = 600;
  s.sliceElems = kSlice;
  s.chunkElems = 2 * kSlice;
  s.nSlots = 2;  // the chunk needs 3
  std::vector<Bytes> in(3, Bytes(600 * 8)), out(3, Bytes(600 * 8));
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("fewer slots than a chunk") != std::string::npos);
  // Lying about it (as a wrong minSlots would) really deadlocks: every rank has filled its
  // outgoing FIFO in step 0 and needs a free slot to forward anything in step 1.
  s.mutate = [](int, int, Program* p) { p->minSlots = 1; };
  res = simulate(s, in, out);
  INFO(res.error);
  CHECK(res.error.find("deadlock") == 0);
  CHECK(res.error.find("step 1 (recv|local|send) 0/30 elements, waits for room") !=
        std::string::npos);
}
