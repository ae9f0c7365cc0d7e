// Helpers for the C entry points: export with the pnccl* alias, and argument checks that
// answer ncclInvalidArgument with a WARN naming the argument. Entry points hold no logic:
// check, translate, hand on.
#pragma once

#include "nccl.h"
#include "src/core/comm.h"
#include "src/core/error.h"

// The exported entry points must be compiled against ringcc's nccl.h (include/ first on every
// include path), never NVIDIA's from /usr/local/cuda/include, and without the CUDA toolkit's
// headers: the host library needs no CUDA to build.
#ifndef RINGCC_NCCL_H
#error "NVIDIA's nccl.h was found before ringcc's include/nccl.h"
#endif
#ifdef RINGCC_NCCL_H_WITH_CUDA
#error "ringcc's host sources must not have the CUDA toolkit's headers on their include path"
#endif

// Declares `name` as an exported C function together with its profiling alias p<name>;
// the definition follows the macro: NCCL_API(ncclResult_t, ncclFoo, int x) { ... }
#define NCCL_API(ret, name, ...)                                                            \
  extern "C" __attribute__((visibility("default"))) ret name(__VA_ARGS__);                  \
  extern "C" __attribute__((visibility("default"), alias(#name))) ret p##name(__VA_ARGS__); \
  extern "C" ret name(__VA_ARGS__)

namespace ringcc {

// Communicators handed out and not yet destroyed: catches NULL and stale handles.
void registerComm(Communicator* comm);
void unregisterComm(Communicator* comm);
bool isLiveComm(const Communicator* comm);

// ncclInvalidArgument unless `comm` is a live communicator.
ncclResult_t checkComm(const Communicator* comm, const char* where);

// ncclInvalidArgument if `ptr` is null; `what` names the argument.
ncclResult_t checkNotNull(const void* ptr, const char* what, const char* where);

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
  // As enter, plus: the communicator finished init and may run operations.
  ncclResult_t enterReady(Communicator* comm, const char* where);

 private:
  Communicator* comm_ = nullptr;
};

}  // namespace ringcc
