#include "bench/perf/perf_run.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace ringcc::bench::perf {

std::string hostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  return host;
}

std::string nowString() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string sprint(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

void print(Run& run, const std::string& s) {
  if (!run.printer) return;
  std::fputs(s.c_str(), run.io.out);
  std::fflush(run.io.out);
}

void abortComms(Run& run) {
  if (run.commsAborted.exchange(true)) return;
  for (ncclComm_t c : run.comms)
    if (c) run.api->commAbort(c);
}

void fail(Run& run, int code) {
  {
    std::lock_guard<std::mutex> lock(run.failMu);
    if (run.failCode == kPerfSuccess) run.failCode = code;
  }
  if (!run.failed.exchange(true)) run.reducer->abort();
}

bool ncclFailed(Run& run, ncclResult_t rc, const char* what) {
  if (!run.failed.load()) {
    const char* last = run.api->getLastError ? run.api->getLastError(nullptr) : "";
    std::fprintf(run.io.out, "%s: Test NCCL failure %s '%s / %s'\n", hostName().c_str(), what,
                 run.api->getErrorString ? run.api->getErrorString(rc) : "error", last ? last : "");
    std::fflush(run.io.out);
  }
  fail(run, run.timedOut ? kPerfTimeout : kPerfNcclError);
  return false;
}

bool deviceFailed(Run& run) {
  std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), run.devs.lastError());
  fail(run, kPerfCudaError);
  return false;
}

bool aggregate(ThreadCtx& t, double& value, Average mode) {
  Run& run = *t.run;
  ReduceOp op = ReduceOp::Sum;
  CtrlReduce cross = CtrlReduce::Sum;
  switch (mode) {
    case Average::Rank0:
      op = ReduceOp::First;
      break;
    case Average::Avg:
      break;
    case Average::Min:
      op = ReduceOp::Min;
      cross = CtrlReduce::Min;
      break;
    case Average::Max:
      op = ReduceOp::Max;
      cross = CtrlReduce::Max;
      break;
  }
  auto leader = [&](double& v) {
    if (mode == Average::Rank0 && run.group->rank() != 0) v = 0;
    if (run.group->size() > 1) {
      std::string err;
      if (!run.group->allreduce(&v, 1, cross, err)) {
        std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
        return false;
      }
    }
    if (mode == Average::Avg) v /= static_cast<double>(run.group->size()) * run.nThreads;
    return true;
  };
  if (!run.reducer->reduce(t.thread, value, op, leader)) {
    fail(run, run.timedOut ? kPerfTimeout : kPerfInternalError);
    return false;
  }
  return true;
}

bool sumOver(ThreadCtx& t, double& value) {
  Run& run = *t.run;
  auto leader = [&](double& v) {
    if (run.group->size() <= 1) return true;
    std::string err;
    if (run.group->allreduce(&v, 1, CtrlReduce::Sum, err)) return true;
    std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
    return false;
  };
  if (run.reducer->reduce(t.thread, value, ReduceOp::Sum, leader)) return true;
  fail(run, run.timedOut ? kPerfTimeout : kPerfInternalError);
  return false;
}

bool barrier(ThreadCtx& t) {
  double v = 0;
  return sumOver(t, v);
}

bool syncThread(ThreadCtx& t) {
  Run& run = *t.run;
  if (!run.onDevice) return true;
  for (int i = 0; i < run.nGpus; ++i)
    if (!deviceOk(run, run.devs.sync(t.thread * run.nGpus + i))) return false;
  return true;
}

}  // namespace ringcc::bench::perf
