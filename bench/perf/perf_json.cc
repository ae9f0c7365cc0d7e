#include "bench/perf/perf_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace ringcc::bench::perf {

std::unique_ptr<JsonOut> openJson(const std::string& wanted, FILE* out) {
  auto j = std::make_unique<JsonOut>();
  std::string path = wanted;
  for (int n = 0; n < 1000; ++n) {
    j->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (j->fd >= 0) break;
    if (errno != EEXIST) {
      std::fprintf(out, "# skipping json output; %s not accessible\n", path.c_str());
      return nullptr;
    }
    path = wanted + "." + std::to_string(n);
  }
  if (j->fd < 0) return nullptr;
  j->path = path;
  std::fprintf(out, "# Writing JSON output to %s\n", path.c_str());
  return j;
}

void writeJsonHeader(Run& run, int argc, char** argv, int version) {
  JsonWriter& w = run.json->w;
  w.beginObject();
  w.key("version");
  w.integer(2);
  w.key("start_time");
  w.str(nowString());
  w.key("args");
  w.beginList();
  for (int i = 0; i < argc; ++i) w.str(argv[i]);
  w.endList();
  // Only the variables that steer the library or the launch (nccl-tests writes them all).
  w.key("env");
  w.beginList();
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "NCCL_", 5) == 0 || std::strncmp(*e, "RINGCC_", 7) == 0 ||
        std::strncmp(*e, "UCX_", 4) == 0)
      w.str(*e);
  w.endList();
  w.key("nccl_version");
  w.integer(version);
  w.key("library");
  w.str("ringcc");
}

void writeJsonConfig(Run& run) {
  const PerfOptions& o = run.opt;
  JsonWriter& w = run.json->w;
  w.key("config");
  w.beginObject();
  w.key("nthreads");
  w.integer(run.nThreads);
  w.key("ngpus");
  w.integer(run.nGpus);
  w.key("minimum_bytes");
  w.integer(static_cast<int64_t>(o.minBytes));
  w.key("maximum_bytes");
  w.integer(static_cast<int64_t>(o.maxBytes));
  w.key(o.stepFactor > 1 ? "step_factor" : "step_bytes");
  w.integer(static_cast<int64_t>(o.stepFactor > 1 ? o.stepFactor : o.stepBytes));
  w.key("warmup_iters");
  w.integer(o.warmupIters);
  w.key("iterations");
  w.integer(run.opt.iters);
  w.key("aggregated_iterations");
  w.integer(o.aggIters);
  w.key("validation");
  w.integer(o.check);
  w.key("graph");
  w.integer(0);
  w.key("blocking_collectives");
  w.boolean(o.blocking != 0);
  w.key("per_iter_timing");
  w.boolean(false);
  w.key("parallel_init");
  w.boolean(o.parallelInit != 0);
  w.key("collective");
  w.str(run.spec->name);
  w.key("nranks");
  w.integer(run.nranks);
}

void writeJsonDevices(Run& run) {
  const int nLocal = run.nLocal();
  JsonWriter& w = run.json->w;
  w.key("devices");
  w.beginList();
  for (int r = 0; r < run.nranks; ++r) {
    w.beginObject();
    w.key("rank");
    w.integer(r);
    w.key("group");
    w.integer(0);
    w.key("hostname");
    w.str(hostName());
    // This process's ranks' devices (the JSON lists every rank; others' are not known here).
    const int here = r - run.group->rank() * nLocal;
    const bool mine = run.onDevice && here >= 0 && here < nLocal;
    w.key("device");
    w.integer(mine ? run.devs.rank(here).dev : -1);
    w.key("device_hex");
    w.str(run.onDevice ? "cuda" : "host");
    w.key("device_info");
    w.str(run.onDevice ? "CUDA device memory" : "ringcc host memory");
    w.endObject();
  }
  w.endList();
  w.endObject();  // config
}

void writeJsonRowStart(Run& run, size_t bytes, size_t count, const char* type, const char* op,
                       int root) {
  JsonWriter& w = run.json->w;
  w.beginObject();
  w.key("size");
  w.integer(static_cast<int64_t>(bytes));
  w.key("count");
  w.integer(static_cast<int64_t>(count));
  w.key("type");
  w.str(type);
  w.key("redop");
  w.str(op);
  w.key("root");
  w.integer(root);
}

void writeJsonResult(Run& run, bool inPlace, double timeUs, const Bandwidth& bw, bool reportErrors,
                     double wrong) {
  JsonWriter& w = run.json->w;
  w.key(inPlace ? "in_place" : "out_of_place");
  w.beginObject();
  w.key(run.opt.reportCpuTime ? "cpu_time" : "time");
  w.number(timeUs);
  w.key("alg_bw");
  w.number(bw.algBw);
  w.key("bus_bw");
  w.number(bw.busBw);
  w.key("nwrong");
  if (reportErrors)
    w.number(wrong);
  else
    w.null();
  w.endObject();
}

void writeJsonRowEnd(Run& run) {
  JsonWriter& w = run.json->w;
  w.key("actual_iterations");
  w.integer(run.opt.iters);
  w.key("experiment_name");
  w.str("");
  w.endObject();
}

void writeJsonTotals(Run& run, int errors, double avgBw, double minBw, const char* lastError) {
  JsonWriter& w = run.json->w;
  w.endList();  // results
  w.key("out_of_bounds");
  w.beginObject();
  w.key("count");
  w.integer(errors);
  w.key("okay");
  w.boolean(errors == 0);
  w.endObject();
  w.key("average_bus_bandwidth");
  w.beginObject();
  w.key("bandwidth");
  w.number(avgBw);
  w.key("okay");
  if (minBw < 0)
    w.str("unchecked");
  else
    w.boolean(avgBw >= minBw * 0.9);
  w.endObject();
  w.key("errors");
  w.beginList();
  if (lastError && *lastError) w.str(lastError);
  w.endList();
}

int closeJson(Run& run, int code) {
  if (run.json) {
    JsonWriter& w = run.json->w;
    if (w.depth() == 1) {
      w.key("end_time");
      w.str(nowString());
    }
    w.closeAll();
    const std::string& text = run.json->w.text();
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::write(run.json->fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(run.json->fd);
    run.json->fd = -1;
  }
  return code;
}

}  // namespace ringcc::bench::perf
