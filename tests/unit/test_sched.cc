// Schedules: builders, the runner, and every collective planned by the engines' planner and
// simulated across 1..32 ranks with exact integer data, in and out of place, on 1, 2 and 4
// channels with different rings, with the Simple and LL protocols.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/prims.h"
#include "kernels/program.h"
#include "src/sched/builders.h"
#include "src/tune/tune.h"
#include "support/simulator.h"
#include "support/test_env.h"
#include "transports/shm/mapped_buffers.h"

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
                        << " inPlace=" << s.inPlace << " root=" << s.root
                        << " protocol=" << protocolName(s.protocol));
  INFO(res.error);
  if (res.result != ncclSuccess) {
    CHECK(res.result == ncclSuccess);
    return false;
  }
  return sameOutputs(res.outputs, c.want);
}

// Runs `cases` back to back on the same FIFOs (simulateBatch) and checks every output exactly.
void runBatchExactly(const std::vector<Uint64Case>& cases, const std::string& label) {
  std::vector<SimCase> sims;
  for (const auto& c : cases) sims.push_back(c.sim);
  SimResult res = simulateBatch(&sims);
  INFO(label << ": " << res.error);
  REQUIRE(res.result == ncclSuccess);
  for (size_t i = 0; i < cases.size(); i++) {
    INFO("collective " << i << " " << collName(cases[i].sim.spec.coll));
    CHECK(sameOutputs(sims[i].outputs, cases[i].want));
  }
}

// Counts around the interesting boundaries for n ranks: 0, 1, 7, a slot -1/+1, a chunk,
// several loops (all-reduce loops over n chunks), and one large.
std::vector<size_t> countsFor(Coll coll, int n, size_t large) {
  const size_t loop = coll == Coll::AllReduce ? n * kChunk : kChunk;
  return {0, 1, 7, kSlice - 1, kSlice + 1, kChunk, 3 * loop + 5, large};
}

// Runs one collective over ranks 1..32 (every count for the small and boundary rank counts,
// a rotating sample for the rest), 1/2/4 channels, in and out of place.
void sweep(Coll coll, size_t large, bool compact = false) {
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
          s.compact = compact;
          s.root = (n * 5 + 3) % n;
          s.sliceElems = kSlice;
          // Mostly two slots per chunk; sometimes one.
          s.chunkElems = (n + ci) % 4 == 3 ? kSlice : kChunk;
          s.slicesPerTurn = (n + nch) % 3 == 0 ? ~0u : 1 + (unsigned)(n % 3);
          // Simple, LL and Direct in turn, so every protocol meets every count class and rank
          // count; all-reduce by recursive doubling (power-of-two ranks) on every third cell,
          // at any size.
          static constexpr Protocol kTurn[] = {kProtoSimple, kProtoLL, kProtoDirect};
          s.protocol = kTurn[(n + ci + nch + inPlace) % 3];
          if ((n + ci + inPlace) % 3 == 0) s.doublingMaxBytes = ~0ull;
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

CollDesc desc(Coll coll, int n, int rank) {
  CollDesc d;
  d.coll = coll;
  d.nranks = n;
  d.rank = rank;
  return d;
}

}  // namespace

// ---------------------------------------------------------------------------------- [sched]

TEST_CASE("ring all-reduce body is send, rrs x n-2, rrcs+post, rcs x n-2, recv", "[sched]") {
  for (int n : {2, 3, 8}) {
    Program p;
    REQUIRE(buildProgram(desc(Coll::AllReduce, n, 1), &p) == ncclSuccess);
    REQUIRE(p.nLanes == 1);
    REQUIRE(p.nPorts == 2);
    std::vector<uint8_t> want;
    // Every send may go by reference (the runner uses one only where the data lies in a
    // buffer: the input of the first step, the output of the later ones).
    const uint8_t send = kStepSend | kStepByRef;
    want.push_back(kStepLocal | send);
    for (int i = 0; i < n - 2; i++) want.push_back(kStepRecv | kStepLocal | send);
    want.push_back(kStepRecv | kStepLocal | kStepOut | send | kStepPost);
    for (int i = 0; i < n - 2; i++) want.push_back(kStepRecv | kStepOut | send);
    want.push_back(kStepRecv | kStepOut);
    CHECK(flagsOf(p) == want);
    // Ports: receive from the previous rank on the ring, send to the next.
    for (int i = 0; i < p.nPorts; i++) {
      const Port& port = p.ports[i];
      CHECK(port.peer == (port.dir == kPortRecv ? 0 : 2 % n));
    }
    // Each ring chunk appears once in the reduce-scatter half and the post lands on the own one.
    const Step& post = p.steps[n - 1];
    CHECK(post.chunk == ringOrigin(1, n, n));
    CHECK(p.lanes[0].chunksPerLoop == n);
    CHECK(p.lanes[0].flags == kLaneRing);
  }
}

