#include "bench/perf/driver.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/data_check.h"
#include "bench/perf/datatypes.h"
#include "bench/perf/json_writer.h"
#include "bench/perf/perf_cuda.h"
#include "bench/perf/perf_options.h"
#include "bench/perf/process_group.h"
#include "bench/perf/report.h"
#include "bench/perf/thread_reducer.h"
#include "ringcc_config.h"

extern char** environ;

namespace ringcc::bench {
namespace {

using Clock = std::chrono::steady_clock;

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

std::string sprint(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string sprint(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// One rank's host buffers, page aligned.
struct RankBuffers {
  char* send = nullptr;
  char* recv = nullptr;
  char* expected = nullptr;
};

char* allocBuffer(size_t bytes) {
  size_t rounded = ((std::max<size_t>(bytes, 1) + 4095) / 4096) * 4096;
  return static_cast<char*>(std::aligned_alloc(4096, rounded));
}

// The JSON results file: created exclusively at start (name.N if taken, like nccl-tests),
// written when the run ends.
struct JsonOut {
  std::string path;
  int fd = -1;
  JsonWriter w;
};

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

struct Run;

// One benchmark thread's state.
struct ThreadCtx {
  Run* run = nullptr;
  int thread = 0;
  int rep = 0;        // data-check seed counter, per thread like nccl-tests
  CollCounts counts;  // for the current size and type
  size_t sendBytes = 0, recvBytes = 0;
  int errors = 0;  // checks with wrong elements seen by this thread
  double bwSum = 0;
  int bwCount = 0;
  int result = kPerfSuccess;
};

struct Run {
  CollKind kind;
  const CollSpec* spec;
  const CommApi* api;
  PerfOptions opt;
  PerfIo io;
  ProcessGroup* group = nullptr;
  int nThreads = 1, nGpus = 1, nranks = 1;
  bool printer = false;  // process 0: prints the report
  size_t maxBytes = 0;
  ncclUniqueId id{};
  std::vector<ncclComm_t> comms;  // nThreads * nGpus, this process's
  std::vector<RankBuffers> bufs;  // host buffers; on device, the host mirrors of devs' buffers
  PerfDevices devs;               // the ranks' GPUs, when the driver has any
  bool onDevice = false;          // the communicators are CUDA ones: device buffers and streams
  std::unique_ptr<ThreadReducer> reducer;
  JsonOut* json = nullptr;
  std::string program;

  std::mutex failMu;
  std::atomic<bool> failed{false};
  std::atomic<bool> commsAborted{false};
  std::atomic<bool> timedOut{false};
  std::atomic<uint64_t> progress{0};
  int failCode = kPerfSuccess;

  int globalRank(int thread, int i) const {
    return (group->rank() * nThreads + thread) * nGpus + i;
  }
};

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

// Records the first failure and releases threads waiting for the others. Communicators are not
// aborted here: other threads may still be using them; the watchdog aborts them if threads stay
// blocked (in a collective with the failed rank).
void fail(Run& run, int code) {
  {
    std::lock_guard<std::mutex> lock(run.failMu);
    if (run.failCode == kPerfSuccess) run.failCode = code;
  }
  if (!run.failed.exchange(true)) run.reducer->abort();
}

bool ncclOk(Run& run, ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return true;
  if (!run.failed.load()) {
    const char* last = run.api->getLastError ? run.api->getLastError(nullptr) : "";
    std::fprintf(run.io.out, "%s: Test NCCL failure %s '%s / %s'\n", hostName().c_str(), what,
                 run.api->getErrorString ? run.api->getErrorString(rc) : "error", last ? last : "");
    std::fflush(run.io.out);
  }
  fail(run, run.timedOut ? kPerfTimeout : kPerfNcclError);
  return false;
}

// Combines `value` over every thread of every process (see Average); false if the run failed.
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

// A driver call's result: false (and the run failed with kPerfCudaError, saying why) if it failed.
bool deviceOk(Run& run, bool ok) {
  if (ok) return true;
  std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), run.devs.lastError());
  fail(run, kPerfCudaError);
  return false;
}

// Waits until the thread's ranks' streams ran everything queued (nothing to wait for on host).
bool syncThread(ThreadCtx& t) {
  Run& run = *t.run;
  if (!run.onDevice) return true;
  for (int i = 0; i < run.nGpus; ++i)
    if (!deviceOk(run, run.devs.sync(t.thread * run.nGpus + i))) return false;
  return true;
}

void setupSize(ThreadCtx& t, size_t bytes, ncclDataType_t type) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  t.counts = collCounts(run.kind, bytes / elt, elt, run.nranks);
  t.sendBytes = t.counts.sendCount * elt;
  t.recvBytes = t.counts.recvCount * elt;
}

// Issues one operation on each of the thread's communicators.
bool runColl(ThreadCtx& t, ncclComm_t comm, int rank, const void* sendp, void* recvp,
             ncclDataType_t type, ncclRedOp_t op, int root, cudaStream_t stream) {
  Run& run = *t.run;
  const CommApi& api = *run.api;
  size_t count = t.counts.paramCount;
  switch (run.kind) {
    case CollKind::AllReduce:
      return ncclOk(run, api.allReduce(sendp, recvp, count, type, op, comm, stream),
                    "ncclAllReduce");
    case CollKind::AllGather:
      return ncclOk(run, api.allGather(sendp, recvp, count, type, comm, stream), "ncclAllGather");
    case CollKind::Broadcast:
      return ncclOk(run, api.broadcast(sendp, recvp, count, type, root, comm, stream),
                    "ncclBroadcast");
    case CollKind::Reduce:
      return ncclOk(run, api.reduce(sendp, recvp, count, type, op, root, comm, stream),
                    "ncclReduce");
    case CollKind::ReduceScatter:
      return ncclOk(run, api.reduceScatter(sendp, recvp, count, type, op, comm, stream),
                    "ncclReduceScatter");
    case CollKind::AlltoAll: {
      if (api.alltoAll)
        return ncclOk(run, api.alltoAll(sendp, recvp, count, type, comm, stream), "ncclAlltoAll");
      // Libraries without ncclAlltoAll: grouped send/recv to every peer, as nccl-tests does.
      size_t blk = count * typeInfo(type).size;
      if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
      bool ok = true;
      for (int r = 0; r < run.nranks && ok; ++r) {
        ok =
            ncclOk(
                run,
                api.send(static_cast<const char*>(sendp) + r * blk, count, type, r, comm, stream),
                "ncclSend") &&
            ncclOk(run, api.recv(static_cast<char*>(recvp) + r * blk, count, type, r, comm, stream),
                   "ncclRecv");
      }
      return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
    }
    case CollKind::SendRecv: {
      int n = run.nranks;
      if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
      bool ok =
          ncclOk(run, api.send(sendp, count, type, (rank + 1) % n, comm, stream), "ncclSend") &&
          ncclOk(run, api.recv(recvp, count, type, (rank - 1 + n) % n, comm, stream), "ncclRecv");
      return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
    }
  }
  return false;
}

bool startColl(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace, int iter) {
  Run& run = *t.run;
  const CommApi& api = *run.api;
  size_t elt = typeInfo(type).size;
  // Walk through the buffer from one iteration to the next, as nccl-tests does, so repeated
  // operations do not all hit the same cache lines.
  size_t total = std::max(t.sendBytes, t.recvBytes);
  size_t steps = total ? run.maxBytes / total : 1;
  if (steps == 0) steps = 1;
  size_t shift = total * (static_cast<size_t>(iter) % steps);
  bool grouped = run.nGpus > 1;
  if (grouped && !ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
  bool ok = true;
  for (int i = 0; i < run.nGpus && ok; ++i) {
    int idx = t.thread * run.nGpus + i;
    int rank = run.globalRank(t.thread, i);
    // Device buffers (nccl-tests' semantics) when the communicators are CUDA ones.
    char* recv =
        (run.onDevice ? reinterpret_cast<char*>(run.devs.rank(idx).recv) : run.bufs[idx].recv) +
        shift;
    char* send =
        (run.onDevice ? reinterpret_cast<char*>(run.devs.rank(idx).send) : run.bufs[idx].send) +
        shift;
    cudaStream_t stream =
        run.onDevice ? reinterpret_cast<cudaStream_t>(run.devs.rank(idx).stream) : nullptr;
    if (run.onDevice && !deviceOk(run, run.devs.use(idx))) return false;
    ncclRedOp_t redop = static_cast<ncclRedOp_t>(op == OpKind::MulSum ? 0 : static_cast<int>(op));
    if (op == OpKind::MulSum) {
      alignas(16) char scalar[16] = {};
      encodeValue(type, premulScalar(rank), scalar);
      ok = ncclOk(
          run,
          api.redOpCreatePreMulSum(&redop, scalar, type, ncclScalarHostImmediate, run.comms[idx]),
          "ncclRedOpCreatePreMulSum");
      if (!ok) break;
    }
    const void* sp = inPlace ? recv + t.counts.sendInplaceOffset * rank * elt : send;
    void* rp = inPlace ? recv + t.counts.recvInplaceOffset * rank * elt : recv;
    ok = runColl(t, run.comms[idx], rank, sp, rp, type, redop, root, stream);
    if (op == OpKind::MulSum && ok)
      ok = ncclOk(run, api.redOpDestroy(redop, run.comms[idx]), "ncclRedOpDestroy");
  }
  if (grouped) ok = ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
  run.progress.fetch_add(1, std::memory_order_relaxed);
  // Host communicators complete inside the call; device ones are waited for where a result is
  // needed (syncThread). -z 1 adds nccl-tests' barrier after each operation.
  if (ok && run.opt.blocking == 1) ok = syncThread(t) && barrier(t);
  return ok;
}

// Fills the inputs and the expected results (on device: in the host mirrors, then copied up).
bool initData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, uint64_t seed, bool inPlace) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  for (int i = 0; i < run.nGpus; ++i) {
    int idx = t.thread * run.nGpus + i;
    int rank = run.globalRank(t.thread, i);
    RankBuffers& b = run.bufs[idx];
    std::memset(b.recv, 0, t.recvBytes);
    CheckSetup s{run.kind, type, op, root, run.nranks, rank, seed, t.counts};
    char* input = inPlace ? b.recv + t.counts.sendInplaceOffset * rank * elt : b.send;
    fillInput(s, input);
    const char* region = inPlace ? b.recv + t.counts.recvInplaceOffset * rank * elt : b.recv;
    fillExpected(s, b.expected, region);
    if (run.onDevice && !(deviceOk(run, run.devs.upload(idx, false, b.send, t.sendBytes)) &&
                          deviceOk(run, run.devs.upload(idx, true, b.recv, t.recvBytes))))
      return false;
  }
  return true;
}

