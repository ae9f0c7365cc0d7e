// adasum_bench: ringccAllReduceAdasum's bus bandwidth beside ringcc's own all-reduce of the
// same buffer, float32, under ringcc-run (docs/adasum.md, "Speed").
//
//   ringcc-run -n 2 adasum_bench [minBytes] [maxBytes] [iterations]
//
// Sizes double from minBytes (default 1 MiB) to maxBytes (default 64 MiB). Per size the two
// calls alternate in rounds (5 rounds of `iterations` calls each, default 10), so both see the
// same machine; rank 0 prints the median round of each as nccl-tests' bus bandwidth
// (2 (n-1)/n bytes / time) and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/launcher/launch_protocol.h"
#include "nccl.h"
#include "ringcc.h"

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int die(const char* what, ncclResult_t r) {
  fprintf(stderr, "adasum_bench: %s: %s\n", what, ncclGetErrorString(r));
  return 3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The slowest rank's seconds for `iters` calls of `call` (an all-reduce of the maximum).
template <class Call>
ncclResult_t timeRound(ncclComm_t comm, int iters, Call call, double* seconds) {
  ncclResult_t r = ncclSuccess;
  double t0 = nowSeconds();
  for (int i = 0; i < iters && r == ncclSuccess; ++i) r = call();
  double t = nowSeconds() - t0;
  if (r != ncclSuccess) return r;
  r = ncclAllReduce(&t, seconds, 1, ncclFloat64, ncclMax, comm, nullptr);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  auto me = ringcc::bench::launchedRankFromEnv();
  if (!me) {
    fprintf(stderr, "adasum_bench: run me under ringcc-run -n N\n");
    return 2;
  }
  const int rank = me->rank, nranks = me->nranks;
  const size_t minBytes = argc > 1 ? strtoull(argv[1], nullptr, 0) : (1u << 20);
  const size_t maxBytes = argc > 2 ? strtoull(argv[2], nullptr, 0) : (64u << 20);
  const int iters = argc > 3 ? atoi(argv[3]) : 10;
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, me->id, rank);
  if (r != ncclSuccess) return die("ncclCommInitRank", r);

  std::vector<float> buf(maxBytes / sizeof(float));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = 1e-3f * static_cast<float>((i * 7 + rank) % 1000);
  if (rank == 0)
    printf("# %d ranks, float32, median of 5 rounds of %d calls\n"
           "# %12s %12s %12s %8s\n",
           nranks, iters, "size(B)", "adasum GB/s", "allred GB/s", "ratio");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
    const size_t count = bytes / sizeof(float);
    auto adasum = [&] {
      return ringccAllReduceAdasum(buf.data(), buf.data(), count, ncclFloat32, nullptr, 0, comm,
                                   nullptr);
    };
    auto allReduce = [&] {
      return ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    };
    // Warm-up: connections, pages.
    if ((r = adasum()) != ncclSuccess) return die("ringccAllReduceAdasum", r);
    if ((r = allReduce()) != ncclSuccess) return die("ncclAllReduce", r);
    std::vector<double> ta, tr;
    for (int round = 0; round < 5; ++round) {
      double s;
      if ((r = timeRound(comm, iters, adasum, &s)) != ncclSuccess) return die("adasum", r);
      ta.push_back(s / iters);
      if ((r = timeRound(comm, iters, allReduce, &s)) != ncclSuccess) return die("allreduce", r);
      tr.push_back(s / iters);
    }
    const double busBytes = 2.0 * (nranks - 1) / nranks * static_cast<double>(bytes);
    const double ga = busBytes / median(ta) / 1e9, gr = busBytes / median(tr) / 1e9;
    if (rank == 0) printf("  %12zu %12.2f %12.2f %8.2f\n", bytes, ga, gr, ga / gr);
  }
  ncclCommDestroy(comm);
  return 0;
}
