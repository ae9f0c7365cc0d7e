// The CUDA batch kernel's device paths run on host threads (tests/support/simt.h): every
// collective and send/recv, Simple, LL and Direct, on 2-4 emulated ranks, each rank one launch
// of runBatchBlock with DeviceSync and blocks of 32, 48 or 512 emulated threads; every output
// compared bit for bit with the host runner's (the simulator's default one-thread run), which
// the schedule tests check against directly computed results. And the emulation itself:
// divergent barriers, barrier kinds that do not match, a barrier nobody completes, the votes.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "kernels/reduce_copy.h"
#include "support/simt.h"
#include "support/simulator.h"

using namespace ringcc;

namespace {

// Values whose every reduction is exact or at least finite: small multiples of 1/8 for the
// float types, any bits for the integers. Comparisons are of bits, so any value would do; finite
// ones keep a failure's dump readable.
Bytes randomElems(ncclDataType_t type, size_t n, std::mt19937& rng) {
  const size_t es = dataTypeSize(type);
  Bytes b(n * es);
  std::uniform_int_distribution<int> small(-64, 64);
  for (size_t i = 0; i < n; i++) {
    const float f = small(rng) / 8.0f;
    uint64_t bits = rng();
    switch (type) {
      case ncclFloat32:
        std::memcpy(&bits, &f, 4);
        break;
      case ncclFloat64: {
        const double d = f;
        std::memcpy(&bits, &d, 8);
        break;
      }
      case ncclFloat16:
        bits = floatToHalf(f).bits;
        break;
      case ncclBfloat16:
        bits = floatToBf16(f).bits;
        break;
      default:
        break;
    }
    std::memcpy(b.data() + i * es, &bits, es);
  }
  return b;
}

struct TypeOp {
  ncclDataType_t type;
  ncclRedOp_t op;
};
// Sum, max, min, product, float Avg (a pre: PreMulSum by 1/n) and integer Avg (a post).
constexpr TypeOp kTypeOps[] = {{ncclFloat32, ncclSum},  {ncclBfloat16, ncclSum},
                               {ncclInt8, ncclMax},     {ncclInt32, ncclAvg},
                               {ncclFloat16, ncclMin},  {ncclFloat32, ncclAvg},
                               {ncclFloat64, ncclProd}, {ncclUint8, ncclSum}};

const char* protoName(Protocol p) {
  return p == kProtoSimple ? "Simple" : p == kProtoLL ? "LL" : "Direct";
}

// Runs `spec` on the host runner and on the SIMT emulation of the batch kernel with
// `threads` threads a block; both must succeed with the same bytes on every rank, and the
// collective must have written something (so that the comparison means something).
void compareWithHost(SimSpec spec, uint32_t threads, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Bytes> in(spec.nranks), out(spec.nranks);
  for (int r = 0; r < spec.nranks; r++) {
    in[r] = randomElems(spec.type, simInputElems(spec, r), rng);
    out[r] = Bytes(simOutputElems(spec, r) * dataTypeSize(spec.type), 0xEE);
  }
  INFO(collName(spec.coll) << " " << protoName(spec.protocol) << " ranks=" << spec.nranks
                           << " count=" << spec.count << " type=" << (int)spec.type
                           << " op=" << (int)spec.op << " channels=" << spec.nChannels
                           << " inPlace=" << spec.inPlace << " slice=" << spec.sliceElems
                           << " threads=" << threads);
  const SimResult host = simulate(spec, in, out);
  INFO("host: " << host.error);
  REQUIRE(host.result == ncclSuccess);
  spec.simtThreads = threads;
  const SimResult simt = simulate(spec, in, out);
  INFO("simt: " << simt.error);
  REQUIRE(simt.result == ncclSuccess);
  bool wrote = false;
  for (int r = 0; r < spec.nranks; r++) {
    INFO("rank " << r);
    REQUIRE(simt.outputs[r].size() == host.outputs[r].size());
    size_t k = 0;
    while (k < host.outputs[r].size() && simt.outputs[r][k] == host.outputs[r][k]) k++;
    INFO("first differing byte " << k << " of " << host.outputs[r].size());
    CHECK(k == host.outputs[r].size());
    wrote = wrote || host.outputs[r] != out[r];
  }
  CHECK(wrote);
}

constexpr Coll kColls[] = {Coll::AllReduce, Coll::Broadcast,     Coll::Reduce,
                           Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                           Coll::Gather,    Coll::Scatter};
constexpr Protocol kProtos[] = {kProtoSimple, kProtoLL, kProtoDirect};

}  // namespace

// ------------------------------------------------------------------------------ [simt_coll]

