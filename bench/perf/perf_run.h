// The state one perf-tool run shares between its stages (driver.cc: set-up, then the timing
// threads, then the summary) and the helpers every stage uses to print, fail and synchronize.
//
// Internal to the driver: the stages are split over files by job (perf_setup.cc: buffers,
// ids, devices, communicators; timing.cc: the timing loop; perf_json.cc: the -J file;
// banner.cc: the lines around the table; watchdog.cc: timeouts), and this is what they have
// in common. ncclOk and deviceOk are inline because the timing loop calls them around every
// operation, where a call per check would add to the instructions per operation that
// bench/callgrind_per_call counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/perf/coll_spec.h"
#include "bench/perf/comm_api.h"
#include "bench/perf/driver.h"
#include "bench/perf/json_writer.h"
#include "bench/perf/perf_cuda.h"
#include "bench/perf/perf_options.h"
#include "bench/perf/process_group.h"
#include "bench/perf/thread_reducer.h"

namespace ringcc::bench::perf {

// One rank's host buffers, page aligned.
struct RankBuffers {
  char* send = nullptr;
  char* recv = nullptr;
  char* expected = nullptr;
};

// The JSON results file: created exclusively at start (name.N if taken, like nccl-tests),
// written when the run ends (perf_json.h).
struct JsonOut {
  std::string path;
  int fd = -1;
  JsonWriter w;
};

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
  std::vector<ncclComm_t> comms;    // nThreads * nGpus, this process's
  std::vector<RankBuffers> bufs;    // host buffers; on device, the host mirrors of devs' buffers
  bool buffersFromLibrary = false;  // -R 1: send and receive buffers from ncclMemAlloc
  PerfDevices devs;                 // the ranks' GPUs, when the driver has any
  bool onDevice = false;            // the communicators are CUDA ones: device buffers and streams
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
  int nLocal() const { return nThreads * nGpus; }
};

std::string hostName();
std::string nowString();
std::string sprint(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Prints `s` on process 0 (run.printer), flushed.
void print(Run& run, const std::string& s);
// Aborts every communicator of this process, once.
void abortComms(Run& run);
// Records the first failure and releases threads waiting for the others. Communicators are not
// aborted here: other threads may still be using them; the watchdog aborts them if threads stay
// blocked (in a collective with the failed rank).
void fail(Run& run, int code);

// Says what failed (unless the run already failed) and fails the run: kPerfNcclError, or
// kPerfTimeout once the watchdog timed it out. Always false.
bool ncclFailed(Run& run, ncclResult_t rc, const char* what);
// A library call's result: false (and the run failed) if it failed.
inline bool ncclOk(Run& run, ncclResult_t rc, const char* what) {
  return rc == ncclSuccess || ncclFailed(run, rc, what);
}
// Says the driver's last error and fails the run with kPerfCudaError. Always false.
bool deviceFailed(Run& run);
// A driver call's result: false (and the run failed with kPerfCudaError, saying why) if it failed.
inline bool deviceOk(Run& run, bool ok) { return ok || deviceFailed(run); }

// Combines `value` over every thread of every process (see Average); false if the run failed.
bool aggregate(ThreadCtx& t, double& value, Average mode);
// Sums `value` over every thread of every process; false if the run failed.
bool sumOver(ThreadCtx& t, double& value);
// Every thread of every process meets here; false if the run failed.
bool barrier(ThreadCtx& t);
// Waits until the thread's ranks' streams ran everything queued (nothing to wait for on host).
bool syncThread(ThreadCtx& t);

}  // namespace ringcc::bench::perf
