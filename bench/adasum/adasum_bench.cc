// adasum_bench: ringccAllReduceAdasum's bus bandwidth beside ringcc's own all-reduce of the
// same buffer, float32, under ringcc-run (docs/adasum.md, "Speed").
//
//   ringcc-run -n 2 adasum_bench [minBytes] [maxBytes] [iterations] [factor]
//
// Sizes (as nccl-tests takes them: bytes, or with a K, M or G suffix) grow by `factor` (default 2) from minBytes
// (default 1 MiB) to maxBytes (default 64 MiB). Per size the two
// calls alternate in rounds (5 rounds of `iterations` calls each, default 10), so both see the
// same machine; rank 0 prints the median round of each as nccl-tests' bus bandwidth
// (2 (n-1)/n bytes / time), their ratio, and the CPU time rank 0's process spent per call
// (user + system: on a loaded machine wall time says more about the neighbours than about
// the work, CPU time less so; waits that spin count too).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <sys/resource.h>

#include "bench/launcher/launch_protocol.h"
#include "bench/perf/perf_options.h"
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

double cpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The slowest rank's seconds for `iters` calls of `call` (an all-reduce of the maximum), and
// this process's CPU seconds for them.
template <class Call>
ncclResult_t timeRound(ncclComm_t comm, int iters, Call call, double* seconds, double* cpu) {
  ncclResult_t r = ncclSuccess;
  double t0 = nowSeconds(), c0 = cpuSeconds();
  for (int i = 0; i < iters && r == ncclSuccess; ++i) r = call();
  double t = nowSeconds() - t0;
  *cpu = cpuSeconds() - c0;
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
  const size_t minBytes = argc > 1 ? ringcc::bench::parseSize(argv[1]).value_or(0) : (1u << 20);
  const size_t maxBytes = argc > 2 ? ringcc::bench::parseSize(argv[2]).value_or(0) : (64u << 20);
  const int iters = argc > 3 ? atoi(argv[3]) : 10;
  const size_t factor = argc > 4 ? std::max(2, atoi(argv[4])) : 2;
  if (minBytes < sizeof(float) || maxBytes < minBytes || iters < 1) {
    fprintf(stderr, "adasum_bench: usage: adasum_bench [minBytes] [maxBytes] [iterations] [factor]\n");
    return 2;
  }
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, me->id, rank);
  if (r != ncclSuccess) return die("ncclCommInitRank", r);

  std::vector<float> buf(maxBytes / sizeof(float));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = 1e-3f * static_cast<float>((i * 7 + rank) % 1000);
  if (rank == 0)
    printf("# %d ranks, float32, median of 5 rounds of %d calls\n"
           "# %12s %12s %12s %8s %12s %12s\n",
           nranks, iters, "size(B)", "adasum GB/s", "allred GB/s", "ratio", "adasum cpu", "allred cpu");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
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
    std::vector<double> ta, tr, ca, cr;
    for (int round = 0; round < 5; ++round) {
      double s, c;
      if ((r = timeRound(comm, iters, adasum, &s, &c)) != ncclSuccess) return die("adasum", r);
      ta.push_back(s / iters);
      ca.push_back(c / iters);
      if ((r = timeRound(comm, iters, allReduce, &s, &c)) != ncclSuccess) return die("allreduce", r);
      tr.push_back(s / iters);
      cr.push_back(c / iters);
    }
    const double busBytes = 2.0 * (nranks - 1) / nranks * static_cast<double>(bytes);
    const double ga = busBytes / median(ta) / 1e9, gr = busBytes / median(tr) / 1e9;
    if (rank == 0)
      printf("  %12zu %12.2f %12.2f %8.2f %9.2f ms %9.2f ms\n", bytes, ga, gr, ga / gr,
             1e3 * median(ca), 1e3 * median(cr));
  }
  ncclCommDestroy(comm);
  return 0;
}
