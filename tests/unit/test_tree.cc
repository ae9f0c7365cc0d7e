// Tree all-reduce (src/sched/builders.cc, treeAllReduce): the Program's steps for each kind of
// tree node, and the whole collective planned by the engines' planner over NCCL's double
// binary trees and simulated with exact data on 1..32 ranks (host layouts, channels,
// protocols, datatypes and ops, in place), then on 1,024 and 4,096 ranks with tiny counts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "src/sched/builders.h"
#include "src/sched/dbtree.h"
#include "src/tune/tune.h"
#include "support/simulator.h"
#include "support/test_env.h"

using namespace ringcc;

namespace {

// Host layouts for n ranks: one host, hosts of 4 (the last one short), one rank per host,
// two hosts, and hosts of 8 whose ranks are not in rank order.
std::vector<std::vector<std::vector<int>>> layoutsFor(int n) {
  std::vector<std::vector<std::vector<int>>> out;
  auto bySize = [&](int per, bool shuffled) {
    std::vector<int> ranks(n);
    std::iota(ranks.begin(), ranks.end(), 0);
    if (shuffled) std::shuffle(ranks.begin(), ranks.end(), std::mt19937(n));
    std::vector<std::vector<int>> hosts;
    for (int i = 0; i < n; i++) {
      if (i % per == 0) hosts.emplace_back();
      hosts.back().push_back(ranks[i]);
    }
    return hosts;
  };
  out.push_back(bySize(n, false));
  out.push_back(bySize(4, false));
  out.push_back(bySize(1, false));
  out.push_back(bySize((n + 1) / 2, false));
  out.push_back(bySize(8, true));
  return out;
}

std::string layoutText(const std::vector<std::vector<int>>& hosts) {
  std::string t;
  for (const auto& h : hosts) {
    t += "[";
    for (size_t i = 0; i < h.size(); i++) t += (i ? " " : "") + std::to_string(h[i]);
    t += "]";
  }
  return t;
}

uint64_t value(int rank, size_t idx) {
  return (1ull << (rank % 64)) + rank + ((uint64_t)(idx * 2654435761u + 12345) << 32);
}

// Simulates a uint64 sum all-reduce by Tree and checks every rank's output exactly.
bool runTree(SimSpec s) {
  s.coll = Coll::AllReduce;
  s.algo = static_cast<int>(Algo::Tree);
  s.type = ncclUint64;
  s.op = ncclSum;
  const int n = s.nranks;
  std::vector<Bytes> in(n), out(n);
  std::vector<uint64_t> want(s.count, 0);
  for (int r = 0; r < n; r++) {
    std::vector<uint64_t> v(s.count);
    for (size_t k = 0; k < s.count; k++) {
      v[k] = value(r, k);
      want[k] += v[k];
    }
    in[r].resize(s.count * 8);
    if (s.count) std::memcpy(in[r].data(), v.data(), s.count * 8);
    out[r].assign(s.count * 8, 0xEE);
  }
  SimResult res = simulate(s, in, out);
  INFO("n=" << n << " count=" << s.count << " channels=" << s.nChannels << " inPlace=" << s.inPlace
            << " protocol=" << protocolName(s.protocol) << " hosts=" << layoutText(s.hosts));
  INFO(res.error);
  if (res.result != ncclSuccess) {
    CHECK(res.result == ncclSuccess);
    return false;
  }
  for (int r = 0; r < n; r++) {
    std::vector<uint64_t> got(s.count);
    if (s.count) std::memcpy(got.data(), res.outputs[r].data(), s.count * 8);
    if (got != want) {
      INFO("rank " << r);
      CHECK(got == want);
      return false;
    }
  }
  return true;
}

// Rank `rank`'s Program on a hand-made tree node.
Program treeProgram(int n, int rank, int up, std::vector<int> down) {
  CollDesc d;
  d.coll = Coll::AllReduce;
  d.algo = Algo::Tree;
  d.nranks = n;
  d.rank = rank;
  d.tree.up = up;
  for (size_t i = 0; i < down.size(); i++) d.tree.down[i] = down[i];
  Program p;
  REQUIRE(buildProgram(d, &p) == ncclSuccess);
  return p;
}

int peerOf(const Program& p, uint8_t port) { return port == kNoPort ? -1 : p.ports[port].peer; }

}  // namespace