TEST_CASE("single rank: one local step with pre and post", "[sched]") {
  for (Coll c : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
    Program p;
    REQUIRE(buildProgram(desc(c, 1, 0), &p) == ncclSuccess);
    CHECK(p.nPorts == 0);
    CHECK(flagsOf(p) == std::vector<uint8_t>{kStepLocal | kStepOut | kStepPost});
  }
  for (Coll c : {Coll::AllGather, Coll::Broadcast}) {
    Program p;
    REQUIRE(buildProgram(desc(c, 1, 0), &p) == ncclSuccess);
    CHECK(flagsOf(p) == std::vector<uint8_t>{kStepLocal | kStepOut});
  }
}

TEST_CASE("a Program is free of the message: geometry comes at run time", "[sched]") {
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 8, 3), &p) == ncclSuccess);
  // Builders are pure: the same description gives the same bytes.
  Program again;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 8, 3), &again) == ncclSuccess);
  CHECK(std::memcmp(&p, &again, sizeof(Program)) == 0);
  // The same lane runs any count: the loops grow with the message, the steps do not.
  uint64_t small = 10, big = 100000000;
  RunShape shape{&small, 8, 2, 1, kChunk};
  LaneGeometry gs = laneGeometry(p.lanes[0], shape);
  shape.counts = &big;
  LaneGeometry gb = laneGeometry(p.lanes[0], shape);
  CHECK(gs.nLoops == 1);
  CHECK(gb.nLoops > 1000);
  CHECK(gb.chunk == kChunk);
  CHECK(gb.stride == 8 * kChunk);
  // Channel 1 of 2 takes the second half, 16-byte aligned.
  CHECK(gb.begin == big / 2);
  CHECK(gb.extent == big / 2);
  // Steps of the reduce-scatter half visit every chunk of a loop exactly once.
  std::vector<int> seen(8, 0);
  for (int k = 0; k < 8; k++) seen[p.steps[k].chunk]++;
  CHECK(seen == std::vector<int>(8, 1));
  CHECK(sizeof(Program) <= 8 * 1024 + 64);  // about 8 KB, uploaded once per key
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
  CollDesc d = desc(Coll::AllReduce, 4, 4);
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d = desc(Coll::AllReduce, 4, 1);
  d.ring = {0, 1, 1, 3};
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  CHECK(log.contains("ring is not a permutation"));
  d = desc(Coll::Broadcast, 4, 1);
  d.root = 9;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);

  // All-to-all fits 128 ranks; 130 need more ports and lanes than a Program has. (Ring bodies
  // beyond 128 ranks are repeated steps: test_sched_scale.cc.)
  CHECK(buildProgram(desc(Coll::AllReduce, 128, 5), &p) == ncclSuccess);
  CHECK(buildProgram(desc(Coll::AllToAll, 128, 5), &p) == ncclSuccess);
  CHECK(buildProgram(desc(Coll::AllToAll, 130, 5), &p) == ncclInvalidUsage);
  CHECK(log.contains("AllToAll does not fit a Program: needs more ports than 255"));

  P2pDesc pd;
  pd.nranks = 2;
  pd.rank = 0;
  pd.ops = {P2pOp{true, 0, 0, 0}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);  // send to self without its receive
  pd.ops = {P2pOp{true, 3, 0, 0}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);
  pd.ops = {P2pOp{true, 1, kMaxCounts, 0}};
  CHECK(buildP2p(pd, &p) == ncclInvalidArgument);  // count index out of range
}

TEST_CASE("checkProgram catches inconsistent programs", "[sched]") {
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 4, 0), &p) == ncclSuccess);
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
  pd.ops = {P2pOp{true, 1, 0, 0}, P2pOp{true, 1, 1, 1}};
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
    view = ConnectorView{slots.data(),
                         reinterpret_cast<FifoControl*>(control.data()),
                         nSlots,
                         slotBytes,
                         nullptr,
                         0,
                         0,
                         nullptr,
                         0};
  }
};

