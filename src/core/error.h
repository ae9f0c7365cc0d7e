// Errors: precise codes plus a kept root cause.
//
// Every failure that leaves ringcc is made by fail(): it logs the cause at WARN (what went
// wrong, where, which peer) and records it as the process's last error, so ncclGetLastError
// can repeat it. A communicator keeps its own first error too (Communicator::recordError).
// Codes: bad arguments ncclInvalidArgument, misuse ncclInvalidUsage, a dead or misbehaving
// peer ncclRemoteError, OS failures ncclSystemError, our own bugs ncclInternalError.
#pragma once

#include <string>

#include "nccl.h"

namespace ringcc {

struct ErrorCause {
  ncclResult_t code = ncclSuccess;
  std::string message;  // "where: what (peer N)"
};

// Logs and records an error, returns `code` so callers can `return fail(...)`.
ncclResult_t fail(ncclResult_t code, const char* where, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Same, for an error caused by peer rank `peer`.
ncclResult_t failPeer(ncclResult_t code, int peer, const char* where, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The last error recorded in this process ("" if none).
std::string lastErrorMessage();

// ncclGetErrorString's text.
const char* errorString(ncclResult_t code);

}  // namespace ringcc

// Propagates a non-success ncclResult_t (ncclInProgress included) to the caller.
#define RINGCC_CHECK(call)              \
  do {                                  \
    ncclResult_t rc_ = (call);          \
    if (rc_ != ncclSuccess) return rc_; \
  } while (0)
