#include "src/base/log.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "src/base/param.h"

namespace ringcc {

// The inline logEnabled's fast path (log.h): -1 until the environment was read.
std::atomic<int> detail::gLogLevel{-1};
std::atomic<uint64_t> detail::gLogSubsys{0};

namespace {

struct LogState {
  std::mutex mu;
  bool loaded = false;
  LogLevel level = LogLevel::None;
  uint64_t subsys = 0;
  FILE* file = stderr;
  char host[64] = "";
};

LogState& state() {
  static LogState s;
  return s;
}

// fork() while another thread holds the log mutex would leave the child's copy locked
// forever; hold it across fork so both sides start with it free.
void lockForFork() { state().mu.lock(); }
void unlockAfterFork() { state().mu.unlock(); }
[[maybe_unused]] const int kAtForkRegistered =
    pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork);

struct SubsysName {
  const char* name;
  uint64_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},     {"COLL", kLogColl},   {"P2P", kLogP2p},
    {"SHM", kLogShm},       {"NET", kLogNet},     {"GRAPH", kLogGraph},
    {"TUNING", kLogTuning}, {"ENV", kLogEnv},     {"ALLOC", kLogAlloc},
    {"CALL", kLogCall},     {"PROXY", kLogProxy}, {"BOOTSTRAP", kLogBootstrap},
    {"ALL", kLogAll},
};

LogLevel parseLevel(const std::string& v) {
  if (strcasecmp(v.c_str(), "VERSION") == 0) return LogLevel::Version;
  if (strcasecmp(v.c_str(), "WARN") == 0) return LogLevel::Warn;
  if (strcasecmp(v.c_str(), "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(v.c_str(), "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::None;
}

void loadLocked(LogState& s) {
  s.level = parseLevel(paramString("DEBUG"));
  s.subsys = parseSubsysMask(paramString("DEBUG_SUBSYS").c_str());
  if (s.file != stderr && s.file != nullptr) fclose(s.file);
  s.file = stderr;
  std::string fileName = paramString("DEBUG_FILE");
  if (!fileName.empty() && s.level != LogLevel::None) {
    std::string path = expandLogFileName(fileName.c_str());
    if (FILE* f = fopen(path.c_str(), "w")) {
      setvbuf(f, nullptr, _IOLBF, 0);
      s.file = f;
    }
  }
  gethostname(s.host, sizeof(s.host) - 1);
  if (char* dot = strchr(s.host, '.')) *dot = '\0';
  s.loaded = true;
  detail::gLogSubsys.store(s.subsys);
  detail::gLogLevel.store(static_cast<int>(s.level));
}

void ensureLoaded() {
  if (detail::gLogLevel.load(std::memory_order_acquire) >= 0) return;
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.loaded) loadLocked(s);
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Version:
      return "VERSION";
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Trace:
      return "TRACE";
    default:
      return "";
  }
}

}  // namespace

uint64_t parseSubsysMask(const char* text) {
  const char* p = text;
  bool invert = false;
  if (*p == '^') {
    invert = true;
    ++p;
  }
  uint64_t mask = 0;
  std::string list(p);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string tok = list.substr(start, comma - start);
    for (const SubsysName& n : kSubsysNames)
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    start = comma + 1;
  }
  return invert ? ~mask : mask;
}

std::string expandLogFileName(const char* pattern) {
  std::string out;
  char host[64] = "";
  gethostname(host, sizeof(host) - 1);
  for (const char* c = pattern; *c; ++c) {
    if (c[0] == '%' && c[1] == 'h') {
      out += host;
      ++c;
    } else if (c[0] == '%' && c[1] == 'p') {
      out += std::to_string(getpid());
      ++c;
    } else {
      out += *c;
    }
  }
  return out;
}

bool reportEnabled() {
  ensureLoaded();
  const int current = detail::gLogLevel.load(std::memory_order_relaxed);
  return current >= static_cast<int>(LogLevel::Warn) ||
         (current == static_cast<int>(LogLevel::None) && !paramEnv("DEBUG"));
}

bool detail::logEnabledSlow(LogLevel level, uint64_t subsys) {
  ensureLoaded();
  return logEnabled(level, subsys);  // loaded now: the inline fast path answers
}

void logMessage(LogLevel level, uint64_t /*subsys*/, const char* file, int line, const char* fmt,
                ...) {
  ensureLoaded();
  LogState& s = state();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char rank[16] = "";
  if (detail::tLogRank >= 0) snprintf(rank, sizeof(rank), "%d", detail::tLogRank);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lock(s.mu);
  if (level == LogLevel::Trace) {
    fprintf(s.file, "%s:%d:%ld [%s] ringcc %s %s:%d %s\n", s.host, getpid(),
            static_cast<long>(syscall(SYS_gettid)), rank, levelName(level), base, line, msg);
  } else {
    fprintf(s.file, "%s:%d:%ld [%s] ringcc %s %s\n", s.host, getpid(),
            static_cast<long>(syscall(SYS_gettid)), rank, levelName(level), msg);
  }
  fflush(s.file);
}

void resetLogging() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  loadLocked(s);
}

namespace detail {
__thread int tLogRank = -1;
}  // namespace detail

}  // namespace ringcc
