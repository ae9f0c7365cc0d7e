// Logging with NCCL's variables.
//
// NCCL_DEBUG=VERSION|WARN|INFO|TRACE picks the level, NCCL_DEBUG_SUBSYS which subsystems log
// at INFO/TRACE (comma list, ALL, leading ^ to exclude), NCCL_DEBUG_FILE a file instead of
// stderr (%h: host name, %p: pid). Each line starts "host:pid:tid [rank] ringcc LEVEL".
// The rank is the calling thread's current rank, set by LogRankScope around work done for a
// communicator. The environment is read once, and again after resetLogging().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace ringcc {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

// Subsystem bits, named as in NCCL_DEBUG_SUBSYS.
enum LogSubsys : uint64_t {
  kLogInit = 1 << 0,
  kLogColl = 1 << 1,
  kLogP2p = 1 << 2,
  kLogShm = 1 << 3,
  kLogNet = 1 << 4,
  kLogGraph = 1 << 5,
  kLogTuning = 1 << 6,
  kLogEnv = 1 << 7,
  kLogAlloc = 1 << 8,
  kLogCall = 1 << 9,
  kLogProxy = 1 << 10,
  kLogBootstrap = 1 << 11,
  kLogAll = ~uint64_t{0},
};

namespace detail {
// The level as an int once the environment was read, -1 before (log.cc); the subsystems.
extern std::atomic<int> gLogLevel;
extern std::atomic<uint64_t> gLogSubsys;
bool logEnabledSlow(LogLevel level, uint64_t subsys);
}  // namespace detail

// True if a message of this level and subsystem would be written. Inline: a hot path (a
// repeated call's plan reuse, say) asks on every call, and the answer is nearly always "no"
// from one load, without the call into log.cc.
inline bool logEnabled(LogLevel level, uint64_t subsys) {
  const int current = detail::gLogLevel.load(std::memory_order_acquire);
  if (current >= 0) {
    if (static_cast<int>(level) > current) return false;
    return level < LogLevel::Info ||
           (detail::gLogSubsys.load(std::memory_order_relaxed) & subsys) != 0;
  }
  return detail::logEnabledSlow(level, subsys);  // reads the environment first
}

// True if a report someone asked for (a hang report: SIGUSR1, NCCL_TIMEOUT) is written: at
// WARN and above, and also with NCCL_DEBUG unset, since asking for a report is asking to see
// it. NCCL_DEBUG=VERSION keeps reports quiet.
bool reportEnabled();

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// Re-reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE (ncclResetDebugInit).
void resetLogging();

// Parses a NCCL_DEBUG_SUBSYS value into a mask (exposed for tests).
uint64_t parseSubsysMask(const char* text);

// Expands %h and %p in a NCCL_DEBUG_FILE value (exposed for tests).
std::string expandLogFileName(const char* pattern);

namespace detail {
// The rank in this thread's log prefix (-1: none). `__thread` and hidden for the same reason
// as detail::tErrorScope (src/base/error.h): every API call sets it through a CommScope.
extern __thread int tLogRank __attribute__((visibility("hidden"), tls_model("local-dynamic")));
}  // namespace detail

// Sets the rank shown in this thread's log prefix for the scope's lifetime.
class LogRankScope {
 public:
  explicit LogRankScope(int rank) : saved_(detail::tLogRank) { detail::tLogRank = rank; }
  ~LogRankScope() { detail::tLogRank = saved_; }
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int saved_;
};

}  // namespace ringcc

#define RINGCC_LOG(level, subsys, ...)                                      \
  do {                                                                      \
    if (::ringcc::logEnabled(level, subsys))                                \
      ::ringcc::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define LOG_WARN(...) RINGCC_LOG(::ringcc::LogLevel::Warn, ::ringcc::kLogAll, __VA_ARGS__)
#define LOG_REPORT(...)                                                                     \
  do {                                                                                      \
    if (::ringcc::reportEnabled())                                                          \
      ::ringcc::logMessage(::ringcc::LogLevel::Warn, ::ringcc::kLogAll, __FILE__, __LINE__, \
                           __VA_ARGS__);                                                    \
  } while (0)
#define LOG_INFO(subsys, ...) RINGCC_LOG(::ringcc::LogLevel::Info, subsys, __VA_ARGS__)
#define LOG_TRACE(subsys, ...) RINGCC_LOG(::ringcc::LogLevel::Trace, subsys, __VA_ARGS__)