// A Sync policy that records who it would wake: counters published while `waiters` is set.
struct LoggingSync {
  std::vector<uint32_t*> woken;
  uint32_t load(const uint32_t* w) const { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
  void publish(FifoCounter* c, uint32_t v) {
    __atomic_store_n(&c->value, v, __ATOMIC_SEQ_CST);
    if (c->waiters) woken.push_back(&c->value);
  }
};

// Rank 0's Program sending one block to rank 1, and rank 1's receiving it.
void sendRecvPrograms(Program* send, Program* recv) {
  P2pDesc pd;
  pd.nranks = 2;
  pd.rank = 0;
  pd.ops = {P2pOp{true, 1, 0, 0}};
  REQUIRE(buildP2p(pd, send) == ncclSuccess);
  pd.rank = 1;
  pd.ops = {P2pOp{false, 0, 0, 0}};
  REQUIRE(buildP2p(pd, recv) == ncclSuccess);
}

RunArgs runArgs(const Program* p, const ConnectorView* views, const void* const* in,
                void* const* out, const uint64_t* counts, uint64_t slice, uint64_t chunk) {
  RunArgs a{};
  a.program = p;
  a.ports = views;
  a.inputs = in;
  a.outputs = out;
  a.counts = counts;
  a.type = ncclUint64;
  a.elemSize = 8;
  a.op = makeRedOp(ncclSum, ncclUint64, 2);
  a.protocol = kProtoSimple;
  a.nChannels = 1;
  a.channel = 0;
  a.sliceElems = slice;
  a.chunkElems = chunk;
  return a;
}

// Binds rank 0's sender and rank 1's receiver of sendRecvPrograms to `f` under `protocol`
// (slices and chunks of 16 elements).
void initPair(ProgramRunner* tx, ProgramRunner* rx, const Program& send, const Program& recv,
              const Fifo& f, const void* const* src, void* const* dst, const uint64_t* count,
              Protocol protocol) {
  static void* const kNone = nullptr;
  RunArgs ta = runArgs(&send, &f.view, src, &kNone, count, 16, 16);
  RunArgs ra = runArgs(&recv, &f.view, src, dst, count, 16, 16);
  ta.protocol = ra.protocol = protocol;
  REQUIRE(tx->init(ta) == kRunOk);
  REQUIRE(rx->init(ra) == kRunOk);
}

}  // namespace

