// Ring Programs at scale: repeated steps (kernels/program.h) keep a ring collective's
// Program a few steps long at any rank count, and the real ring and chain Programs are run
// through the simulator at 129..300, 1,024 and 4,096 ranks with exact int32 data.
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
#include "support/simulator.h"
#include "support/test_env.h"

using namespace ringcc;

namespace {

constexpr Coll kRingColls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                               Coll::Broadcast, Coll::Reduce};

CollDesc desc(Coll coll, int n, int rank, bool compact = false) {
  CollDesc d;
  d.coll = coll;
  d.nranks = n;
  d.rank = rank;
  d.root = (n * 2) / 3;
  d.compact = compact;
  return d;
}

std::vector<int> shuffledRing(int n, unsigned seed) {
  std::vector<int> r(n);
  std::iota(r.begin(), r.end(), 0);
  std::shuffle(r.begin(), r.end(), std::mt19937(seed));
  return r;
}

// Every step of lane 0 with its repetitions resolved, as the runner will see them.
std::vector<Step> expand(const Program& p, const std::vector<int>& ring) {
  std::vector<Step> out;
  const Lane& l = p.lanes[0];
  for (int k = l.firstStep; k < l.firstStep + l.nSteps; k++)
    for (uint32_t j = 0; j <= p.steps[k].repeat; j++)
      out.push_back(stepRepetition(p.steps[k], l.chunksPerLoop, j,
                                   ring.empty() ? nullptr : ring.data(), p.ringSize));
  return out;
}

bool sameStep(const Step& a, const Step& b) {
  return a.flags == b.flags && a.recvPort == b.recvPort && a.sendPort == b.sendPort &&
         a.chunk == b.chunk && a.inBlock == b.inBlock && a.outBlock == b.outBlock && a.walk == 0 &&
         b.walk == 0 && a.repeat == 0 && b.repeat == 0;
}

// The input of rank r, element k. Reductions: never 0 (a missing or doubled contribution
// changes every sum) and small enough that a sum over 4,096 ranks fits an int32 exactly.
// Copies: distinct for every rank and element (up to 32,768 ranks and 65,535 elements), so a
// block delivered to the wrong place shows.
int32_t value(Coll c, int r, size_t k) {
  if (collReduces(c)) return 1 + (int32_t)((r * 7919u + k * 104729u) % 4001u);
  return (int32_t)(((uint32_t)r << 16) + (uint32_t)(k % 65535) + 1);
}

// Expected outputs of an int32 sum collective, computed directly (out of place).
std::vector<std::vector<int32_t>> expected(const SimSpec& s,
                                           const std::vector<std::vector<int32_t>>& in,
                                           int32_t untouched) {
  const int n = s.nranks;
  const size_t c = s.count;
  std::vector<int64_t> sums;
  if (s.coll == Coll::AllReduce || s.coll == Coll::Reduce || s.coll == Coll::ReduceScatter) {
    sums.assign(s.coll == Coll::ReduceScatter ? n * c : c, 0);
    for (int q = 0; q < n; q++)
      for (size_t k = 0; k < sums.size(); k++) sums[k] += in[q][k];
  }
  std::vector<std::vector<int32_t>> out(n);
  for (int r = 0; r < n; r++) {
    auto& o = out[r];
    o.assign(simOutputElems(s, r), untouched);
    switch (s.coll) {
      case Coll::AllReduce:
        for (size_t k = 0; k < c; k++) o[k] = (int32_t)sums[k];
        break;
      case Coll::Reduce:
        if (r == s.root)
          for (size_t k = 0; k < c; k++) o[k] = (int32_t)sums[k];
        else if (s.inPlace)
          o = in[r];
        break;
      case Coll::ReduceScatter:
        for (size_t k = 0; k < c; k++) o[k] = (int32_t)sums[r * c + k];
        break;
      case Coll::AllGather:
        for (int q = 0; q < n; q++)
          for (size_t k = 0; k < c; k++) o[q * c + k] = in[q][k];
        break;
      case Coll::Broadcast:
        for (size_t k = 0; k < c; k++) o[k] = in[s.root][k];
        break;
      default:
        break;
    }
  }
  return out;
}

