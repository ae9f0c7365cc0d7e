#include "src/monitor/trace.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "kernels/dtypes.h"
#include "nccl.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "src/exec/op_sig.h"
#include "src/monitor/bus_bw.h"
#include "src/sched/builders.h"
#include "src/tune/tune.h"

namespace ringcc {
namespace {

static_assert(sizeof(TraceRecord) == 64, "a record is one cache line (docs/monitoring.md)");

BwShape shapeOf(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return BwShape::AllReduce;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter: return BwShape::Shares;
    default: return BwShape::Plain;
  }
}

}  // namespace

uint64_t traceNowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

namespace {

// Appends JSON fields with std::to_chars: the writer formats every record, and on a host with
// fewer cores than ranks its time is taken from the ranks (snprintf took ~1 us per record).
class JsonLine {
 public:
  explicit JsonLine(std::string& out) : out_(out) {}
  void key(const char* k) {
    out_ += ",\"";
    out_ += k;
    out_ += "\":";
  }
  void u(const char* k, uint64_t v) {
    key(k);
    number(v);
  }
  void i(const char* k, int64_t v) {
    key(k);
    number(v);
  }
  void f(const char* k, double v) {
    key(k);
    char b[48];
    auto res = std::to_chars(b, b + sizeof(b), v, std::chars_format::fixed, 4);
    out_.append(b, res.ec == std::errc() ? res.ptr : b);
  }
  void s(const char* k, const char* v) {
    key(k);
    out_ += '"';
    out_ += v;
    out_ += '"';
  }

 private:
  template <typename T>
  void number(T v) {
    char b[24];
    auto res = std::to_chars(b, b + sizeof(b), v);
    out_.append(b, res.ec == std::errc() ? res.ptr : b);
  }
  std::string& out_;
};

// The fields every line of a file shares, from "{" to the pid.
std::string linePrefix(const TraceSource& src) {
  char text[512];
  std::snprintf(text, sizeof(text), "{\"comm\":\"%016llx\",\"rank\":%d,\"nranks\":%d,\"host\":\"%s\","
                "\"pid\":%d",
                static_cast<unsigned long long>(src.commHash), src.rank, src.nranks,
                src.host.c_str(), src.pid);
  return text;
}

void appendRecord(std::string& out, const std::string& prefix, const TraceRecord& r,
                  int nranks) {
  const Coll coll = static_cast<Coll>(r.coll);
  const bool p2p = coll == Coll::Send || coll == Coll::Recv;
  const double countBytes =
      static_cast<double>(r.count) *
      static_cast<double>(r.type < ncclNumTypes ? dataTypeSize(static_cast<ncclDataType_t>(r.type))
                                                : 0);
  const double bytes = bwBytes(shapeOf(coll), countBytes, nranks);
  const uint64_t us = r.endUs > r.startUs ? r.endUs - r.startUs : 0;
  const double algBw = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0;
  out += prefix;
  JsonLine j(out);
  j.u("seq", r.seq);
  j.u("batch", r.batch);
  j.s("coll", collName(coll));
  j.u("count", r.count);
  j.s("type", typeName(r.type));
  j.s("op", collReduces(coll) ? (r.op < ncclNumOps ? opName(r.op) : "premulsum") : "none");
  j.i("root", p2p ? -1 : (collRooted(coll) ? r.root : -1));
  j.i("peer", p2p ? r.root : -1);
  j.s("algo", r.algo == 0xff ? (p2p ? "P2p" : "none") : algoName(static_cast<Algo>(r.algo)));
  j.s("proto", r.proto < kNumProtocols ? protocolName(static_cast<Protocol>(r.proto)) : "none");
  j.u("channels", r.nChannels);
  j.u("call_us", r.callUs);
  j.u("start_us", r.startUs);
  j.u("end_us", r.endUs);
  j.u("bytes", static_cast<uint64_t>(bytes));
  j.u("time_us", us);
  j.f("algbw_gbs", algBw);
  j.f("busbw_gbs", algBw * busBwFactor(shapeOf(coll), nranks));
  out += r.ok ? ",\"ok\":true}" : ",\"ok\":false}";
}

}  // namespace

std::string formatTraceRecord(const TraceRecord& r, const TraceSource& src) {
  std::string line;
  appendRecord(line, linePrefix(src), r, src.nranks);
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
    : src_(src), file_(file), path_(std::move(path)) {
  filling_.reserve(kFlushRecords);
  writer_ = std::thread([this] { writerMain(); });
}

Tracer::~Tracer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_ = true;
  }
  cv_.notify_all();
  writer_.join();
  std::fclose(file_);
}

void Tracer::add(const TraceRecord& r) {
  bool full;
  {
    std::lock_guard<std::mutex> lock(mu_);
    filling_.push_back(r);
    full = filling_.size() >= kFlushRecords;
  }
  if (full) cv_.notify_one();
}

void Tracer::writerMain() {
  std::vector<TraceRecord> writing;
  writing.reserve(kFlushRecords);
  std::string text;
  const std::string prefix = linePrefix(src_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::seconds(1),
                 [this] { return exit_ || filling_.size() >= kFlushRecords; });
    const bool last = exit_;
    writing.swap(filling_);  // the engine goes on filling the other buffer meanwhile
    lock.unlock();
    text.clear();
    for (const TraceRecord& r : writing) {
      appendRecord(text, prefix, r, src_.nranks);
      text += '\n';
    }
    writing.clear();
    if (!text.empty()) {
      std::fwrite(text.data(), 1, text.size(), file_);
      std::fflush(file_);
    }
    lock.lock();
    if (last) return;
  }
}

}  // namespace ringcc
