#include "src/trace/trace.h"

#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <span>
#include <tuple>

#include "kernels/dtypes.h"
#include "nccl.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/plan/op_sig.h"
#include "src/sched/builders.h"
#include "src/trace/bus_bw.h"
#include "src/tune/tune.h"

namespace ringcc {
namespace {

static_assert(sizeof(TraceRecord) == 64, "a record is one cache line (docs/monitoring.md)");

BwShape shapeOf(Coll coll) {
  switch (coll) {
    case Coll::AllReduce:
      return BwShape::AllReduce;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter:
      return BwShape::Shares;
    default:
      return BwShape::Plain;
  }
}

}  // namespace

uint64_t traceNowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

namespace {

// The writer formats every record, and on a host with fewer cores than ranks its time is
// taken from the ranks: numbers go through std::to_chars (snprintf took ~1 us per record),
// and the fields that describe the call, the same for every repetition of it, are formatted
// once per shape and copied after that.
void appendNumber(std::string& out, uint64_t v) {
  char b[24];
  auto res = std::to_chars(b, b + sizeof(b), v);
  out.append(b, res.ptr);
}

void appendSigned(std::string& out, int64_t v) {
  char b[24];
  auto res = std::to_chars(b, b + sizeof(b), v);
  out.append(b, res.ptr);
}

// v with 4 decimals.
void appendFixed4(std::string& out, double v) {
  if (!(v >= 0 && v < 1e12)) {  // never for bandwidths; NaN and the like
    out += "0.0000";
    return;
  }
  const uint64_t x = static_cast<uint64_t>(v * 10000 + 0.5);
  appendNumber(out, x / 10000);
  char frac[5] = {'.', '0', '0', '0', '0'};
  for (uint64_t f = x % 10000, i = 4; i > 0; --i, f /= 10)
    frac[i] = static_cast<char>('0' + f % 10);
  out.append(frac, 5);
}

void appendField(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}

void appendText(std::string& out, const char* key, const char* v) {
  appendField(out, key);
  out += '"';
  out += v;
  out += '"';
}

}  // namespace

class LineFormatter {
 public:
  explicit LineFormatter(const TraceSource& src) : nranks_(src.nranks) {
    char text[512];
    std::snprintf(text, sizeof(text),
                  "{\"comm\":\"%016llx\",\"rank\":%d,\"nranks\":%d,\"host\":\"%s\",\"pid\":%d",
                  static_cast<unsigned long long>(src.commHash), src.rank, src.nranks,
                  src.host.c_str(), src.pid);
    prefix_ = text;
  }

  void append(std::string& out, const TraceRecord& r) {
    const Coll coll = static_cast<Coll>(r.coll);
    const size_t typeSize =
        r.type < ncclNumTypes ? dataTypeSize(static_cast<ncclDataType_t>(r.type)) : 0;
    const double bytes = bwBytes(shapeOf(coll), static_cast<double>(r.count) * typeSize, nranks_);
    const uint64_t us = r.endUs > r.startUs ? r.endUs - r.startUs : 0;
    const double algBw = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0;
    out += prefix_;
    appendField(out, "seq");
    appendNumber(out, r.seq);
    appendField(out, "batch");
    appendNumber(out, r.batch);
    out += shape(r);
    appendField(out, "call_us");
    appendNumber(out, r.callUs);
    appendField(out, "start_us");
    appendNumber(out, r.startUs);
    appendField(out, "end_us");
    appendNumber(out, r.endUs);
    appendField(out, "bytes");
    appendNumber(out, static_cast<uint64_t>(bytes));
    appendField(out, "time_us");
    appendNumber(out, us);
    appendField(out, "algbw_gbs");
    appendFixed4(out, algBw);
    appendField(out, "busbw_gbs");
    appendFixed4(out, algBw * busBwFactor(shapeOf(coll), nranks_));
    out += r.ok ? ",\"ok\":true}" : ",\"ok\":false}";
  }

 private:
  // The call's fields, from "coll" to "channels".
  const std::string& shape(const TraceRecord& r) {
    const uint64_t key = uint64_t{r.coll} | uint64_t{r.type} << 8 | uint64_t{r.op} << 16 |
                         uint64_t{r.algo} << 24 | uint64_t{r.proto} << 32 |
                         uint64_t{r.nChannels} << 40;
    const auto id = std::make_tuple(key, r.count, r.root);
    if (auto it = shapes_.find(id); it != shapes_.end()) return it->second;
    if (shapes_.size() >= 1024) shapes_.clear();  // a job of ever new shapes: start over
    const Coll coll = static_cast<Coll>(r.coll);
    const bool p2p = coll == Coll::Send || coll == Coll::Recv;
    std::string t;
    appendText(t, "coll", collName(coll));
    appendField(t, "count");
    appendNumber(t, r.count);
    appendText(t, "type", typeName(r.type));
    appendText(t, "op",
               collReduces(coll) ? (r.op < ncclNumOps ? opName(r.op) : "premulsum") : "none");
    appendField(t, "root");
    appendSigned(t, p2p ? -1 : (collRooted(coll) ? r.root : -1));
    appendField(t, "peer");
    appendSigned(t, p2p ? r.root : -1);
    appendText(t, "algo",
               r.algo == 0xff ? (p2p ? "P2p" : "none") : algoName(static_cast<Algo>(r.algo)));
    appendText(t, "proto",
               r.proto < kNumProtocols ? protocolName(static_cast<Protocol>(r.proto)) : "none");
    appendField(t, "channels");
    appendNumber(t, r.nChannels);
    return shapes_.emplace(id, std::move(t)).first->second;
  }