TEST_CASE("runner reports the counter it is blocked on and wakes sleepers", "[sched]") {
  // Rank 0 sends 40 elements to rank 1 through a FIFO of 2 slots of 16 elements.
  Program send, recv;
  sendRecvPrograms(&send, &recv);

  Fifo f(2, 16 * 8);
  std::vector<uint64_t> src(40), dst(40, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = value(0, i);
  const void* srcPtr = src.data();
  void* dstPtr = dst.data();
  void* none = nullptr;
  const uint64_t count = 40;
  LoggingSync sync;
  ProgramRunner tx, rx;
  REQUIRE(tx.init(runArgs(&send, &f.view, &srcPtr, &none, &count, 16, 16)) == kRunOk);
  REQUIRE(rx.init(runArgs(&recv, &f.view, &srcPtr, &dstPtr, &count, 16, 16)) == kRunOk);

  // The receiver has nothing yet: blocked on tail, at value 0.
  AdvanceResult r = rx.advance(sync);
  CHECK_FALSE(r.done);
  CHECK_FALSE(r.progressed);
  CHECK(r.nBlocked == 1);
  CHECK(r.waitOn == &f.view.control->tail);
  CHECK(r.waitValue == 0);

  // The sender fills both slots, then blocks on head at 0.
  f.view.control->tail.waiters = 1;  // pretend the receiver sleeps
  r = tx.advance(sync);
  CHECK(r.progressed);
  CHECK(r.slices == 2);
  CHECK(r.waitOn == &f.view.control->head);
  CHECK(r.waitValue == 0);
  CHECK(f.view.control->tail.value == 2);
  CHECK(f.view.control->meta[0].size == 16 * 8);
  REQUIRE(sync.woken.size() == 2);
  CHECK(sync.woken[0] == &f.view.control->tail.value);

  // A budget of one slice moves exactly one slice.
  r = rx.advance(sync, 1);
  CHECK(r.slices == 1);
  CHECK(r.waitOn == nullptr);
  r = rx.advance(sync);
  CHECK(r.slices == 1);
  CHECK(r.waitValue == 2);
  CHECK(sync.woken.size() == 2);  // nobody sleeps on head

  r = tx.advance(sync);
  CHECK(r.done);
  CHECK(r.slices == 1);  // the last 8 elements
  CHECK(f.view.control->meta[0].size == 8 * 8);
  r = rx.advance(sync);
  CHECK(r.done);
  CHECK(dst == src);
  CHECK(f.view.control->head.value == 3);
}

TEST_CASE("LL: a waiting receiver names tail at its slot without reading it", "[sched]") {
  // Rank 0 sends 3 uint64 to rank 1 under LL (one slice). The receiver polls the lines only:
  // its wait names tail at the slot it waits for, whatever tail says (the engine sleeps on
  // it), and the sender packs its input straight into the lines.
  Program send, recv;
  sendRecvPrograms(&send, &recv);
  Fifo f(2, 16 * 8);
  std::vector<LlLine> ll(2 * 64);  // 2 slots of 1 KiB
  f.view.llSlots = reinterpret_cast<char*>(ll.data());
  f.view.llSlotBytes = 64 * sizeof(LlLine);
  std::vector<uint64_t> src = {value(0, 0), value(0, 1), value(0, 2)}, dst(3, 0);
  const void* srcPtr = src.data();
  void* dstPtr = dst.data();
  const uint64_t count = 3;
  LoggingSync sync;
  ProgramRunner tx, rx;
  initPair(&tx, &rx, send, recv, f, &srcPtr, &dstPtr, &count, kProtoLL);

  // Tail claims a published slot whose lines never came (as a mismatched call leaves it):
  // the receiver still waits at 0, the value tail has until slot 0 is published.
  f.view.control->tail.value = 1;
  AdvanceResult r = rx.advance(sync);
  CHECK_FALSE(r.progressed);
  CHECK(r.waitOn == &f.view.control->tail);
  CHECK(r.waitValue == 0);
  f.view.control->tail.value = 0;

  r = tx.advance(sync);
  CHECK(r.done);
  CHECK(f.view.control->tail.value == 1);
  r = rx.advance(sync);
  CHECK(r.done);
  CHECK(dst == src);
  CHECK(f.view.control->head.value == 1);
}

TEST_CASE("a Simple receive after an LL one waits for tail to pass head, however tail lags",
          "[sched]") {
  // An LL receiver takes a slot by its lines' flags, so it can finish (head 3) before the
  // sender's store of tail 3 reaches it. A Simple receive of the same call on the same
  // connection right after must wait for slot 3: it would otherwise take slot 3 % 2, which
  // still holds an earlier call's slice under this very signature, and return stale data.
  Program send, recv;
  sendRecvPrograms(&send, &recv);
  Fifo f(2, 16 * 8);
  std::vector<LlLine> ll(2 * 64);
  f.view.llSlots = reinterpret_cast<char*>(ll.data());
  f.view.llSlotBytes = 64 * sizeof(LlLine);
  const uint64_t count = 3;
  std::vector<uint64_t> stale = {11, 12, 13}, fresh = {21, 22, 23}, dst(3, 0);
  void* dstPtr = dst.data();
  LoggingSync sync;
  auto move = [&](const std::vector<uint64_t>& src, Protocol protocol) {
    const void* srcPtr = src.data();
    ProgramRunner tx, rx;
    initPair(&tx, &rx, send, recv, f, &srcPtr, &dstPtr, &count, protocol);
    REQUIRE(tx.advance(sync).done);
    REQUIRE(rx.advance(sync).done);
  };
  move(stale, kProtoSimple);  // slot 0
  move(stale, kProtoSimple);  // slot 1: what a wrong read would find
  move(stale, kProtoLL);      // LL slot 0: head and tail 3
  REQUIRE(f.view.control->head.value == 3);
  f.view.control->tail.value = 2;  // the sender's tail store not visible yet

  const void* freshPtr = fresh.data();
  ProgramRunner tx, rx;
  initPair(&tx, &rx, send, recv, f, &freshPtr, &dstPtr, &count, kProtoSimple);
  std::fill(dst.begin(), dst.end(), 0);
  AdvanceResult r = rx.advance(sync);
  CHECK(r.error == kRunOk);
  CHECK_FALSE(r.progressed);
  CHECK(r.waitOn == &f.view.control->tail);
  CHECK(r.waitValue == 2);  // sleeps on tail's value as read
  f.view.control->tail.value = 3;  // the store lands: still nothing for slot 3
  r = rx.advance(sync);
  CHECK_FALSE(r.progressed);
  CHECK(r.waitValue == 3);
  CHECK(dst == std::vector<uint64_t>(3, 0));

  REQUIRE(tx.advance(sync).done);
  r = rx.advance(sync);
  CHECK(r.done);
  CHECK(dst == fresh);
}

// The shm transport's mappings, as the host engine hands them to the runner.
const PeerMapper kShmMapper{&findMappable, &mapPeerRegion};

// A send of `count` elements from rank 0 to rank 1 under Direct, over a FIFO whose receiver
// declared `kind`, run one side at a time; returns the sizes words the sender published.
struct DirectSend {
  Program send, recv;
  std::vector<uint64_t> src, dst;
  const void* srcPtr;
  void* dstPtr;
  void* none = nullptr;
  uint64_t count;
  Fifo f;
  DirectSend(uint64_t n, uint32_t slotElems, RefKind kind)
      : src(n), dst(n, 0), count(n), f(2, slotElems * 8) {
    sendRecvPrograms(&send, &recv);
    for (size_t i = 0; i < n; i++) src[i] = value(0, i);
    srcPtr = src.data();
    dstPtr = dst.data();
    f.view.control->refKind = kind;
    // Our own memory, read as a peer's.
    if (kind == kRefProcess || kind == kRefMapped) f.view.refPid = getpid();
  }
  RunArgs args(bool sender, uint32_t slotElems) {
    RunArgs a = runArgs(sender ? &send : &recv, &f.view, &srcPtr, sender ? &none : &dstPtr, &count,
                        slotElems, slotElems);
    a.protocol = kProtoDirect;
    a.mapper = &kShmMapper;  // as the host engine hands it in
    return a;
  }
  // Sets up the sending and the receiving runner.
  void start(ProgramRunner& tx, ProgramRunner& rx, uint32_t slotElems) {
    REQUIRE(tx.init(args(true, slotElems)) == kRunOk);
    REQUIRE(rx.init(args(false, slotElems)) == kRunOk);
  }
  // The reference the sender published in slot 0.
  SlotRef firstRef() const {
    SlotRef ref;
    std::memcpy(&ref, f.slots.data(), sizeof(ref));
    return ref;
  }
};

TEST_CASE("Direct: sends go by reference, are read in place, and done waits for release",
          "[sched]") {
  for (RefKind kind : {kRefPointer, kRefProcess}) {
    INFO("refKind " << kind);
    // Slices of kRefMinBytes: the smallest that go by reference to another process.
    const uint32_t slot = kRefMinBytes / 8;
    DirectSend d(2 * slot + 100, slot, kind);
    LoggingSync sync;
    ProgramRunner tx, rx;
    d.start(tx, rx, slot);
    // Both slots carry references to the sender's input, not copies.
    AdvanceResult r = tx.advance(sync);
    CHECK(r.slices == 2);
    CHECK(d.f.view.control->meta[0].size == (kSlotRefBit | kRefMinBytes));
    CHECK(d.f.view.control->meta[1].size == (kSlotRefBit | kRefMinBytes));
    const SlotRef ref = d.firstRef();
    CHECK(ref.addr == reinterpret_cast<uint64_t>(d.src.data()));
    CHECK(r.waitOn == &d.f.view.control->head);
    // The receiver reads both, freeing the slots; the sender sends its last slice of 100
    // elements: by reference within a process, then waits for its release before it is
    // done; a copy to another process (below kRefMinBytes), with nothing left to release.
    r = rx.advance(sync, 2);
    CHECK(r.slices == 2);
    r = tx.advance(sync);
    CHECK(r.slices == 1);
    const uint32_t last = d.f.view.control->meta[0].size;
    if (kind == kRefPointer) {
      CHECK(last == (kSlotRefBit | 800));
      CHECK_FALSE(r.done);
      CHECK(r.waitOn == &d.f.view.control->head);
      CHECK(r.waitValue == 2);
      CHECK(tx.drainPort() == 0);
    } else {
      CHECK(last == 800);
      CHECK(r.done);
    }
    r = rx.advance(sync);
    CHECK(r.done);
    CHECK(d.dst == d.src);
    r = tx.advance(sync);
    CHECK(r.done);
    CHECK(tx.drainPort() == kNoPort);
  }
}

// Advances both runners in turn until both are done (a few rounds at most).
void runBoth(ProgramRunner& tx, ProgramRunner& rx, LoggingSync& sync) {
  for (int i = 0; i < 8; ++i) {
    const bool sent = tx.advance(sync).done;
    const bool received = rx.advance(sync).done;
    if (sent && received) return;
  }
  FAIL("the runners did not finish");
}

TEST_CASE(
    "Direct, mapped references: ncclMemAlloc-style buffers are read in place, others "
    "copied",
    "[sched]") {
  const uint32_t slot = kRefMinBytes / 8;
  const uint64_t n = 2 * slot + 100;
  // A plain buffer: copies, however large the slice.
  {
    DirectSend d(n, slot, kRefMapped);
    LoggingSync sync;
    ProgramRunner tx, rx;
    d.start(tx, rx, slot);
    CHECK(tx.advance(sync).slices == 2);
    CHECK(d.f.view.control->meta[0].size == kRefMinBytes);  // no kSlotRefBit
    runBoth(tx, rx, sync);
    CHECK(d.dst == d.src);
  }
  // A shareable buffer: references carrying its region, which the receiver maps (here: our
  // own, through /proc/<pid>/fd, as a peer would).
  DirectSend d(n, slot, kRefMapped);
  void* shared = allocMappable(n * 8);
  REQUIRE(shared != nullptr);
  std::memcpy(shared, d.src.data(), n * 8);
  d.srcPtr = shared;
  RefRegion region{};
  REQUIRE(findMappable(static_cast<char*>(shared) + 8, 16, &region));
  CHECK(region.base == reinterpret_cast<uint64_t>(shared));
  CHECK_FALSE(findMappable(static_cast<char*>(shared) + region.bytes - 8, 16, &region));
  const uint64_t mapsBefore = mappedPeerRegions();
  LoggingSync sync;
  ProgramRunner tx, rx;
  d.start(tx, rx, slot);
  AdvanceResult r = tx.advance(sync);
  CHECK(r.slices == 2);
  CHECK(d.f.view.control->meta[0].size == (kSlotRefBit | kRefMinBytes));
  SlotRef ref = d.firstRef();
  CHECK(ref.addr == reinterpret_cast<uint64_t>(shared));
  CHECK(ref.region.base == reinterpret_cast<uint64_t>(shared));
  CHECK(ref.region.ino != 0);
  CHECK(rx.advance(sync, 2).slices == 2);
  CHECK(mappedPeerRegions() == mapsBefore + 1);  // mapped once, then taken from the cache
  runBoth(tx, rx, sync);
  CHECK(tx.drainPort() == kNoPort);
  CHECK(d.dst == d.src);
  // A reference whose region is no longer the file the peer described (its fd number reused
  // by another file, here: the inode changed) is refused, not read.
  DirectSend e(slot, slot, kRefMapped);
  e.srcPtr = shared;
  ProgramRunner tx2, rx2;
  e.start(tx2, rx2, slot);
  CHECK(tx2.advance(sync).slices == 1);
  ref = e.firstRef();
  ref.region.ino += 1;  // so not in the cache either
  std::memcpy(e.f.slots.data(), &ref, sizeof(ref));
  CHECK(rx2.advance(sync).error == kRunErrRefRead);
  CHECK(freeMappable(shared));
  CHECK_FALSE(freeMappable(shared));
}

TEST_CASE("Direct: a receiver that cannot read references gets copies", "[sched]") {
  const uint32_t slot = 64;
  DirectSend d(150, slot, kRefNone);
  LoggingSync sync;
  ProgramRunner tx, rx;
  d.start(tx, rx, slot);
  AdvanceResult r = tx.advance(sync);
  CHECK(d.f.view.control->meta[0].size == slot * 8);  // no kSlotRefBit
  r = rx.advance(sync);
  r = tx.advance(sync);
  CHECK(r.done);  // nothing to drain
  r = rx.advance(sync);
  CHECK(r.done);
  CHECK(d.dst == d.src);
}

TEST_CASE("Direct: an unreadable reference is an error, not a crash", "[sched]") {
  const uint32_t slot = kRefMinBytes / 8;
  DirectSend d(slot, slot, kRefProcess);
  LoggingSync sync;
  ProgramRunner tx, rx;
  d.start(tx, rx, slot);
  CHECK(tx.advance(sync).slices == 1);
  // The reference now points where nothing is mapped in the "sender" (ourselves).
  SlotRef bad{};
  bad.addr = 4096;
  std::memcpy(d.f.slots.data(), &bad, sizeof(bad));
  AdvanceResult r = rx.advance(sync);
  CHECK(r.error == kRunErrRefRead);
  CHECK(std::string(runErrorText(r.error)).find("process_vm_readv") != std::string::npos);
  // A reference on a connection that never declared a kind is refused before it is read.
  DirectSend n(slot, slot, kRefPointer);
  ProgramRunner tx2, rx2;
  n.start(tx2, rx2, slot);
  CHECK(tx2.advance(sync).slices == 1);
  n.f.view.control->refKind = kRefNone;
  CHECK(rx2.advance(sync).error == kRunErrRefKind);
}

TEST_CASE("runner phases: N workers share a slice, acquire and publish bracket it", "[sched]") {
  // One rank's all-reduce on one rank is a local step: in -> out with pre and post. Split a
  // 1000-element slice over 3 workers by hand and check the result and the lane's progress.
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 1, 0), &p) == ncclSuccess);
  std::vector<uint64_t> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); i++) in[i] = value(0, i);
  const void* inPtr = in.data();
  void* outPtr = out.data();
  const uint64_t count = in.size();
  LoggingSync sync;
  ProgramRunner run;
  REQUIRE(run.init(runArgs(&p, nullptr, &inPtr, &outPtr, &count, 1000, 1000)) == kRunOk);
  Slice slice;
  RunError error = kRunOk;
  REQUIRE(run.acquire(sync, &slice, &error) == kRunReady);
  CHECK(slice.elems == 1000);
  CHECK(run.laneStatus(0).stepDone == 0);
  for (uint32_t w = 0; w < 3; w++) run.reduceCopy(slice, w, 3);
  CHECK(out == in);
  CHECK_FALSE(run.done());
  run.publish(sync, slice);
  CHECK(run.done());
  CHECK(run.acquire(sync, &slice, &error) == kRunDone);
}

