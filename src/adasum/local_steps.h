// Adasum's local steps (kernels/adasum_tasks.h) on a communicator's executor: run at once on
// the calling thread for a host communicator, queued on the call's stream for a CUDA one (the
// CUDA engine's workspace, copies and kernel: src/cuda/cuda_engine.h). The schedule
// (adasum.cc) is the same for both; only these steps differ.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/adasum_tasks.h"
#include "nccl.h"

struct ncclComm;

namespace ringcc {

class AdasumLocal {
 public:
  virtual ~AdasumLocal() = default;
  // The workspace reserved by reserveAdasumWorkspace (memory of the communicator's kind).
  virtual char* workspace() = 0;
  virtual ncclResult_t copy(void* dst, const void* src, size_t bytes) = 0;
  virtual ncclResult_t zero(void* dst, size_t bytes) = 0;
  // One step: products, coefficients or the combination.
  virtual ncclResult_t run(const AdasumArgs& args) = 0;
};

// Makes the communicator's workspace at least `bytes` (host: comm->hostScratch; CUDA: the
// engine's, allocated now, before any kernel of the call's group is queued).
ncclResult_t reserveAdasumWorkspace(ncclComm* comm, size_t bytes);

std::unique_ptr<AdasumLocal> adasumLocal(ncclComm* comm, cudaStream_t stream);

}  // namespace ringcc