// Simulates `s` (int32 sum) over every rank and compares every output element exactly.
// Returns the simulator's result for the caller's numbers.
SimResult runExact(const SimSpec& s) {
  constexpr int32_t kUntouched = -7;
  std::vector<std::vector<int32_t>> in(s.nranks);
  std::vector<Bytes> inputs(s.nranks), outputs(s.nranks);
  for (int r = 0; r < s.nranks; r++) {
    in[r].resize(simInputElems(s, r));
    for (size_t k = 0; k < in[r].size(); k++) in[r][k] = value(s.coll, r, k);
    inputs[r].resize(in[r].size() * 4);
    if (!in[r].empty()) std::memcpy(inputs[r].data(), in[r].data(), inputs[r].size());
    std::vector<int32_t> o(simOutputElems(s, r), kUntouched);
    outputs[r].resize(o.size() * 4);
    if (!o.empty()) std::memcpy(outputs[r].data(), o.data(), outputs[r].size());
  }
  SimResult res = simulate(s, inputs, outputs);
  INFO(collName(s.coll) << " n=" << s.nranks << " count=" << s.count << " channels=" << s.nChannels
                        << " inPlace=" << s.inPlace << " root=" << s.root
                        << " protocol=" << protocolName(s.protocol) << " compact=" << s.compact);
  INFO(res.error);
  REQUIRE(res.result == ncclSuccess);
  inputs.clear();
  outputs.clear();
  const auto want = expected(s, in, kUntouched);
  in.clear();
  for (int r = 0; r < s.nranks; r++) {
    std::vector<int32_t> got(res.outputs[r].size() / 4);
    if (!got.empty()) std::memcpy(got.data(), res.outputs[r].data(), res.outputs[r].size());
    if (got != want[r]) {
      size_t k = 0;
      while (k < got.size() && k < want[r].size() && got[k] == want[r][k]) k++;
      INFO("rank " << r << " first difference at element " << k);
      REQUIRE(got == want[r]);
    }
  }
  return res;
}

}  // namespace

// ---------------------------------------------------------------------------- [sched_scale]

TEST_CASE("a Program's size does not grow with the rank count", "[sched_scale]") {
  // The stated bound: about 8 KB, the size it had when ring bodies were written out.
  STATIC_REQUIRE(sizeof(Step) == 12);
  STATIC_REQUIRE(sizeof(Program) <= 8256);
  for (int n : {129, 257, 1024, 4096, 65535}) {
    for (Coll c : kRingColls) {
      for (int rank : {0, n / 3, n - 1}) {
        Program p;
        INFO(collName(c) << " n=" << n << " rank=" << rank);
        REQUIRE(buildProgram(desc(c, n, rank), &p) == ncclSuccess);
        CHECK(p.nLanes == 1);
        // All-reduce: send, rrs x (n-2), rrcs, rcs x (n-2), recv. Reduce-scatter and
        // all-gather are written out while their n steps fit.
        const bool blocked = c == Coll::ReduceScatter || c == Coll::AllGather;
        CHECK(p.nSteps <= (blocked && n <= kMaxSteps ? n : 5));
        CHECK(checkProgram(p) == nullptr);
      }
    }
  }
  // Up to 128 ranks (all-reduce) and 256 (reduce-scatter, all-gather) bodies are written out
  // as before; one more rank and they are compact.
  Program p;
  REQUIRE(buildProgram(desc(Coll::AllReduce, 128, 5), &p) == ncclSuccess);
  CHECK(p.nSteps == 255);
  REQUIRE(buildProgram(desc(Coll::AllReduce, 129, 5), &p) == ncclSuccess);
  CHECK(p.nSteps == 5);
  REQUIRE(buildProgram(desc(Coll::AllGather, 256, 5), &p) == ncclSuccess);
  CHECK(p.nSteps == 256);
  REQUIRE(buildProgram(desc(Coll::AllGather, 257, 5), &p) == ncclSuccess);
  CHECK(p.nSteps == 3);
  CHECK(p.ringSize == 257);
  // Per-peer collectives keep their bounds and say which one they exceed.
  test::CapturedLog log;
  CHECK(buildProgram(desc(Coll::AllToAll, 128, 5), &p) == ncclSuccess);
  CHECK(buildProgram(desc(Coll::Gather, 256, (256 * 2) / 3), &p) == ncclSuccess);  // the root
  CHECK(buildProgram(desc(Coll::Scatter, 257, (257 * 2) / 3), &p) == ncclInvalidUsage);
  CHECK(buildProgram(desc(Coll::AllToAll, 4096, 5), &p) == ncclInvalidUsage);
  CHECK(log.contains("AllToAll does not fit a Program: needs more"));
  CHECK(buildProgram(desc(Coll::Gather, 4096, (4096 * 2) / 3), &p) ==
        ncclInvalidUsage);  // the root
  CHECK(buildProgram(desc(Coll::AllReduce, 65536, 0), &p) == ncclInvalidUsage);
  CHECK(log.contains("nranks 65536 > 65535"));
}

