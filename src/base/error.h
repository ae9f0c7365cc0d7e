// Errors: precise codes plus a kept root cause.
//
// Every failure that leaves ringcc is made by fail(): it logs the cause at WARN (what went
// wrong, where, which peer) and keeps it in two places:
//  - as the calling thread's last error (lastErrorMessage, behind ncclGetLastError). It is
//    per thread so that threads failing at once on different communicators each keep their
//    own message. (NVIDIA's NCCL keeps one buffer for the whole process.)
//  - with the innermost ErrorScope open on this thread, if any. A CommScope (src/core/comm.h)
//    is one: whatever fails while a thread works for a communicator becomes that
//    communicator's candidate cause, and Communicator::recordError makes it its first error.
// Codes: bad arguments ncclInvalidArgument, misuse ncclInvalidUsage, a dead or misbehaving
// peer ncclRemoteError, OS failures ncclSystemError, our own bugs ncclInternalError.
#pragma once

#include <string>

#include "nccl.h"

namespace ringcc {

struct ErrorCause {
  ncclResult_t code = ncclSuccess;
  std::string where;    // the operation or layer that failed ("bootstrap", "ncclAllReduce")
  std::string what;     // what went wrong
  int peer = -1;        // the rank at fault, -1 if none
  std::string message;  // as logged: "where: what (peer rank N)"
};

// Logs and records an error, returns `code` so callers can `return fail(...)`.
ncclResult_t fail(ncclResult_t code, const char* where, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Same, for an error caused by peer rank `peer`.
ncclResult_t failPeer(ncclResult_t code, int peer, const char* where, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The last error raised on (or adopted by) the calling thread ("" if none).
std::string lastErrorMessage();
// The same with its parts (code ncclSuccess if none).
ErrorCause lastError();

// Makes `cause` the calling thread's last error without logging it again: for a call whose
// failure was raised, and logged, on another thread (an engine thread, a helper thread of
// ncclCommInitAll), so that the thread the call returns to can still say why.
void adoptError(const ErrorCause& cause);

class ErrorScope;
namespace detail {
// The innermost ErrorScope open on this thread. `__thread` (constant-initialized, so no
// per-access initialization check) and hidden, so the inline constructor and destructor below
// reach it through the library's TLS block, whose address a function computes once for all
// its thread-local variables, rather than with a call per access: every API call opens a
// scope (src/core/comm.h, CommScope).
extern __thread ErrorScope* tErrorScope
    __attribute__((visibility("hidden"), tls_model("local-dynamic")));
}  // namespace detail

// Hears about every error raised on the thread that opened it, while it is the innermost
// scope open there. Scopes nest; they must end in reverse order of opening (stack objects).
class ErrorScope {
 public:
  ErrorScope() : outer_(detail::tErrorScope) { detail::tErrorScope = this; }
  virtual ~ErrorScope() { detail::tErrorScope = outer_; }
  ErrorScope(const ErrorScope&) = delete;
  ErrorScope& operator=(const ErrorScope&) = delete;

  // Called on the raising thread, after the WARN line and the thread's last error.
  virtual void onError(const ErrorCause& cause) = 0;

 private:
  ErrorScope* outer_;
};

// ncclGetErrorString's text.
const char* errorString(ncclResult_t code);

}  // namespace ringcc

// Propagates a non-success ncclResult_t (ncclInProgress included) to the caller.
#define RINGCC_CHECK(call)              \
  do {                                  \
    ncclResult_t rc_ = (call);          \
    if (rc_ != ncclSuccess) return rc_; \
  } while (0)
