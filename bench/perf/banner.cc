#include "bench/perf/banner.h"

#include <unistd.h>

#include <vector>

#include "bench/perf/report.h"
#include "ringcc_config.h"

namespace ringcc::bench::perf {
namespace {

std::string deviceLine(Run& run, int localIdx) {
  int thread = localIdx / run.nGpus, i = localIdx % run.nGpus;
  if (run.onDevice)
    return sprint("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
                  run.globalRank(thread, i), 0, static_cast<int>(getpid()), hostName().c_str(),
                  run.devs.rank(localIdx).dev, "cuda", "CUDA device memory");
  return sprint("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
                run.globalRank(thread, i), 0, static_cast<int>(getpid()), hostName().c_str(), -1,
                "host", "ringcc host memory");
}

}  // namespace

void printBanner(Run& run, int version) {
  const PerfOptions& o = run.opt;
  print(run, sprint("# ringcc perf tools (nccl-tests compatible) version %s nccl-headers=%d "
                    "nccl-library=%d\n",
                    RINGCC_VERSION, NCCL_VERSION_CODE, version));
  print(run, sprint("# Collective test starting: %s\n", run.program.c_str()));
  print(run,
        sprint("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: "
               "%d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
               run.nThreads, run.nGpus, o.minBytes, o.maxBytes,
               o.stepFactor > 1 ? o.stepFactor : o.stepBytes, o.stepFactor > 1 ? "factor" : "bytes",
               o.warmupIters, o.iters, o.aggIters, o.check, 0, 0));
  if (o.blocking == 1)
    print(run, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.blocking > 1)
    print(run, "# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o.parallelInit)
    print(run, "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  for (const std::string& flag : o.ignored)
    print(run, "# Ignoring " + flag + ": not used with host communicators\n");
  if (run.group->size() > 1)
    print(run, sprint("# Processes: %d from %s\n", run.group->size(), run.group->source()));
  print(run, "#\n");
}

bool printDevices(Run& run, std::string* err) {
  // Who runs where: every process's lines, printed by process 0.
  std::string lines;
  for (int k = 0; k < run.nLocal(); ++k) lines += deviceLine(run, k);
  std::vector<std::string> allLines;
  if (!run.group->gather(lines, allLines, *err)) return false;
  print(run, "# Using devices\n");
  for (const std::string& l : allLines) print(run, l);
  return true;
}

void printFooter(Run& run, int errors, double avgBw, double minBw, const char* lastError) {
  print(run, footer(errors, avgBw, minBw, run.program.c_str()));
  print(run, "#\n");
  if (lastError && *lastError)
    print(run, sprint("# error: %s\n", lastError));
  else
    print(run, "\n");
}

}  // namespace ringcc::bench::perf
