// Per-operation records (RINGCC_TRACE=DIR): one JSON line per operation and rank, in
// DIR/ringcc-<commHash>-r<rank>-<pid>.jsonl, for `ringcc-monitor` (docs/monitoring.md).
//
// Cost: off (the default), a communicator has no Tracer and the API and the engine pay one
// predictable branch on a null pointer per call and per batch. On, the engine reads the clock
// twice per batch (the API once more per call made inside a group: a lone call is made when
// it starts) and appends one 64-byte record per operation to a buffer under an uncontended
// lock; a writer thread per communicator, at idle priority (SCHED_IDLE: it takes a core only
// when no rank wants it), formats and writes the lines every kFlushRecords records or every
// second (so a hung job still leaves its records on disk). A writer that gets no core at all
// falls behind until kMaxBuffered records wait; then the engine writes them itself (lines of
// such a backlog may come before older ones: they carry their call numbers). At destroy the
// destroying thread writes what is left.
//
// Times are CLOCK_REALTIME in microseconds since the epoch: one clock per host, comparable
// between the ranks of a host and, as far as the hosts' clocks agree (NTP), between hosts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace ringcc {

class LineFormatter;  // trace.cc

// CLOCK_REALTIME in microseconds.
uint64_t traceNowUs();

// One operation of one rank, as the engine saw it.
struct TraceRecord {
  uint64_t seq = 0;    // the call's number on this communicator (src/trace/call_state.h)
  uint64_t batch = 0;  // the batch (group) it ran in, numbered alike on every rank
  uint64_t count = 0;  // NCCL's count
  uint64_t callUs = 0, startUs = 0, endUs = 0;  // call made, batch started, batch finished
  int32_t root = -1;                            // root, or peer of send/recv; -1: none
  uint8_t coll = 0;                             // Coll
  uint8_t type = 0;                             // ncclDataType_t
  uint8_t op = 0;                               // ncclRedOp_t (>= ncclNumOps: a PreMulSum)
  uint8_t algo = 0xff;                          // Algo; 0xff: none (send/recv, count 0)
  uint8_t proto = 0xff;                         // Protocol; 0xff: none
  uint8_t nChannels = 0;
  uint8_t ok = 1;  // 0: the batch failed
};

// Who wrote the records: the same for every line of a file.
struct TraceSource {
  uint64_t commHash = 0;
  int rank = 0;
  int nranks = 1;
  int pid = 0;
  std::string host;
};

// One record as a JSON line (no newline): fields as docs/monitoring.md lists them, with the
// bytes and bus bandwidth of nccl-tests' conventions (src/trace/bus_bw.h).
std::string formatTraceRecord(const TraceRecord& r, const TraceSource& src);

class Tracer {
 public:
  // The Tracer of a new communicator: null unless RINGCC_TRACE names a directory; null with a
  // WARN if the directory or file cannot be made (the communicator works untraced).
  static std::unique_ptr<Tracer> fromEnv(const TraceSource& src);
  ~Tracer();  // writes what is left, then closes the file
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void add(const TraceRecord& r);
  const std::string& path() const { return path_; }

 private:
  static constexpr size_t kFlushRecords = 1024;
  static constexpr size_t kSliceRecords = 256;     // the writer looks at exit_ between slices
  static constexpr size_t kMaxBuffered = 1 << 16;  // 4 MiB of records waiting for the writer
  Tracer(const TraceSource& src, std::FILE* file, std::string path);
  void writerMain();
  void writeRecords(std::span<const TraceRecord> records);

  const TraceSource src_;
  std::FILE* file_;
  const std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;        // the writer waits for records
  std::vector<TraceRecord> filling_;  // guarded by mu_
  std::atomic<bool> exit_{false};
  std::thread writer_;
  std::mutex fileMu_;  // guards format_, text_ and the file: the writer, add() or the destructor
  std::unique_ptr<LineFormatter> format_;
  std::string text_;
};

}  // namespace ringcc
