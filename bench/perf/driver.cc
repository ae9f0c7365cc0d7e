#include "bench/perf/driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/banner.h"
#include "bench/perf/perf_json.h"
#include "bench/perf/perf_run.h"
#include "bench/perf/perf_setup.h"
#include "bench/perf/report.h"
#include "bench/perf/timing.h"
#include "bench/perf/watchdog.h"

// runPerf is the list of a run's stages; each is a function of the file of its job
// (perf_setup.h: set-up, timing.h: the timing loop, banner.h and report.h: the text,
// perf_json.h: the -J file, watchdog.h: timeouts), sharing the Run of perf_run.h.

namespace ringcc::bench {
namespace {

using perf::Run;
using perf::ThreadCtx;

// The footer, the JSON totals and the exit code, once every thread has finished.
int summarize(Run& run, int errors, double avgBw) {
  const char* minBwEnv = std::getenv("NCCL_TESTS_MIN_BW");
  double minBw = minBwEnv ? std::atof(minBwEnv) : -1;
  const char* last = run.api->getLastError ? run.api->getLastError(nullptr) : nullptr;
  perf::printFooter(run, errors, avgBw, minBw, last);
  if (run.json) perf::writeJsonTotals(run, errors, avgBw, minBw, last);
  bool bad = errors != 0 || (minBw >= 0 && avgBw < minBw * 0.9);
  return bad ? kPerfWrongData : kPerfSuccess;
}

// The table: every thread's timing loop (this thread is thread 0), then the totals over the
// threads and processes, the communicators' end and the footer.
int runThreads(Run& run, perf::Watchdog& watchdog) {
  perf::print(run, tableHeader(run.opt.reportCpuTime ? "cputime" : "time"));
  if (run.json) {
    run.json->w.key("results");
    run.json->w.beginList();
  }
  std::vector<ThreadCtx> ctx(run.nThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < run.nThreads; ++t) {
    ctx[t].run = &run;
    ctx[t].thread = t;
  }
  for (int t = 1; t < run.nThreads; ++t)
    threads.emplace_back([&ctx, t] { perf::threadMain(ctx[t]); });
  perf::threadMain(ctx[0]);
  for (std::thread& th : threads) th.join();
  watchdog.stop();

  int errors = 0;
  double bwSum = 0;
  int bwCount = 0;
  for (const ThreadCtx& t : ctx) {
    errors += t.errors;
    bwSum += t.bwSum;
    bwCount += t.bwCount;
  }
  int code = run.failed ? run.failCode : kPerfSuccess;
  if (!run.failed && run.group->size() > 1) {
    double e = errors;
    std::string err;
    if (!run.group->allreduce(&e, 1, CtrlReduce::Sum, err)) {
      std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
      code = kPerfInternalError;
    }
    errors = static_cast<int>(e);
  }
  // Aborted communicators are gone; destroying them again would touch freed state.
  if (!run.commsAborted)
    for (ncclComm_t c : run.comms)
      if (c) run.api->commDestroy(c);
  perf::freeBuffers(run);
  if (code != kPerfSuccess) return code;
  return summarize(run, errors, bwCount ? bwSum / bwCount : 0);
}

// Everything after the process group exists, stage by stage; the exit code (runPerf then
// writes the -J file and finalizes the group, whatever it is). `watchdog` is runPerf's, so
// that it watches until the group is finalized.
int runWithGroup(Run& run, std::optional<perf::Watchdog>& watchdog, int argc, char** argv) {
  if (int code = perf::checkRequest(run); code != kPerfSuccess) return code;
  int version = 0;
  if (run.api->getVersion) run.api->getVersion(&version);
  if (run.json) perf::writeJsonHeader(run, argc, argv, version);
  perf::printBanner(run, version);
  if (run.json) perf::writeJsonConfig(run);
  perf::limitToMemory(run);
  if (int code = perf::shareUniqueId(run); code != kPerfSuccess) return code;
  std::string noCuda = "RINGCC_DEVICE=host";  // why the ranks have no GPU, if they have none
  if (int code = perf::openDevices(run, &noCuda); code != kPerfSuccess) return code;
  watchdog.emplace(run);
  if (!run.opt.parallelInit && !perf::initComms(run)) return run.failCode;
  if (int code = perf::chooseMemory(run, noCuda); code != kPerfSuccess) return code;
  std::string deviceErr, err;
  const bool allocated = perf::allocBuffers(run, &deviceErr);
  if (!perf::printDevices(run, &err)) {
    std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
    perf::abortComms(run);
    perf::freeBuffers(run);
    return kPerfInternalError;
  }
  if (run.json) perf::writeJsonDevices(run);
  if (!allocated) {
    std::fprintf(run.io.err, "%s: cannot allocate %zu-byte buffers for %d ranks%s%s\n",
                 run.program.c_str(), run.maxBytes, run.nLocal(), deviceErr.empty() ? "" : ": ",
                 deviceErr.c_str());
    perf::abortComms(run);
    perf::freeBuffers(run);
    return kPerfInternalError;
  }
  return runThreads(run, *watchdog);
}

}  // namespace

int runPerf(CollKind kind, int argc, char** argv, const CommApi& api, PerfIo io) {
  Run run;
  run.kind = kind;
  run.spec = &collSpec(kind);
  run.api = &api;
  run.io = io;
  const char* slash = std::strrchr(argv[0], '/');
  run.program = slash ? slash + 1 : argv[0];

  ParseResult parsed = parsePerfArgs(argc, argv, run.opt);
  if (parsed.status == ParseStatus::Help) {
    std::fputs(perfUsage(run.program.c_str()).c_str(), io.out);
    return kPerfSuccess;
  }
  if (parsed.status == ParseStatus::Error) {
    std::fprintf(io.err, "%s: %s\n", run.program.c_str(), parsed.error.c_str());
    return kPerfBadArguments;
  }
  run.nThreads = run.opt.nThreads;
  run.nGpus = run.opt.nGpus;

  std::string err;
  std::unique_ptr<ProcessGroup> group = makeProcessGroup(&argc, &argv, err);
  if (!group) {
    std::fprintf(io.err, "%s: %s\n", run.program.c_str(), err.c_str());
    return kPerfInvalidUsage;
  }
  run.group = group.get();
  run.printer = group->rank() == 0;
  run.nranks = group->size() * run.nThreads * run.nGpus;
  run.reducer = std::make_unique<ThreadReducer>(run.nThreads);
  std::unique_ptr<perf::JsonOut> json;
  if (run.printer && !run.opt.jsonFile.empty()) json = perf::openJson(run.opt.jsonFile, io.out);
  run.json = json.get();

  std::optional<perf::Watchdog> watchdog;
  const int code = perf::closeJson(run, runWithGroup(run, watchdog, argc, argv));
  group->finalize();
  return code;
}

}  // namespace ringcc::bench