TEST_CASE("runner refuses connections it cannot use", "[sched]") {
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 2, 0), &p) == ncclSuccess);
  Fifo a(3, kSlice * 8), b(4, kSlice * 8 - 8), ok(4, kSlice * 8);
  uint64_t buf[100] = {};
  const void* in = buf;
  void* out = buf;
  const uint64_t count = 100;
  ProgramRunner run;
  ConnectorView views[2] = {ok.view, a.view};
  CHECK(run.init(runArgs(&p, views, &in, &out, &count, kSlice, kSlice)) == kRunErrSlotsNotPow2);
  views[1] = b.view;
  CHECK(run.init(runArgs(&p, views, &in, &out, &count, kSlice, kSlice)) == kRunErrSlotTooSmall);
  views[1] = ok.view;
  CHECK(run.init(runArgs(&p, views, &in, &out, &count, kSlice, 4 * kSlice)) == kRunErrTooFewSlots);
  RunArgs ll = runArgs(&p, views, &in, &out, &count, kSlice, kSlice);
  ll.protocol = kProtoLL;
  CHECK(run.init(ll) == kRunErrNoLl);
  CHECK(std::string(runErrorText(kRunErrNoLl)).find("LL") != std::string::npos);
  CHECK(run.init(runArgs(&p, views, &in, &out, &count, kSlice, kSlice)) == kRunOk);
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
      runBatchExactly(cases, "n=" + std::to_string(n) + " seed=" + std::to_string(seed));
    }
  }
}