  const int nranks_;
  std::string prefix_;  // the fields every line of a file shares, from "{" to "pid"
  std::map<std::tuple<uint64_t, uint64_t, int32_t>, std::string> shapes_;
};

std::string formatTraceRecord(const TraceRecord& r, const TraceSource& src) {
  std::string line;
  LineFormatter(src).append(line, r);
  return line;
}

std::unique_ptr<Tracer> Tracer::fromEnv(const TraceSource& src) {
  const std::string dir = paramString("TRACE");
  if (dir.empty()) return nullptr;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    LOG_WARN("RINGCC_TRACE=%s: cannot create the directory: %s; operations are not traced",
             dir.c_str(), strerror(errno));
    return nullptr;
  }
  char name[128];
  std::snprintf(name, sizeof(name), "/ringcc-%016llx-r%d-%d.jsonl",
                static_cast<unsigned long long>(src.commHash), src.rank, src.pid);
  std::string path = dir + name;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    LOG_WARN("RINGCC_TRACE: cannot open %s: %s; operations are not traced", path.c_str(),
             strerror(errno));
    return nullptr;
  }
  LOG_INFO(kLogInit, "tracing operations to %s", path.c_str());
  return std::unique_ptr<Tracer>(new Tracer(src, f, std::move(path)));
}

Tracer::Tracer(const TraceSource& src, std::FILE* file, std::string path)
    : src_(src),
      file_(file),
      path_(std::move(path)),
      format_(std::make_unique<LineFormatter>(src)) {
  filling_.reserve(kFlushRecords);
  writer_ = std::thread([this] { writerMain(); });
}

Tracer::~Tracer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_.store(true);
  }
  cv_.notify_all();
  writer_.join();  // it stops within a slice and hands back what it had not written
  // This thread writes the rest: the idle-priority writer may get no core on a busy host.
  writeRecords(filling_);
  std::fclose(file_);
}

void Tracer::add(const TraceRecord& r) {
  std::unique_lock<std::mutex> lock(mu_);
  filling_.push_back(r);
  const size_t waiting = filling_.size();
  if (waiting >= kMaxBuffered) {
    // The writer has had no core for a long while: this thread writes the backlog itself,
    // rather than let it grow without bound or wait for a thread that may never run.
    std::vector<TraceRecord> backlog;
    backlog.swap(filling_);
    lock.unlock();
    writeRecords(backlog);
    return;
  }
  lock.unlock();
  if (waiting % kFlushRecords == 0) cv_.notify_one();
}

void Tracer::writeRecords(std::span<const TraceRecord> records) {
  if (records.empty()) return;
  std::lock_guard<std::mutex> lock(fileMu_);
  text_.clear();
  for (const TraceRecord& r : records) {
    format_->append(text_, r);
    text_ += '\n';
  }
  std::fwrite(text_.data(), 1, text_.size(), file_);
  std::fflush(file_);
}

void Tracer::writerMain() {
  // Idle priority: formatting takes a core only when no rank wants it (ranks spin while they
  // wait, so at normal priority the writer would delay them on a host with few cores).
  sched_param param{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
  std::vector<TraceRecord> writing;
  writing.reserve(kFlushRecords);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::seconds(1),
                 [this] { return exit_.load() || filling_.size() >= kFlushRecords; });
    if (exit_.load()) return;  // the destructor writes what is left
    writing.swap(filling_);    // the engine goes on filling the other buffer meanwhile
    lock.unlock();
    for (size_t done = 0; done < writing.size(); done += kSliceRecords) {
      if (exit_.load()) {  // hand the rest back, ahead of what came since
        lock.lock();
        filling_.insert(filling_.begin(), writing.begin() + done, writing.end());
        return;
      }
      const size_t n = std::min(kSliceRecords, writing.size() - done);
      writeRecords(std::span<const TraceRecord>(writing.data() + done, n));
    }
    writing.clear();
    lock.lock();
  }
}

}  // namespace ringcc