// Wrong elements in the thread's results; -1 if a device result could not be read back.
int64_t checkData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  int64_t wrong = 0;
  if (!syncThread(t)) return -1;
  for (int i = 0; i < run.nGpus; ++i) {
    int idx = t.thread * run.nGpus + i;
    int rank = run.globalRank(t.thread, i);
    const RankBuffers& b = run.bufs[idx];
    if (run.onDevice && !deviceOk(run, run.devs.download(idx, b.recv, t.recvBytes))) return -1;
    CheckSetup s{run.kind, type, op, root, run.nranks, rank, 0, t.counts};
    const char* region = inPlace ? b.recv + t.counts.recvInplaceOffset * rank * elt : b.recv;
    wrong += countWrong(type, region, b.expected, t.counts.recvCount, checkTolerance(s));
  }
  return wrong;
}

bool benchTime(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  const CommApi& api = *run.api;
  if (o.check && !initData(t, type, op, root, 99, inPlace)) return false;
  // Barrier first, then one untimed operation: the operation itself lines the ranks up to
  // within its own latency. The other way round (nccl-tests' order) the timer starts when
  // the barrier lets each process go, and ringcc-run's barrier, over the launcher's control
  // sockets, wakes its processes tens of microseconds apart: at 20 iterations that skew
  // doubled the time of an 8-byte all-reduce (docs/benchmarks.md, "Timing starts aligned").
  if (!barrier(t)) return false;
  if (!startColl(t, type, op, root, inPlace, 0)) return false;  // sync
  if (!syncThread(t)) return false;

  auto start = Clock::now();
  for (int iter = 0; iter < o.iters; ++iter) {
    if (o.aggIters > 1 && !ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
    for (int a = 0; a < o.aggIters; ++a)
      if (!startColl(t, type, op, root, inPlace, iter * o.aggIters + a)) return false;
    if (o.aggIters > 1 && !ncclOk(run, api.groupEnd(), "ncclGroupEnd")) return false;
  }
  double ops = static_cast<double>(o.iters) * o.aggIters;
  double cpuSec = std::chrono::duration<double>(Clock::now() - start).count() / ops;
  // Host communicators have finished every operation by now; device ones are waited for.
  if (!syncThread(t)) return false;
  double sec = std::chrono::duration<double>(Clock::now() - start).count() / ops;
  if (!aggregate(t, sec, o.average)) return false;
  Bandwidth bw = bandwidth(run.kind, t.counts.paramCount, typeInfo(type).size, sec, run.nranks);
  if (!barrier(t)) return false;

  bool reportErrors = o.check > 0 && checksPlacement(run.kind, inPlace);
  double wrong = 0;
  ++t.rep;
  for (int c = 0; c < o.check; ++c) {
    if (!initData(t, type, op, root, static_cast<uint64_t>(t.rep), inPlace)) return false;
    if (!startColl(t, type, op, root, inPlace, 0)) return false;
    int64_t local = checkData(t, type, op, root, inPlace);
    if (local < 0) return false;
    if (reportErrors && local) t.errors++;
    wrong = static_cast<double>(local);
    if (!sumOver(t, wrong)) return false;
    if (wrong != 0) break;
  }

  double timeUs = (o.reportCpuTime ? cpuSec : sec) * 1.0e6;
  if (t.thread == 0) {
    print(run, rowResult(timeUs, bw.algBw, bw.busBw, reportErrors, static_cast<int64_t>(wrong)));
    if (run.json) {
      JsonWriter& w = run.json->w;
      w.key(inPlace ? "in_place" : "out_of_place");
      w.beginObject();
      w.key(o.reportCpuTime ? "cpu_time" : "time");
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
  }
  t.bwSum += bw.busBw;
  t.bwCount++;
  return true;
}

bool timeTest(ThreadCtx& t, ncclDataType_t type, OpKind op, const char* opLabel, int root) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  if (!barrier(t)) return false;
  // Warm up every size class (powers of two from minBytes), as current nccl-tests does.
  for (size_t size : sizeSweep(o.minBytes, run.maxBytes, 0, 2)) {
    setupSize(t, size, type);
    for (int w = 0; w < o.warmupIters; ++w)
      if (!startColl(t, type, op, root, false, w)) return false;
  }
  if (!syncThread(t)) return false;
  std::vector<size_t> sizes = sizeSweep(o.minBytes, run.maxBytes, o.stepBytes, o.stepFactor);
  const char* typeName = typeInfo(type).name;
  for (long cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle) {
    for (size_t size : sizes) {
      setupSize(t, size, type);
      size_t shown = std::max(t.sendBytes, t.recvBytes);
      if (t.thread == 0) {
        print(run, rowPreamble(shown, t.counts.paramCount, typeName, opLabel, root));
        if (run.json) {
          JsonWriter& w = run.json->w;
          w.beginObject();
          w.key("size");
          w.integer(static_cast<int64_t>(shown));
          w.key("count");
          w.integer(static_cast<int64_t>(t.counts.paramCount));
          w.key("type");
          w.str(typeName);
          w.key("redop");
          w.str(opLabel);
          w.key("root");
          w.integer(root);
        }
      }
      if (!benchTime(t, type, op, root, false)) return false;
      if (!benchTime(t, type, op, root, true)) return false;
      if (t.thread == 0) {
        print(run, "\n");
        if (run.json) {
          JsonWriter& w = run.json->w;
          w.key("actual_iterations");
          w.integer(o.iters);
          w.key("experiment_name");
          w.str("");
          w.endObject();
        }
      }
    }
  }
  return true;
}

bool initThreadComms(Run& run, int thread) {
  const CommApi& api = *run.api;
  if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
  bool ok = true;
  for (int i = 0; i < run.nGpus && ok; ++i) {
    // On a GPU, each rank's communicator is made with its device current (cudaSetDevice).
    if (run.devs.active() && !deviceOk(run, run.devs.use(thread * run.nGpus + i))) return false;
    ok = ncclOk(run,
                api.commInitRank(&run.comms[thread * run.nGpus + i], run.nranks, run.id,
                                 run.globalRank(thread, i)),
                "ncclCommInitRank");
  }
  return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
}

void threadMain(ThreadCtx& t) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  if (o.parallelInit && !initThreadComms(run, t.thread)) return;
  if (o.parallelInit && !barrier(t)) return;
  std::vector<ncclDataType_t> types = o.types;
  if (types.empty()) types.push_back(ncclFloat32);
  std::vector<int> ops = o.ops;
  if (!run.spec->hasOp || ops.empty()) ops = {static_cast<int>(OpKind::Sum)};
  std::vector<int> roots;
  if (!run.spec->hasRoot) {
    roots.push_back(-1);
  } else if (o.root == -1) {
    for (int r = 0; r < run.nranks; ++r) roots.push_back(r);
  } else {
    roots.push_back(o.root);
  }
  for (ncclDataType_t type : types)
    for (int opv : ops)
      for (int root : roots) {
        OpKind op = static_cast<OpKind>(opv);
        const char* label = run.spec->hasOp ? opName(op) : "none";
        if (!timeTest(t, type, op, label, root)) return;
      }
}