TEST_CASE("tree Programs: reduce up in one step per child, broadcast down in a second lane",
          "[tree]") {
  // Inner rank 5: children 6 and 7, parent 1.
  Program p = treeProgram(8, 5, 1, {6, 7});
  REQUIRE(p.nLanes == 2);
  REQUIRE(p.lanes[0].nSteps == 2);
  REQUIRE(p.lanes[1].nSteps == 2);
  const Step* s = p.steps;
  CHECK(s[0].flags == (kStepRecv | kStepLocal | kStepOut));
  CHECK(peerOf(p, s[0].recvPort) == 6);
  CHECK(s[1].flags == (kStepRecv | kStepLocalOut | kStepSend));
  CHECK(peerOf(p, s[1].recvPort) == 7);
  CHECK(peerOf(p, s[1].sendPort) == 1);
  CHECK(s[2].flags == (kStepRecv | kStepOut | kStepSend | kStepByRef));
  CHECK(peerOf(p, s[2].recvPort) == 1);
  CHECK(peerOf(p, s[2].sendPort) == 6);
  CHECK(s[3].flags == (kStepLocalOut | kStepSend));
  CHECK(peerOf(p, s[3].sendPort) == 7);
  // Up and down share no port, so they need no ordering.
  CHECK(p.lanes[1].after == kNoLane);
  for (int i = 0; i < p.nPorts; i++) CHECK(p.ports[i].kind == kPortRing);

  // A leaf sends its input as it is (by reference under Direct) and receives the result.
  p = treeProgram(8, 6, 5, {});
  REQUIRE(p.nLanes == 2);
  CHECK(p.steps[0].flags == (kStepLocal | kStepSend | kStepByRef));
  CHECK(p.steps[1].flags == (kStepRecv | kStepOut));

  // The root: one lane; the last child's step writes the result with post and sends it down.
  p = treeProgram(8, 0, -1, {4, 1, 2});
  REQUIRE(p.nLanes == 1);
  REQUIRE(p.nSteps == 5);
  CHECK(p.steps[0].flags == (kStepRecv | kStepLocal | kStepOut));
  CHECK(p.steps[1].flags == (kStepRecv | kStepLocalOut | kStepOut));
  CHECK(p.steps[2].flags ==
        (kStepRecv | kStepLocalOut | kStepOut | kStepPost | kStepSend | kStepByRef));
  CHECK(peerOf(p, p.steps[2].sendPort) == 4);
  CHECK(peerOf(p, p.steps[3].sendPort) == 1);
  CHECK(peerOf(p, p.steps[4].sendPort) == 2);

  // One rank: a local copy with pre and post.
  p = treeProgram(1, 0, -1, {});
  REQUIRE(p.nSteps == 1);
  CHECK(p.steps[0].flags == (kStepLocal | kStepOut | kStepPost));
}

TEST_CASE("tree Programs refuse bad nodes and other collectives", "[tree]") {
  CollDesc d;
  d.coll = Coll::AllReduce;
  d.algo = Algo::Tree;
  d.nranks = 4;
  d.rank = 1;
  Program p;
  test::CapturedLog log;
  d.tree.up = 1;  // itself
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d.tree.up = 0;
  d.tree.down[0] = 0;  // its parent
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d.tree.down[0] = -1;
  d.tree.down[1] = 2;  // a gap
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d.tree.down[0] = 2;  // twice
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d.tree.down[1] = 7;  // out of range
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  d.tree = TreeNode{};  // a root without children on 4 ranks
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  CHECK(log.contains("tree node"));
  d.tree.up = 0;
  d.coll = Coll::AllGather;
  CHECK(buildProgram(d, &p) == ncclInvalidArgument);
  CHECK(log.contains("Tree builds all-reduce only"));
}

TEST_CASE("tree all-reduce: ranks 1..32, host layouts, 1/2/3 channels, protocols, in place",
          "[sim_tree]") {
  constexpr size_t kSlice = 16;
  int cases = 0, failures = 0;
  for (int n = 1; n <= 32 && failures < 3; n++) {
    const bool full = n <= 5 || n == 8 || n == 13 || n == 32;
    auto layouts = layoutsFor(n);
    for (size_t li = 0; li < layouts.size(); li++) {
      for (size_t count :
           {size_t{0}, size_t{1}, size_t{7}, kSlice + 1, 3 * 2 * kSlice + 5, size_t{2000}}) {
        for (int nch : {1, 2, 3}) {
          for (int inPlace = 0; inPlace < 2; inPlace++) {
            const int cell = n + (int)li + (int)count + nch + inPlace;
            if (!full && cell % 4 != 0) continue;
            if (count == 2000 && (n + nch) % 3 != 0) continue;
            SimSpec s;
            s.nranks = n;
            s.hosts = layouts[li];
            s.count = count;
            s.nChannels = nch;
            s.inPlace = inPlace;
            s.sliceElems = kSlice;
            s.chunkElems = cell % 3 == 0 ? kSlice : 2 * kSlice;
            s.slicesPerTurn = cell % 2 ? 1 : ~0u;
            s.seed = cell % 5 == 0 ? 7u + cell : 0u;
            static constexpr Protocol kTurn[] = {kProtoSimple, kProtoLL, kProtoDirect};
            s.protocol = kTurn[cell % 3];
            cases++;
            if (!runTree(s)) failures++;
          }
        }
      }
    }
  }
  INFO("cases run: " << cases);
  CHECK(cases > 300);
}