TEST_CASE("SIMT: every collective and protocol on 2-4 ranks, bit for bit as the host runner",
          "[simt_coll]") {
  int n = 0;
  for (Coll coll : kColls) {
    for (Protocol proto : kProtos) {
      for (int ranks = 2; ranks <= 4; ranks++, n++) {
        SimSpec s;
        s.coll = coll;
        s.protocol = proto;
        s.nranks = ranks;
        const TypeOp to = kTypeOps[n % (sizeof(kTypeOps) / sizeof(kTypeOps[0]))];
        s.type = to.type;
        s.op = collReduces(coll) ? to.op : ncclSum;
        s.root = (n * 7 + 1) % ranks;
        s.inPlace = coll != Coll::AllToAll && n % 2 == 1;
        s.nChannels = 1 + n % 2;
        const size_t es = dataTypeSize(s.type);
        // About 5,000 bytes a slice: several packs (Simple) and several rounds of lines (LL)
        // per thread, and a slice that is not a whole number of packs or lines.
        s.sliceElems = (5000 + 8 * (n % 3)) / es;
        s.chunkElems = 2 * s.sliceElems;
        // A prime count: every channel's and rank's share ends off a pack boundary, and in
        // place the ranks' blocks start off one.
        s.count = 7919 + 2 * (size_t)n;
        s.doublingMaxBytes = 0;  // the ring, not recursive doubling, at any power of two
        compareWithHost(s, n % 3 == 2 ? 48 : 32, 1000 + n);
      }
    }
  }
}

TEST_CASE("SIMT: tiny messages and recursive doubling (one element, fewer than a thread each)",
          "[simt_coll]") {
  int n = 0;
  for (Protocol proto : kProtos) {
    for (size_t count : {1, 5, 33}) {
      SimSpec s;
      s.coll = Coll::AllReduce;
      s.protocol = proto;
      s.nranks = 4;
      s.type = ncclFloat32;
      s.op = ncclSum;
      s.count = count;
      s.sliceElems = 16;
      s.doublingMaxBytes = n % 2 ? ~0ull : 0;
      compareWithHost(s, 32, 77 + n++);
    }
  }
}

TEST_CASE("SIMT: a batch of collectives back to back on the same connections, mixed protocols",
          "[simt_coll]") {
  std::mt19937 rng(5);
  std::vector<SimCase> cases;
  int i = 0;
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::ReduceScatter}) {
    SimCase c;
    c.spec.coll = coll;
    c.spec.nranks = 3;
    c.spec.type = ncclFloat32;
    c.spec.protocol = kProtos[i % 3];
    c.spec.count = 1001 + 10 * (size_t)i;
    c.spec.sliceElems = 300;
    c.spec.chunkElems = 600;
    for (int r = 0; r < 3; r++) {
      c.inputs.push_back(randomElems(ncclFloat32, simInputElems(c.spec, r), rng));
      c.outputs.push_back(Bytes(simOutputElems(c.spec, r) * 4, 0));
    }
    cases.push_back(c);
    i++;
  }
  std::vector<SimCase> host = cases, simt = cases;
  SimResult h = simulateBatch(&host);
  INFO("host: " << h.error);
  REQUIRE(h.result == ncclSuccess);
  simt[0].spec.simtThreads = 32;  // the batch's options come from its first case
  SimResult d = simulateBatch(&simt);
  INFO("simt: " << d.error);
  REQUIRE(d.result == ncclSuccess);
  for (size_t k = 0; k < cases.size(); k++) {
    INFO("collective " << k);
    CHECK(simt[k].outputs == host[k].outputs);
  }
}

TEST_CASE("SIMT: send/recv in a ring, every protocol", "[simt_coll]") {
  for (Protocol proto : kProtos) {
    SimP2pSpec spec;
    spec.type = ncclFloat32;
    spec.nranks = 3;
    spec.protocol = proto;
    spec.sliceElems = 700;
    std::mt19937 rng(9);
    std::vector<std::vector<SimP2pOp>> ops(3);
    std::vector<std::vector<Bytes>> bufs(3);
    for (int r = 0; r < 3; r++) {
      const size_t count = 2049 + 100 * (size_t)r;  // what rank r sends
      const size_t from = 2049 + 100 * (size_t)((r + 2) % 3);
      ops[r] = {SimP2pOp{true, (r + 1) % 3, count}, SimP2pOp{false, (r + 2) % 3, from}};
      bufs[r] = {randomElems(ncclFloat32, count, rng), Bytes(from * 4, 0)};
    }
    auto host = bufs, simt = bufs;
    INFO(protoName(proto));
    SimResult h = simulateP2p(spec, ops, &host);
    INFO("host: " << h.error);
    REQUIRE(h.result == ncclSuccess);
    spec.simtThreads = 32;
    SimResult d = simulateP2p(spec, ops, &simt);
    INFO("simt: " << d.error);
    REQUIRE(d.result == ncclSuccess);
    for (int r = 0; r < 3; r++) {
      CHECK(simt[r][1] == host[r][1]);
      CHECK(host[r][1] == bufs[(r + 2) % 3][0]);  // what the ring's previous rank sent
    }
  }
}