// Watches a running benchmark: ends it with "timeout" when no operation completes for -T
// seconds, and aborts the communicators when threads stay blocked after a failure (in a
// collective waiting for a rank that gave up). If threads still do not return after an abort,
// the process exits rather than hang.
class Watchdog {
 public:
  explicit Watchdog(Run& run) : run_(run), thread_([this] { loop(); }) {}
  ~Watchdog() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    constexpr auto kFailGrace = std::chrono::seconds(2);
    constexpr auto kAbortGrace = std::chrono::seconds(10);
    uint64_t last = run_.progress.load();
    auto lastChange = Clock::now();
    Clock::time_point failedAt{}, abortedAt{};
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (done_) break;
      auto now = Clock::now();
      uint64_t p = run_.progress.load();
      if (p != last) {
        last = p;
        lastChange = now;
      }
      int limit = run_.opt.timeoutSec;
      if (limit > 0 && !run_.timedOut && now - lastChange >= std::chrono::seconds(limit)) {
        run_.timedOut = true;
        std::fprintf(run_.io.out, "%s: Test timeout (%ds)\n", hostName().c_str(), limit);
        std::fflush(run_.io.out);
        fail(run_, kPerfTimeout);
        abortComms(run_);
      }
      if (run_.failed && !run_.commsAborted) {
        if (failedAt == Clock::time_point{}) failedAt = now;
        if (now - failedAt >= kFailGrace) abortComms(run_);
      }
      if (run_.commsAborted) {
        if (abortedAt == Clock::time_point{}) abortedAt = now;
        if (now - abortedAt >= kAbortGrace) {
          std::fprintf(run_.io.err, "%s: threads did not return after abort; exiting\n",
                       run_.program.c_str());
          std::fflush(nullptr);
          std::_Exit(run_.timedOut ? kPerfTimeout : kPerfNcclError);
        }
      }
    }
  }

  Run& run_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

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

