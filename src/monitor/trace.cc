#include "src/monitor/trace.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
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

std::string formatTraceRecord(const TraceRecord& r, const TraceSource& src) {
  const Coll coll = static_cast<Coll>(r.coll);
  const bool p2p = coll == Coll::Send || coll == Coll::Recv;
  const double countBytes =
      static_cast<double>(r.count) * static_cast<double>(
          r.type < ncclNumTypes ? dataTypeSize(static_cast<ncclDataType_t>(r.type)) : 0);
  const double bytes = bwBytes(shapeOf(coll), countBytes, src.nranks);
  const double seconds = r.endUs > r.startUs ? (r.endUs - r.startUs) * 1e-6 : 0.0;
  const double algBw = seconds > 0 ? bytes / seconds / 1e9 : 0.0;
  const double busBw = algBw * busBwFactor(shapeOf(coll), src.nranks);
  const bool reduces = collReduces(coll);
  char line[768];
  std::snprintf(
      line, sizeof(line),
      "{\"comm\":\"%016llx\",\"rank\":%d,\"nranks\":%d,\"host\":\"%s\",\"pid\":%d,"
      "\"seq\":%llu,\"batch\":%llu,\"coll\":\"%s\",\"count\":%llu,\"type\":\"%s\","
      "\"op\":\"%s\",\"root\":%d,\"peer\":%d,\"algo\":\"%s\",\"proto\":\"%s\",\"channels\":%u,"
      "\"call_us\":%llu,\"start_us\":%llu,\"end_us\":%llu,\"bytes\":%.0f,\"time_us\":%llu,"
      "\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,\"ok\":%s}",
      static_cast<unsigned long long>(src.commHash), src.rank, src.nranks, src.host.c_str(),
      src.pid, static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.batch),
      collName(coll), static_cast<unsigned long long>(r.count), typeName(r.type),
      reduces ? (r.op < ncclNumOps ? opName(r.op) : "premulsum") : "none",
      p2p ? -1 : (collRooted(coll) ? r.root : -1), p2p ? r.root : -1,
      r.algo == 0xff ? (p2p ? "P2p" : "none") : algoName(static_cast<Algo>(r.algo)),
      r.proto < kNumProtocols ? protocolName(static_cast<Protocol>(r.proto)) : "none",
      static_cast<unsigned>(r.nChannels), static_cast<unsigned long long>(r.callUs),
      static_cast<unsigned long long>(r.startUs), static_cast<unsigned long long>(r.endUs), bytes,
      static_cast<unsigned long long>(r.endUs > r.startUs ? r.endUs - r.startUs : 0), algBw,
      busBw, r.ok ? "true" : "false");
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
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::seconds(1),
                 [this] { return exit_ || filling_.size() >= kFlushRecords; });
    const bool last = exit_;
    writing.swap(filling_);  // the engine goes on filling the other buffer meanwhile
    lock.unlock();
    text.clear();
    for (const TraceRecord& r : writing) {
      text += formatTraceRecord(r, src_);
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