// ------------------------------------------------------------------------------- [simt_512]

TEST_CASE("SIMT: the real block, 512 threads, all-reduce on 2 ranks, every protocol",
          "[simt_512]") {
  int n = 0;
  for (Protocol proto : kProtos) {
    SimSpec s;
    s.coll = Coll::AllReduce;
    s.protocol = proto;
    s.nranks = 2;
    s.type = ncclFloat32;
    s.op = ncclSum;
    s.inPlace = n == 1;
    // The kernel's slices: LL 8 KB (two lines a thread), Simple and Direct 64 KB (eight packs
    // a thread: two groups of four in flight).
    s.sliceElems = proto == kProtoLL ? 2048 : 16384;
    s.chunkElems = s.sliceElems;
    s.count = 2 * 2 * s.sliceElems + 13;
    s.doublingMaxBytes = 0;
    compareWithHost(s, 512, 4242 + n++);
  }
}

// ----------------------------------------------------------------------------------- [simt]

TEST_CASE("SIMT: votes of __syncthreads_and and __syncthreads_or", "[simt]") {
  std::atomic<int> wrong{0};
  simt::Launch l;
  l.threads = 40;
  l.blocks = 2;
  l.kernel = [&](simt::Thread& t) {
    for (uint32_t odd = 0; odd < 41; odd += 10) {
      const bool p = t.thread() != odd;  // false on one thread (none when odd == 40)
      const bool all = t.barrierAnd(p), any = t.barrierOr(!p);
      if (all != (odd >= 40) || any != (odd < 40)) wrong++;
    }
    t.barrier();
  };
  CHECK(simt::runGrid({l}) == "");
  CHECK(wrong == 0);
}

TEST_CASE("SIMT: a thread that skips a barrier is a divergent barrier, not a hang", "[simt]") {
  simt::Launch l;
  l.threads = 32;
  l.kernel = [](simt::Thread& t) {
    t.barrier();
    if (t.thread() != 5) t.barrier();  // thread 5 skips the second one
    t.barrier();
  };
  const std::string error = simt::runGrid({l});
  INFO(error);
  CHECK(error.find("divergent barrier") != std::string::npos);
  CHECK(error.find("left the kernel") != std::string::npos);
}

TEST_CASE("SIMT: a __syncthreads against a __syncthreads_and is divergent", "[simt]") {
  simt::Launch l;
  l.threads = 8;
  l.kernel = [](simt::Thread& t) {
    if (t.thread() == 0)
      t.barrierAnd(true);
    else
      t.barrier();
  };
  const std::string error = simt::runGrid({l});
  INFO(error);
  CHECK(error.find("divergent barrier") != std::string::npos);
  CHECK(error.find("__syncthreads_and") != std::string::npos);
}

TEST_CASE("SIMT: a barrier one thread never reaches times out and every thread unwinds",
          "[simt]") {
  simt::Launch l;
  l.threads = 16;
  l.kernel = [](simt::Thread& t) {
    if (t.thread() == 3)
      for (unsigned polls = 0;; ++polls) t.nap(polls);  // waits "for a peer" for ever
    t.barrier();
  };
  const std::string error = simt::runGrid({l}, 0.5);
  INFO(error);
  CHECK(error.find("barrier timeout: 15 of 16") != std::string::npos);
}

TEST_CASE("SIMT: exact comparisons catch a wrong lane split and a lost tail", "[simt]") {
  // The packed reduce-copy shared by 48 emulated threads, as the kernel shares a slice, against
  // the one-thread reduceCopy; then the same with the split broken two ways.
  const size_t count = 1003;  // not a whole number of packs: a tail
  std::mt19937 rng(3);
  const Bytes a = randomElems(ncclFloat32, count, rng), b = randomElems(ncclFloat32, count, rng);
  Bytes want(count * 4);
  const RedOp op = makeRedOp(ncclSum, ncclFloat32, 2);
  reduceCopy(ncclFloat32, op, a.data(), b.data(), want.data(), nullptr, count, false);
  auto run = [&](int brokenBy) {
    Bytes got(count * 4, 0);
    simt::Launch l;
    l.threads = 48;
    l.kernel = [&](simt::Thread& t) {
      // 1: one worker too many (its share never done); 2: the last element left out.
      const size_t workers = t.threads() + (brokenBy == 1 ? 1 : 0);
      const size_t n = count - (brokenBy == 2 ? 1 : 0);
      reduceCopyPacked(ncclFloat32, op, a.data(), b.data(), got.data(), nullptr, n, false,
                       t.thread(), workers);
      t.barrier();
    };
    REQUIRE(simt::runGrid({l}) == "");
    return got;
  };
  CHECK(run(0) == want);
  CHECK(run(1) != want);
  CHECK(run(2) != want);
}