int finish(Run& run, int code) {
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
  const PerfOptions& o = run.opt;
  run.nThreads = o.nThreads;
  run.nGpus = o.nGpus;

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
  auto finalize = [&](int code) {
    int rc = finish(run, code);
    group->finalize();
    return rc;
  };

  std::unique_ptr<JsonOut> json;
  if (run.printer && !o.jsonFile.empty()) json = openJson(o.jsonFile, io.out);
  run.json = json.get();

  bool mulsum =
      std::find(o.ops.begin(), o.ops.end(), static_cast<int>(OpKind::MulSum)) != o.ops.end();
  bool needId = group->size() > 1 || (o.parallelInit && run.nThreads > 1);
  std::vector<std::string> missing = missingEntries(api, kind, mulsum, needId);
  if (o.localRegister && !(api.memAlloc && api.memFree)) missing.push_back("ncclMemAlloc (-R 1)");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    std::fprintf(io.err, "%s: the library does not provide %s (not implemented yet?)\n",
                 run.program.c_str(), list.c_str());
    return finalize(kPerfNotImplemented);
  }
  if (run.spec->hasRoot && o.root >= run.nranks) {
    std::fprintf(io.err, "%s: invalid root %d for %d ranks\n", run.program.c_str(), o.root,
                 run.nranks);
    return finalize(kPerfInvalidUsage);
  }
  int version = 0;
  if (api.getVersion) api.getVersion(&version);
  if (run.json) writeJsonHeader(run, argc, argv, version);

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
  if (group->size() > 1)
    print(run, sprint("# Processes: %d from %s\n", group->size(), group->source()));
  print(run, "#\n");
  if (run.json) {
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
    w.integer(o.iters);
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

  // Host memory: send, receive and (with -c) expected buffers for every rank on this host
  // must fit in three quarters of the memory available now.
  run.maxBytes = o.maxBytes;
  size_t minBytes = o.minBytes;
  {
    long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && pageSize > 0) {
      double avail = static_cast<double>(pages) * static_cast<double>(pageSize) * 0.75;
      double ranksHere = static_cast<double>(run.nThreads) * run.nGpus * group->localSize();
      size_t memMax = static_cast<size_t>(avail / ranksHere / (o.check ? 3 : 2));
      if (run.maxBytes > memMax) {
        run.maxBytes = memMax;
        if (minBytes > run.maxBytes) minBytes = run.maxBytes;
        print(run,
              sprint("#\n# Reducing maxBytes to %zu due to memory limitation\n", run.maxBytes));
      }
    }
  }
  run.opt.minBytes = minBytes;

  // The unique id: from the launcher, broadcast by MPI from process 0, or our own.
  if (needId) {
    bool have = false;
    if (group->rank() == 0 && !group->providesId() &&
        !ncclOk(run, api.getUniqueId(&run.id), "ncclGetUniqueId"))
      return finalize(run.failCode);
    if (!group->shareId(run.id, have, err)) {
      std::fprintf(io.err, "%s: %s\n", run.program.c_str(), err.c_str());
      return finalize(kPerfInternalError);
    }
  }

  int nLocal = run.nThreads * run.nGpus;
  run.comms.assign(nLocal, nullptr);
  // GPUs, as nccl-tests uses them, where the CUDA driver has any (perf_cuda.h).
  std::string noCuda = "RINGCC_DEVICE=host";
  const char* forced = std::getenv("RINGCC_DEVICE");
  if (forced == nullptr || std::strcmp(forced, "host") != 0) {
    const CudaDriver* cu = io.cuda ? io.cuda : loadPerfCuda(&noCuda);
    if (cu && !run.devs.open(cu, group->rank() * nLocal, nLocal, &err)) {
      std::fprintf(io.err, "%s: %s\n", run.program.c_str(), err.c_str());
      return finalize(kPerfCudaError);
    }
  }
  Watchdog watchdog(run);
  if (!o.parallelInit) {
    if (group->size() == 1) {
      std::vector<int> devList;
      for (int k = 0; k < run.devs.size(); ++k) devList.push_back(run.devs.rank(k).dev);
      if (!ncclOk(run,
                  api.commInitAll(run.comms.data(), nLocal,
                                  run.devs.active() ? devList.data() : nullptr),
                  "ncclCommInitAll"))
        return finalize(run.failCode);
    } else {
      bool ok = ncclOk(run, api.groupStart(), "ncclGroupStart");
      for (int t = 0; t < run.nThreads && ok; ++t)
        for (int i = 0; i < run.nGpus && ok; ++i) {
          if (run.devs.active() && !deviceOk(run, run.devs.use(t * run.nGpus + i)))
            return finalize(run.failCode);
          ok = ncclOk(run,
                      api.commInitRank(&run.comms[t * run.nGpus + i], run.nranks, run.id,
                                       run.globalRank(t, i)),
                      "ncclCommInitRank");
        }
      ok = ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
      if (!ok) return finalize(run.failCode);
    }
  }
  // Device buffers exactly when the communicators are CUDA ones (a library without
  // ringccCommMemoryKind, NVIDIA's, makes only CUDA ones).
  run.onDevice = run.devs.active();
  if (api.commMemoryKind) {
    for (ncclComm_t c : run.comms) {
      ringccMemKind_t memKind = ringccMemHost;
      if (!ncclOk(run, api.commMemoryKind(c, &memKind), "ringccCommMemoryKind"))
        return finalize(run.failCode);
      run.onDevice = memKind == ringccMemCuda;
      if (run.onDevice && !run.devs.active()) {
        std::fprintf(io.err,
                     "%s: the communicator uses CUDA device memory, but the tool cannot "
                     "allocate device buffers: %s\n",
                     run.program.c_str(), noCuda.c_str());
        for (ncclComm_t comm : run.comms) api.commDestroy(comm);
        return finalize(kPerfCudaError);
      }
    }
  }

  // Buffers (sized for maxBytes as nccl-tests does: send and receive whole, expected as the
  // largest receive).
  CollCounts largest = collCounts(kind, run.maxBytes, 1, run.nranks);
  run.bufs.resize(nLocal);
  bool allocated = true;
  // -R 1: send and receive buffers from the library's ncclMemAlloc, as nccl-tests' local
  // registration takes them (ringcc shares such memory between processes: one copy).
  const bool fromLibrary = o.localRegister != 0;  // (the entries were checked above)
  auto alloc = [&](size_t bytes) -> char* {
    if (!fromLibrary) return allocBuffer(bytes);
    void* p = nullptr;
    return api.memAlloc(&p, std::max<size_t>(bytes, 1)) == ncclSuccess ? static_cast<char*>(p)
                                                                       : nullptr;
  };
  for (RankBuffers& b : run.bufs) {
    b.send = alloc(run.maxBytes);
    b.recv = alloc(run.maxBytes);
    b.expected = allocBuffer(o.check ? largest.recvCount : 0);
    allocated = allocated && b.send && b.recv && b.expected;
  }
  std::string deviceErr;
  if (allocated && run.onDevice) allocated = run.devs.allocate(run.maxBytes, &deviceErr);
  auto freeBuffers = [&]() {
    for (RankBuffers& b : run.bufs) {
      for (char* p : {b.send, b.recv}) {
        if (fromLibrary && p)
          (void)api.memFree(p);
        else
          std::free(p);
      }
      std::free(b.expected);
    }
    run.devs.release();
  };

  // Who runs where: every process's lines, printed by process 0.
  std::string lines;
  for (int k = 0; k < nLocal; ++k) lines += deviceLine(run, k);
  std::vector<std::string> allLines;
  if (!group->gather(lines, allLines, err)) {
    std::fprintf(io.err, "%s: %s\n", run.program.c_str(), err.c_str());
    abortComms(run);
    freeBuffers();
    return finalize(kPerfInternalError);
  }
  print(run, "# Using devices\n");
  for (const std::string& l : allLines) print(run, l);
  if (run.json) {
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
      const int here = r - group->rank() * nLocal;
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
  if (!allocated) {
    std::fprintf(io.err, "%s: cannot allocate %zu-byte buffers for %d ranks%s%s\n",
                 run.program.c_str(), run.maxBytes, nLocal, deviceErr.empty() ? "" : ": ",
                 deviceErr.c_str());
    abortComms(run);
    freeBuffers();
    return finalize(kPerfInternalError);
  }

  print(run, tableHeader(o.reportCpuTime ? "cputime" : "time"));
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
  for (int t = 1; t < run.nThreads; ++t) threads.emplace_back([&ctx, t] { threadMain(ctx[t]); });
  threadMain(ctx[0]);
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
  if (!run.failed && group->size() > 1) {
    double e = errors;
    if (!group->allreduce(&e, 1, CtrlReduce::Sum, err)) {
      std::fprintf(io.err, "%s: %s\n", run.program.c_str(), err.c_str());
      code = kPerfInternalError;
    }
    errors = static_cast<int>(e);
  }

  if (run.commsAborted) {
    // Aborted communicators are gone; destroying them again would touch freed state.
  } else {
    for (ncclComm_t c : run.comms)
      if (c) api.commDestroy(c);
  }
  freeBuffers();

  if (code != kPerfSuccess) return finalize(code);

  const char* minBwEnv = std::getenv("NCCL_TESTS_MIN_BW");
  double minBw = minBwEnv ? std::atof(minBwEnv) : -1;
  double avgBw = bwCount ? bwSum / bwCount : 0;
  if (run.json) {
    JsonWriter& w = run.json->w;
    w.endList();  // results
  }
  print(run, footer(errors, avgBw, minBw, run.program.c_str()));
  print(run, "#\n");
  const char* last = api.getLastError ? api.getLastError(nullptr) : nullptr;
  if (last && *last)
    print(run, sprint("# error: %s\n", last));
  else
    print(run, "\n");
  if (run.json) {
    JsonWriter& w = run.json->w;
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
    if (last && *last) w.str(last);
    w.endList();
  }
  bool bad = errors != 0 || (minBw >= 0 && avgBw < minBw * 0.9);
  return finalize(bad ? kPerfWrongData : kPerfSuccess);
}

}  // namespace ringcc::bench