TEST_CASE("counter stores that land late, while protocols alternate on the connections",
          "[sim_allreduce]") {
  // A rank's stores to tail and head reach the others some rounds late (SimSpec::lagCounters),
  // as from a thread preempted right before them, while LL lines are seen at once: an LL
  // receiver then runs ahead of the tail it has seen, and the Simple or Direct call after it
  // must still wait for tail to pass its head.
  const Protocol protocols[] = {kProtoLL, kProtoSimple, kProtoLL, kProtoDirect, kProtoLL};
  for (int n : {2, 3, 4}) {
    for (uint32_t lag : {1u, 7u, 23u}) {
      std::vector<Uint64Case> cases;
      int salt = 0;
      for (Coll coll :
           {Coll::Broadcast, Coll::AllReduce, Coll::Reduce, Coll::AllGather, Coll::Broadcast,
            Coll::ReduceScatter, Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllReduce}) {
        SimSpec s;
        s.coll = coll;
        s.nranks = n;
        s.count = 3 + 11 * salt;
        s.root = salt % n;
        s.nChannels = 1 + salt % 2;
        s.protocol = protocols[salt % 5];
        s.sliceElems = kSlice;
        s.chunkElems = kChunk;
        s.seed = lag;
        s.lagCounters = lag;
        cases.push_back(makeCase(s, salt++));
      }
      runBatchExactly(cases, "n=" + std::to_string(n) + " lag seed=" + std::to_string(lag));
    }
  }
}