TEST_CASE("tree all-reduce: hand-made trees, counter wrap-around, 1-slot chunks", "[sim_tree]") {
  // A deep chain 0 <- 1 <- 2 <- 3 <- 4 and a root with three children, in both trees.
  DoubleTree chain, wide;
  for (int r = 0; r < 5; r++) {
    TreeNode c;
    c.up = r - 1;
    if (r < 4) c.down[0] = r + 1;
    chain.tree[0].push_back(c);
    TreeNode w;
    if (r == 0) {
      w.down[0] = 1, w.down[1] = 2, w.down[2] = 3;
    } else if (r == 3) {
      w.up = 0, w.down[0] = 4;
    } else {
      w.up = r == 4 ? 3 : 0;
    }
    wide.tree[0].push_back(w);
  }
  chain.tree[1] = wide.tree[0];
  wide.tree[1] = chain.tree[0];
  for (const DoubleTree* t : {&chain, &wide}) {
    for (Protocol p : {kProtoSimple, kProtoLL, kProtoDirect}) {
      SimSpec s;
      s.nranks = 5;
      s.trees = *t;
      s.count = 1000;
      s.nChannels = 2;
      s.sliceElems = 8;
      s.chunkElems = 8;
      s.nSlots = 2;
      s.counterStart = 0xFFFFFFF0u;
      s.protocol = p;
      s.seed = 3;
      CHECK(runTree(s));
    }
  }
}

namespace {

// Avg, max and prod of small integers in int32 and float: exact, so every rank must hold the
// very values computed here (avg in float only for a power of two ranks, where 1/n is exact).
template <class T>
void checkOp(ncclDataType_t type, ncclRedOp_t op, int n, bool inPlace) {
  SimSpec s;
  s.coll = Coll::AllReduce;
  s.algo = static_cast<int>(Algo::Tree);
  s.type = type;
  s.op = op;
  s.nranks = n;
  s.count = 301;
  s.nChannels = 2;
  s.inPlace = inPlace;
  s.sliceElems = 16;
  s.hosts = layoutsFor(n)[1];
  std::vector<Bytes> in(n), out(n);
  std::vector<std::vector<T>> v(n);
  for (int r = 0; r < n; r++) {
    v[r].resize(s.count);
    for (size_t k = 0; k < s.count; k++)
      v[r][k] = op == ncclProd ? (T)(1 + (r + k) % 2) : (T)(n * (r * 10 + (int)(k % 97)));
    in[r].resize(s.count * sizeof(T));
    std::memcpy(in[r].data(), v[r].data(), in[r].size());
    out[r].assign(in[r].size(), 0);
  }
  SimResult res = simulate(s, in, out);
  INFO("type=" << type << " op=" << op << " n=" << n << " inPlace=" << inPlace << ": "
               << res.error);
  REQUIRE(res.result == ncclSuccess);
  for (int r = 0; r < n; r++) {
    std::vector<T> got(s.count);
    std::memcpy(got.data(), res.outputs[r].data(), s.count * sizeof(T));
    bool same = true;
    for (size_t k = 0; k < s.count; k++) {
      double acc = op == ncclProd ? 1 : op == ncclMax ? -1e300 : 0;
      for (int q = 0; q < n; q++) {
        const double x = (double)v[q][k];
        acc = op == ncclProd ? acc * x : op == ncclMax ? std::max(acc, x) : acc + x;
      }
      if (op == ncclAvg) acc = type == ncclInt32 ? (double)((int64_t)acc / n) : acc / n;
      same &= got[k] == (T)acc;
    }
    CHECK(same);
  }
}

}  // namespace

TEST_CASE("tree all-reduce: avg (pre once per input, post once at the root), max, prod",
          "[sim_tree]") {
  for (int inPlace = 0; inPlace < 2; inPlace++) {
    for (int n : {1, 2, 3, 6, 9}) {
      checkOp<int32_t>(ncclInt32, ncclAvg, n, inPlace);
      checkOp<int32_t>(ncclInt32, ncclMax, n, inPlace);
      checkOp<int32_t>(ncclInt32, ncclProd, n, inPlace);
    }
    for (int n : {1, 2, 4, 8, 16}) {
      checkOp<float>(ncclFloat32, ncclAvg, n, inPlace);
      checkOp<float>(ncclFloat32, ncclSum, n, inPlace);
    }
  }
}

TEST_CASE("tree all-reduce at scale: 1,024 and 4,096 ranks, 8 per host, tiny counts",
          "[tree_scale]") {
  for (int n : {1024, 4096}) {
    std::vector<std::vector<int>> hosts(n / 8);
    for (int r = 0; r < n; r++) hosts[r / 8].push_back(r);
    for (int nch : {1, 2}) {
      SimSpec s;
      s.nranks = n;
      s.hosts = hosts;
      s.count = nch == 1 ? 3 : 37;  // two channels: each tree carries part of the elements
      s.nChannels = nch;
      s.sliceElems = 16;
      s.protocol = nch == 1 ? kProtoLL : kProtoSimple;
      s.slicesPerTurn = ~0u;
      const auto start = std::chrono::steady_clock::now();
      CHECK(runTree(s));
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      WARN(n << " ranks, " << nch << " channel(s), " << s.count << " elements: simulated in "
             << secs << " s");
    }
  }
}
