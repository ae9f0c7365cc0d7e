// Helpers for the C entry points: export with the pnccl* alias, and argument checks that
// answer ncclInvalidArgument with a WARN naming the argument. Entry points hold no logic:
// check, translate, hand on.
#pragma once

#include "nccl.h"
#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/core/live_comms.h"

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

// ncclInvalidArgument if `ptr` is null; `what` names the argument.
ncclResult_t checkNotNull(const void* ptr, const char* what, const char* where);

}  // namespace ringcc