TEST_CASE("compact and written-out ring bodies are the same steps", "[sched_scale]") {
  for (int n : {2, 3, 4, 5, 8, 31, 128}) {
    for (Coll c : kRingColls) {
      for (bool shuffled : {false, true}) {
        std::vector<int> ring = shuffled ? shuffledRing(n, (unsigned)n) : std::vector<int>{};
        for (int rank = 0; rank < n; rank += std::max(1, n / 5)) {
          INFO(collName(c) << " n=" << n << " rank=" << rank << " shuffled=" << shuffled);
          CollDesc d = desc(c, n, rank);
          d.ring = ring;
          Program plain, compact;
          REQUIRE(buildProgram(d, &plain) == ncclSuccess);
          d.compact = true;
          REQUIRE(buildProgram(d, &compact) == ncclSuccess);
          REQUIRE(checkProgram(compact) == nullptr);
          const std::vector<Step> a = expand(plain, ring), b = expand(compact, ring);
          REQUIRE(a.size() == b.size());
          REQUIRE(a.size() == (size_t)plain.nSteps);  // written out: nothing repeats
          for (size_t k = 0; k < a.size(); k++) {
            INFO("step " << k);
            CHECK(sameStep(a[k], b[k]));
          }
          CHECK(compact.nSteps <= 5);
          const Lane &la = plain.lanes[0], &lb = compact.lanes[0];
          CHECK((la.chunksPerLoop == lb.chunksPerLoop && la.flags == lb.flags &&
                 la.count == lb.count && la.inBuf == lb.inBuf && la.outBuf == lb.outBuf));
          CHECK(std::memcmp(plain.ports, compact.ports, sizeof(Port) * plain.nPorts) == 0);
          // Only blocks walked by ring position need the ring at run time.
          const bool walksBlocks = n > 3 && (c == Coll::ReduceScatter || c == Coll::AllGather);
          CHECK(compact.ringSize == (walksBlocks ? n : 0));
          CHECK(plain.ringSize == 0);
        }
      }
    }
  }
}

TEST_CASE("checkProgram catches bad repeated steps", "[sched_scale]") {
  CollDesc d = desc(Coll::AllGather, 8, 3, true);
  Program p;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  REQUIRE(p.steps[1].repeat == 5);
  REQUIRE(p.steps[1].walk == kWalkOut);
  Program q = p;
  q.ringSize = 0;
  CHECK(checkProgram(q) != nullptr);  // walks ring positions without a ring
  q = p;
  q.steps[1].outBlock = 8;
  CHECK(checkProgram(q) != nullptr);  // a position past the ring
  q = p;
  q.steps[1].walk = 0x80;
  CHECK(checkProgram(q) != nullptr);
  d.coll = Coll::AllReduce;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  REQUIRE(p.steps[1].walk == kWalkChunk);
  q = p;
  q.steps[1].chunk = 8;  // chunk 8 of a loop of 8
  CHECK(checkProgram(q) != nullptr);
}