namespace {

// Avg over n ranks of inputs n * (small integer): exact in int32 (sum, then post divides once)
// and, for power-of-two n, in float (pre scales each rank's input by 1/n exactly once).
template <class T>
void checkAvg(ncclDataType_t type, Coll coll, int n, uint64_t doublingMaxBytes) {
  SimSpec s;
  s.doublingMaxBytes = doublingMaxBytes;
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
  INFO(collName(coll) << " type=" << type << " n=" << n << " doubling up to " << doublingMaxBytes
                      << ": " << res.error);
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
  for (uint64_t doubling : {0ull, ~0ull}) {
    for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
      for (int n : {1, 2, 3, 5, 8}) checkAvg<int32_t>(ncclInt32, coll, n, doubling);
      for (int n : {1, 2, 4, 8}) checkAvg<float>(ncclFloat32, coll, n, doubling);
    }
  }
}

TEST_CASE("recursive doubling: log2(n) rounds over p2p ports, partial results without pre",
          "[sched]") {
  CollDesc d = desc(Coll::AllReduce, 8, 5);
  d.algo = Algo::Doubling;
  Program p;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  REQUIRE(p.nSteps == 6);
  const int partners[3] = {4, 7, 1};  // 5 ^ 1, 5 ^ 2, 5 ^ 4
  for (int k = 0; k < 3; k++) {
    const Step& send = p.steps[2 * k];
    const Step& recv = p.steps[2 * k + 1];
    CHECK(p.ports[send.sendPort].peer == partners[k]);
    CHECK(p.ports[recv.recvPort].peer == partners[k]);
    CHECK(p.ports[send.sendPort].kind == kPortP2p);
    const uint8_t local = k == 0 ? kStepLocal : kStepLocalOut;
    CHECK(send.flags == (local | kStepSend));
    CHECK(recv.flags == (kStepRecv | local | kStepOut | (k == 2 ? kStepPost : 0)));
  }
  d.nranks = 6;
  d.rank = 1;
  test::CapturedLog log;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  CHECK(log.contains("power of two"));
}

// ------------------------------------------------------------------------------ [sim_other]

TEST_CASE("reduce-scatter: ranks 1..32, all counts, channels, in place", "[sim_other]") {
  sweep(Coll::ReduceScatter, 3000);
}

TEST_CASE("all-gather: ranks 1..32, all counts, channels, in place", "[sim_other]") {
  sweep(Coll::AllGather, 3000);
}

