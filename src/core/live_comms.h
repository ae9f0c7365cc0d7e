// Which communicator handles are live, and the hold an API call (or the hang watcher) keeps
// on one: process-wide state of the communicators, kept in core so that every layer above
// can check a handle the same way (src/api's entry points, src/monitor's watcher).
#pragma once

#include "nccl.h"
#include "src/core/comm.h"

namespace ringcc {

// Communicators handed out and not yet destroyed: catches NULL and stale handles.
void registerComm(Communicator* comm);
void unregisterComm(Communicator* comm);
bool isLiveComm(const Communicator* comm);

// ncclInvalidArgument unless `comm` is a live communicator.
ncclResult_t checkComm(const Communicator* comm, const char* where);

// Holds a communicator "in use" for an API call, so that ncclCommAbort or ncclCommDestroy
// from another thread waits for the call instead of freeing the communicator under it. The
// liveness check and the registration happen under one lock, which abort and destroy also
// take to unregister the handle: a call either enters before or is refused after.
class ApiGuard {
 public:
  ApiGuard() = default;
  ~ApiGuard();
  ApiGuard(const ApiGuard&) = delete;
  ApiGuard& operator=(const ApiGuard&) = delete;

  // ncclInvalidArgument unless `comm` is live; then the call holds it.
  ncclResult_t enter(Communicator* comm, const char* where);
  // As enter, but quiet: false, with no error raised, unless `comm` is live.
  bool tryEnter(Communicator* comm);
  // As enter, plus: the communicator finished init and may run operations (it is not
  // aborted, revoked, finalized, failed or suspended). ncclCommResume passes
  // `suspendedOk`: it is the call a suspended communicator takes.
  ncclResult_t enterReady(Communicator* comm, const char* where, bool suspendedOk = false);

 private:
  Communicator* comm_ = nullptr;
};

}  // namespace ringcc
