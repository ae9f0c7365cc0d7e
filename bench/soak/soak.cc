// ringcc-soak: random operations, every result checked exactly. Run under ringcc-run:
//
//   ringcc-run -n 4 build/bench/ringcc-soak [--ops N] [--seed S] [--max-bytes B]
//
// Every rank draws the same sequence from the seed: a communicator (the world, its half after
// ncclCommSplit by rank parity, or a duplicate of the world made by splitting with one color),
// one to three operations in a group (every collective, datatype and reduction op incl. both
// PreMulSum kinds, sizes log-uniform from 0 to --max-bytes per rank, roots, in place or not).
// Inputs are a pure function of (seed, rank, element) whose reduction is the same in any order
// (tests/coll/coll_check.h), so each rank knows the exact bits it must get, and its buffers
// are guarded on both sides against stray writes. Rank 0 prints one line: operations, groups,
// seconds, corrupted results and errors; the exit status is non-zero if either is not 0.
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/launcher/launch_protocol.h"
#include "coll/coll_check.h"
#include "nccl.h"

using namespace ringcc::test;

namespace {

struct Options {
  uint64_t ops = 1000;
  uint64_t seed = 1;
  uint64_t maxBytes = 64ull << 20;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--ops")
      o->ops = std::strtoull(v, nullptr, 10);
    else if (a == "--seed")
      o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--max-bytes")
      o->maxBytes = std::strtoull(v, nullptr, 10);
    else
      return false;
  }
  return o->maxBytes > 0;
}

// The communicators every rank holds, in the same order everywhere.
struct Comms {
  ncclComm_t world = nullptr, half = nullptr, dup = nullptr;
  ncclComm_t get(int which) const { return which == 0 ? world : which == 1 ? half : dup; }
};

