#include "src/base/error.h"

#include <cstdarg>
#include <cstdio>

#include "src/base/log.h"

namespace ringcc {
namespace {

// Per thread, like the groups of ncclGroupStart: nothing here needs a lock.
thread_local ErrorCause tLast;

ncclResult_t record(ncclResult_t code, int peer, const char* where, const char* fmt, va_list ap) {
  char what[768];
  vsnprintf(what, sizeof(what), fmt, ap);
  char line[1024];
  if (peer >= 0)
    snprintf(line, sizeof(line), "%s: %s (peer rank %d)", where, what, peer);
  else
    snprintf(line, sizeof(line), "%s: %s", where, what);
  LOG_WARN("%s", line);
  tLast.code = code;
  tLast.where = where;
  tLast.what = what;
  tLast.peer = peer;
  tLast.message = line;
  if (detail::tErrorScope) detail::tErrorScope->onError(tLast);
  return code;
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* where, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ncclResult_t r = record(code, -1, where, fmt, ap);
  va_end(ap);
  return r;
}

ncclResult_t failPeer(ncclResult_t code, int peer, const char* where, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ncclResult_t r = record(code, peer, where, fmt, ap);
  va_end(ap);
  return r;
}

std::string lastErrorMessage() { return tLast.message; }

ErrorCause lastError() { return tLast; }

void adoptError(const ErrorCause& cause) { tLast = cause; }

namespace detail {
__thread ErrorScope* tErrorScope = nullptr;
}  // namespace detail

const char* errorString(ncclResult_t code) {
  switch (code) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the ringcc developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

}  // namespace ringcc
