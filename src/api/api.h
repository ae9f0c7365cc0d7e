// Helpers for the C entry points: export with the pnccl* alias, and argument checks that
// answer ncclInvalidArgument with a WARN naming the argument. Entry points hold no logic:
// check, translate, hand on.
#pragma once

#include "nccl.h"
#include "src/core/comm.h"
#include "src/core/error.h"

// Declares `name` as an exported C function together with its profiling alias p<name>;
// the definition follows the macro: NCCL_API(ncclResult_t, ncclFoo, int x) { ... }
#define NCCL_API(ret, name, ...)                                                   \
  extern "C" __attribute__((visibility("default"))) ret name(__VA_ARGS__);         \
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

// As checkComm, plus: the communicator has finished init and may run operations.
ncclResult_t checkCommReady(const Communicator* comm, const char* where);

}  // namespace ringcc
