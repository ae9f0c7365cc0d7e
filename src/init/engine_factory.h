// The engine a communicator gets: CUDA for a CUDA communicator, the host engine otherwise.
#pragma once

#include <memory>

#include "nccl.h"
#include "src/core/engine.h"

struct ncclComm;

namespace ringcc {

// Builds the engine for an initialized communicator (peers exchanged, bootstrap up).
// Collective: every rank of the communicator calls it.
ncclResult_t createEngine(ncclComm* comm, std::unique_ptr<CommEngine>* out);

}  // namespace ringcc