TEST_CASE("ring bodies as repeated steps: ranks 1..32, all counts, channels, rings, protocols",
          "[sim_compact]") {
  // The compact form (program.h, Repeated steps) that ring collectives take beyond 128 ranks,
  // forced here on the few ranks the full sweep covers; the runner resolves every repetition.
  sweep(Coll::AllReduce, 20000, true);
  sweep(Coll::ReduceScatter, 3000, true);
  sweep(Coll::AllGather, 3000, true);
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
    for (Protocol proto : {kProtoSimple, kProtoLL, kProtoDirect}) {
      for (uint32_t nSlots : {1u, 2u}) {
        const int nch = proto;  // for the seed
        SimP2pSpec s;
        s.type = ncclUint64;
        s.nranks = n;
        s.protocol = proto;
        s.sliceElems = 8;
        s.nSlots = nSlots;
        s.seed = n * 31 + nch;
        auto countOf = [&](int from, int to, int rep) -> size_t {
          return (size_t)(from * 7 + to * 3 + rep * 11) % 40;
        };
        std::vector<std::vector<SimP2pOp>> ops(n);
        std::vector<std::vector<Bytes>> bufs(n);
        for (int r = 0; r < n; r++) {
          for (int rep = 0; rep < 2; rep++)
            for (int p = 0; p < n; p++) {
              size_t c = countOf(r, p, rep);
              ops[r].push_back(SimP2pOp{true, p, c});
              std::vector<uint64_t> v(c);
              for (size_t k = 0; k < c; k++) v[k] = value(r, k + 1000 * (p + n * rep));
              bufs[r].push_back(toBytes(v));
            }
          for (int rep = 0; rep < 2; rep++)
            for (int p = n - 1; p >= 0; p--) {
              size_t c = countOf(p, r, rep);
              ops[r].push_back(SimP2pOp{false, p, c});
              bufs[r].push_back(Bytes(c * 8, 0xEE));
            }
        }
        SimResult res = simulateP2p(s, ops, &bufs);
        INFO("n=" << n << " protocol=" << protocolName(proto) << " slots=" << nSlots << ": "
                  << res.error);
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
      CollDesc d = desc(c, 4, rank);
      d.root = 1;
      REQUIRE(buildProgram(d, &p) == ncclSuccess);
      INFO(collName(c) << " rank " << rank);
      CHECK(p.nPorts > 0);
      for (int i = 0; i < p.nPorts; i++) CHECK(p.ports[i].kind == collPortKind(c));
    }
  }
  CollDesc d = desc(Coll::AllReduce, 4, 1);
  d.algo = Algo::Doubling;
  Program p;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  for (int i = 0; i < p.nPorts; i++) CHECK(p.ports[i].kind == collPortKind(d.coll, d.algo));
}

TEST_CASE("send/recv as single collectives", "[sim_p2p]") {
  Program p;
  CollDesc d = desc(Coll::Send, 4, 1);
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
  // The last rank of a broadcast chain never receives (its step copies its own input
  // instead); its predecessor's slots fit the FIFO, so nothing blocks, and they are left
  // unreceived.
  SimSpec s;
  s.type = ncclUint64;
  s.coll = Coll::Broadcast;
  s.nranks = 3;
  s.count = 40;
  s.sliceElems = kSlice;
  s.chunkElems = kChunk;
  s.nSlots = 8;
  s.mutate = [](int rank, int, Program* p) {
    if (rank != 2) return;
    p->steps[0].flags = kStepLocal | kStepOut;
    p->steps[0].recvPort = kNoPort;
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
  // A count that differs between the ranks: the first slot's signature says so.
  s.mutateJob = [](int rank, PlanJob* job) {
    if (rank == 0) job->counts[0] -= 1;
  };
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("different calls") != std::string::npos);
  // Same call, but slices cut differently (say NCCL_CHUNKSIZE differs): the slot sizes say so.
  s.mutateJob = [](int rank, PlanJob* job) {
    if (rank == 0) job->chunkElems /= 2;
  };
  res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("received slot size differs") != std::string::npos);

  s.mutateJob = nullptr;
  s.mutate = [](int rank, int, Program* p) {
    if (rank == 1) p->steps[p->nSteps - 1].outBlock += 1;
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
  s.nSlots = 2;  // a chunk of two slices needs 3
  // The planner never makes such chunks (it keeps them below nSlots slices); force one.
  s.mutateJob = [](int, PlanJob* job) { job->chunkElems = 2 * job->sliceElems; };
  std::vector<Bytes> in(3, Bytes(600 * 8)), out(3, Bytes(600 * 8));
  SimResult res = simulate(s, in, out);
  CHECK(res.result == ncclInternalError);
  CHECK(res.error.find("fewer slots than a ring chunk") != std::string::npos);
  // Lying about it (a ring lane without kLaneRing) really deadlocks: every rank has filled
  // its outgoing FIFO in step 0 and needs a free slot to forward anything in step 1.
  s.mutate = [](int, int, Program* p) { p->lanes[0].flags &= ~kLaneRing; };
  res = simulate(s, in, out);
  INFO(res.error);
  CHECK(res.error.find("deadlock") == 0);
  CHECK(res.error.find("step 1 (recv|local|send) 0/30 elements, waits for room") !=
        std::string::npos);
}

TEST_CASE("LL: lines carry their epoch; stale lines of the last lap are never taken",
          "[sim_allreduce]") {
  // Many laps of a 2-slot FIFO near the counter wrap, tiny slices, shuffled turns: every
  // slot is reused many times with old flags still in it.
  for (int n : {2, 3, 5}) {
    SimSpec s;
    s.coll = Coll::AllReduce;
    s.protocol = kProtoLL;
    s.nranks = n;
    s.count = 3001;
    s.sliceElems = 3;  // 24 data bytes: 3 lines, the last one half used
    s.nSlots = 2;
    s.counterStart = 0xFFFFFFF9u;
    s.seed = 5 + n;
    CHECK(runCase(s));
  }
}