// One drawn operation for a communicator of (at least) n ranks.
CollCase draw(std::mt19937_64& rng, const Options& o, uint64_t index, int n) {
  CollCase c;
  c.coll = kAllColls[rng() % (sizeof(kAllColls) / sizeof(kAllColls[0]))];
  c.type = kAllTypes[rng() % (sizeof(kAllTypes) / sizeof(kAllTypes[0]))];
  c.op = collReduces(c.coll) ? kReduceOps[rng() % (sizeof(kReduceOps) / sizeof(kReduceOps[0]))]
                             : Op::Copy;
  // Bytes per rank, log-uniform in [1, maxBytes], and sometimes none at all.
  const double lg = std::uniform_real_distribution<double>(0, std::log2(double(o.maxBytes)))(rng);
  uint64_t bytes = rng() % 16 == 0 ? 0 : static_cast<uint64_t>(std::exp2(lg));
  // The blocked collectives move n blocks per rank: keep their total within maxBytes too.
  const bool blocked = c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter ||
                       c.coll == Coll::AlltoAll || c.coll == Coll::Gather ||
                       c.coll == Coll::Scatter;
  if (blocked) bytes /= static_cast<uint64_t>(n);
  c.count = static_cast<size_t>(bytes / typeSize(c.type));
  c.root = static_cast<int>(rng() % static_cast<uint64_t>(n));
  c.inPlace = rng() % 2 == 0;
  c.seed = o.seed * 1000003 + index;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  // Every operation allocates its buffers afresh, up to a few hundred MiB: keep freed memory
  // in the heap for the next one instead of returning it to the kernel, which would fault in
  // and zero every page again (a third of the soak's time before this).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  Options o;
  const char* rankEnv = getenv("RINGCC_RANK");
  const char* sizeEnv = getenv("RINGCC_NRANKS");
  const char* idEnv = getenv("RINGCC_UNIQUE_ID");
  if (!parse(argc, argv, &o) || !rankEnv || !sizeEnv || !idEnv) {
    std::fprintf(stderr,
                 "usage: ringcc-run -n N ringcc-soak [--ops N] [--seed S] [--max-bytes B]\n");
    return 2;
  }
  const int rank = std::atoi(rankEnv), nranks = std::atoi(sizeEnv);
  auto id = ringcc::bench::uniqueIdFromHex(idEnv);
  if (!id) return 2;

  Comms comms;
  ncclResult_t r = ncclCommInitRank(&comms.world, nranks, *id, rank);
  if (r == ncclSuccess) r = ncclCommSplit(comms.world, rank % 2, rank, &comms.half, nullptr);
  if (r == ncclSuccess) r = ncclCommSplit(comms.world, 0, rank, &comms.dup, nullptr);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ringcc-soak: rank %d: making communicators: %s\n", rank,
                 ncclGetLastError(nullptr));
    return 3;
  }
  int commSize[3], commRank[3];
  for (int w = 0; w < 3; ++w) {
    ncclCommCount(comms.get(w), &commSize[w]);
    ncclCommUserRank(comms.get(w), &commRank[w]);
  }
  // The half communicators differ in size when nranks is odd; the draw must not depend on
  // which half a rank is in, so it uses the smaller one's size for roots.
  int drawSize[3] = {commSize[0], nranks / 2 > 0 ? nranks / 2 : 1, commSize[2]};

  std::mt19937_64 rng(o.seed);
  uint64_t done = 0, groups = 0, corrupted = 0, errors = 0;
  const auto start = std::chrono::steady_clock::now();
  while (done < o.ops) {
    const int k = 1 + static_cast<int>(rng() % 3);  // operations in this group
    const int which = static_cast<int>(rng() % 3);  // all on one communicator
    std::vector<std::unique_ptr<CaseData>> data;
    std::vector<std::unique_ptr<CollRank>> ranks;
    for (int i = 0; i < k && done + i < o.ops; ++i) {
      const CollCase c = draw(rng, o, done + i, drawSize[which]);
      data.push_back(std::make_unique<CaseData>(c, commSize[which]));
      ranks.push_back(std::make_unique<CollRank>(*data.back(), commRank[which], comms.get(which)));
    }
    ncclGroupStart();
    for (auto& cr : ranks) {
      if (cr->issue() != ncclSuccess) ++errors;
    }
    if (ncclGroupEnd() != ncclSuccess) ++errors;
    if (errors) {
      std::fprintf(stderr, "ringcc-soak: rank %d: group %llu failed: %s\n", rank,
                   static_cast<unsigned long long>(groups), ncclGetLastError(comms.get(which)));
      break;
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      const std::string bad = ranks[i]->check();
      if (bad.empty()) continue;
      ++corrupted;
      std::fprintf(stderr, "ringcc-soak: rank %d: op %llu %s: %s\n", rank,
                   static_cast<unsigned long long>(done + i),
                   data[i]->c.describe(commSize[which]).c_str(), bad.c_str());
    }
    done += ranks.size();
    ++groups;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Every rank's verdict, summed, so that rank 0 reports for all (a rank that failed reports
  // its own: the others may be stuck in the failed group until their timeout).
  uint64_t mine[2] = {corrupted, errors}, all[2] = {corrupted, errors};
  if (errors == 0 &&
      ncclAllReduce(mine, all, 2, ncclUint64, ncclSum, comms.world, nullptr) != ncclSuccess)
    all[1] = errors = 1;
  if (rank == 0 || errors != 0)
    std::printf(
        "ringcc-soak: %d ranks, %llu operations in %llu groups, %.1f s, seed %llu, "
        "max %llu bytes: %llu corrupted results, %llu errors\n",
        nranks, static_cast<unsigned long long>(done), static_cast<unsigned long long>(groups),
        seconds, static_cast<unsigned long long>(o.seed),
        static_cast<unsigned long long>(o.maxBytes), static_cast<unsigned long long>(all[0]),
        static_cast<unsigned long long>(all[1]));
  if (errors) {
    ncclCommAbort(comms.dup);
    ncclCommAbort(comms.half);
    ncclCommAbort(comms.world);
  } else {
    ncclCommDestroy(comms.dup);
    ncclCommDestroy(comms.half);
    ncclCommDestroy(comms.world);
  }
  return all[0] == 0 && all[1] == 0 ? 0 : 1;
}