TEST_CASE("a runner refuses a ring order other than its Program's", "[sched_scale]") {
  // A compact all-gather on a shuffled ring walks positions: the runner needs that ring.
  SimSpec s;
  s.coll = Coll::AllGather;
  s.nranks = 6;
  s.count = 5;
  s.compact = true;
  s.rings = {shuffledRing(6, 11)};
  runExact(s);  // with the planner's table, exact
  std::vector<int> other = s.rings[0];
  std::swap(other[1], other[4]);
  std::vector<int> shortRing(other.begin(), other.end() - 1);
  std::vector<int> outOfRange = s.rings[0];
  outOfRange[2] = 6;
  for (int k = 0; k < 4; k++) {
    INFO("case " << k);
    s.mutateJob = [&](int, PlanJob* job) {
      const std::vector<int>* t = k == 1 ? &other : k == 2 ? &shortRing : &outOfRange;
      job->ringRanks = k == 0 ? nullptr : t->data();
      job->nRingRanks = k == 0 ? 0 : (uint32_t)t->size();
    };
    std::vector<Bytes> in(6, Bytes(5 * 4, 1)), out(6, Bytes(6 * 5 * 4, 0));
    SimResult res = simulate(s, in, out);
    CHECK(res.result != ncclSuccess);
    CHECK(res.error.find("ring order") != std::string::npos);
  }
}

// ------------------------------------------------------------------------------ [sim_scale]

TEST_CASE("ring collectives at 129..300 ranks on channels and rings in every protocol",
          "[sim_scale]") {
  static constexpr Protocol kProtocols[] = {kProtoSimple, kProtoLL, kProtoDirect};
  int cases = 0;
  for (int n : {129, 200, 257, 300}) {
    for (Coll c : kRingColls) {
      for (Protocol proto : kProtocols) {
        SimSpec s;
        s.coll = c;
        s.nranks = n;
        s.protocol = proto;
        s.nChannels = n % 2 ? 2 : 4;
        s.inPlace = (n + (int)proto) % 2 == 1;
        s.root = (n * 5 + (int)proto) % n;
        // All-reduce: a loop of n chunks and a partial second one; the blocked collectives:
        // a few elements per block, so each step moves one or two slices.
        const bool blocked = c == Coll::ReduceScatter || c == Coll::AllGather;
        s.count = blocked ? 37 : (size_t)n * 16 + 5;
        s.sliceElems = 8;
        s.chunkElems = 16;
        s.slicesPerTurn = 1 + (unsigned)(n % 3);
        // Channel 0 on 0..n-1, the others on shuffled rings (blocks indexed by rank, not
        // position, and a table the runner must be given).
        s.rings.assign(s.nChannels, {});
        for (int ch = 1; ch < s.nChannels; ch++) s.rings[ch] = shuffledRing(n, n * 31u + ch);
        runExact(s);
        cases++;
      }
    }
  }
  CHECK(cases == 60);
}

TEST_CASE("ring collectives at 1024 ranks with tiny counts", "[sim_scale]") {
  for (Coll c : kRingColls) {
    for (size_t count : {(size_t)1024, (size_t)2048}) {
      SimSpec s;
      s.coll = c;
      s.nranks = 1024;
      s.root = 700;
      // Blocked collectives move nranks blocks: count elements per block.
      s.count = c == Coll::ReduceScatter || c == Coll::AllGather ? count / 1024 : count;
      s.protocol = count == 1024 ? kProtoSimple : kProtoDirect;
      s.rings = {shuffledRing(1024, 5)};
      s.slicesPerTurn = ~0u;
      runExact(s);
    }
  }
}

TEST_CASE("ring collectives at 4096 ranks with tiny counts", "[sim_scale]") {
  for (Coll c : kRingColls) {
    SimSpec s;
    s.coll = c;
    s.nranks = 4096;
    s.root = 1234;
    s.count = c == Coll::ReduceScatter || c == Coll::AllGather ? 1 : 4096;
    // LL for the all-reduce, references (Direct) for reduce-scatter and broadcast.
    s.protocol = c == Coll::AllReduce                               ? kProtoLL
                 : c == Coll::ReduceScatter || c == Coll::Broadcast ? kProtoDirect
                                                                    : kProtoSimple;
    s.slicesPerTurn = ~0u;
    SimResult res = runExact(s);
    WARN(collName(c) << " at 4096 ranks: " << res.rounds << " rounds, " << res.slices << " slices");
  }
}
