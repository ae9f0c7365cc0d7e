// ringcc-pairprobe: point-to-point bandwidth and latency between every ordered pair of ranks,
// through the library (ncclSend/ncclRecv), for `ringcc-monitor --heatmap` (docs/monitoring.md).
//
//   ringcc-run -n 4 ringcc-pairprobe [--min 8] [--max 64M] [--out pairs.json]
//   mpirun -np 8 ringcc-pairprobe ...          (on a build with MPI)
//
// Pairs run one at a time (the other ranks wait in a one-element all-reduce between pairs), so
// each number is one link with nothing else on it. For pair (i, j) and each size, rank i sends
// the message and rank j answers with 8 bytes: t(size) is the median round trip. Latency is
// t(min)/2; bandwidth at a size is size / t(size) (the 8-byte answer is included: it is noise
// from a few KiB on). Rank 0 writes the matrices as JSON.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf/process_group.h"
#include "nccl.h"

using namespace ringcc::bench;

namespace {

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  size_t budgetBytes = 256u << 20;  // bytes sent per size and pair, within [kMinIters, kMaxIters]
  std::string out = "pairs.json";
};
constexpr int kMinIters = 3, kMaxIters = 50;

bool parseBytes(const char* text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v <= 0) return false;
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      ++end;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

const char* kUsage =
    "usage: ringcc-pairprobe [--min BYTES] [--max BYTES] [--budget BYTES] [--out FILE]\n"
    "  run under ringcc-run -n N (or mpirun); BYTES take K, M, G suffixes\n";

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if ((a == "--min" || a == "-b") && v && parseBytes(v, &o->minBytes))
      ++i;
    else if ((a == "--max" || a == "-e") && v && parseBytes(v, &o->maxBytes))
      ++i;
    else if (a == "--budget" && v && parseBytes(v, &o->budgetBytes))
      ++i;
    else if (a == "--out" && v)
      o->out = argv[++i];
    else
      return false;
  }
  return o->minBytes <= o->maxBytes;
}

bool ok(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "ringcc-pairprobe: %s failed: %s (%s)\n", what, ncclGetErrorString(r),
               ncclGetLastError(nullptr));
  return false;
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Microseconds per round trip of `bytes` from `from` to `to` and 8 bytes back, the median of
// `iters` (robust against a descheduled round on a shared machine); this rank is one of the
// two.
bool roundTrip(ncclComm_t comm, int rank, int from, int to, size_t bytes, int iters,
               std::vector<char>& buf, double* us) {
  char ack[8] = {};
  auto once = [&]() {
    if (rank == from)
      return ok(ncclSend(buf.data(), bytes, ncclInt8, to, comm, nullptr), "ncclSend") &&
             ok(ncclRecv(ack, sizeof(ack), ncclInt8, to, comm, nullptr), "ncclRecv");
    return ok(ncclRecv(buf.data(), bytes, ncclInt8, from, comm, nullptr), "ncclRecv") &&
           ok(ncclSend(ack, sizeof(ack), ncclInt8, from, comm, nullptr), "ncclSend");
  };
  if (!once()) return false;  // warm-up: connections, plan
  std::vector<double> times(iters);
  for (int i = 0; i < iters; ++i) {
    const double t0 = nowUs();
    if (!once()) return false;
    times[i] = nowUs() - t0;
  }
  std::nth_element(times.begin(), times.begin() + iters / 2, times.end());
  *us = times[iters / 2];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string err;
  std::unique_ptr<ProcessGroup> group = makeProcessGroup(&argc, &argv, err);
  if (!group) {
    std::fprintf(stderr, "ringcc-pairprobe: %s\n", err.c_str());
    return 2;
  }
  const int rank = group->rank(), n = group->size();
  if (n < 2) {
    std::fprintf(stderr, "ringcc-pairprobe: needs at least 2 processes (ringcc-run -n N)\n");
    return 2;
  }
  ncclUniqueId id{};
  bool have = false;
  if (rank == 0 && !group->providesId() && !ok(ncclGetUniqueId(&id), "ncclGetUniqueId")) return 1;
  if (!group->shareId(id, have, err)) {
    std::fprintf(stderr, "ringcc-pairprobe: %s\n", err.c_str());
    return 1;
  }
  ncclComm_t comm = nullptr;
  if (!ok(ncclCommInitRank(&comm, n, id, rank), "ncclCommInitRank")) return 1;

  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes; s *= 2) sizes.push_back(s);
  std::vector<char> buf(o.maxBytes, 1);
  int token = 0, sum = 0;
  // row[j][k]: us per round trip from this rank to j at sizes[k] (0 on the diagonal).
  std::vector<std::vector<double>> row(n, std::vector<double>(sizes.size(), 0.0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      // One pair at a time: everyone leaves the previous pair before the next starts.
      if (!ok(ncclAllReduce(&token, &sum, 1, ncclInt32, ncclSum, comm, nullptr), "barrier"))
        return 1;
      if (rank != i && rank != j) continue;
      for (size_t k = 0; k < sizes.size(); ++k) {
        const int iters =
            static_cast<int>(std::clamp<size_t>(o.budgetBytes / sizes[k], kMinIters, kMaxIters));
        double us = 0;
        if (!roundTrip(comm, rank, i, j, sizes[k], iters, buf, &us)) return 1;
        if (rank == i) row[j][k] = us;
      }
    }
  }
  if (!ok(ncclAllReduce(&token, &sum, 1, ncclInt32, ncclSum, comm, nullptr), "barrier")) return 1;
  ncclCommDestroy(comm);

  // This rank's row as JSON: {"host": ..., "us": [[per size] per peer]}.
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::string mine = std::string("{\"host\":\"") + host + "\",\"us\":[";
  for (int j = 0; j < n; ++j) {
    mine += j ? ",[" : "[";
    for (size_t k = 0; k < sizes.size(); ++k) {
      char num[32];
      std::snprintf(num, sizeof(num), "%s%.3f", k ? "," : "", row[j][k]);
      mine += num;
    }
    mine += "]";
  }
  mine += "]}";
  std::vector<std::string> all;
  if (!group->gather(mine, all, err)) {
    std::fprintf(stderr, "ringcc-pairprobe: %s\n", err.c_str());
    return 1;
  }
  if (rank == 0) {
    std::FILE* f = std::fopen(o.out.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "ringcc-pairprobe: cannot write %s: %s\n", o.out.c_str(),
                   std::strerror(errno));
      return 1;
    }
    std::fprintf(f, "{\"nranks\":%d,\"sizes\":[", n);
    for (size_t k = 0; k < sizes.size(); ++k) std::fprintf(f, "%s%zu", k ? "," : "", sizes[k]);
    std::fprintf(f, "],\"rows\":[\n");
    for (int r = 0; r < n; ++r) std::fprintf(f, "%s%s", all[r].c_str(), r + 1 < n ? ",\n" : "\n");
    std::fprintf(f, "]}\n");
    std::fclose(f);
    std::printf("ringcc-pairprobe: %d ranks, %zu sizes: wrote %s\n", n, sizes.size(),
                o.out.c_str());
  }
  group->finalize();
  return 0;
}
