// Adasum's local steps (kernels/adasum_tasks.h) on a communicator's executor: run at once on
// the calling thread for a host communicator, queued on the call's stream for a CUDA one (the
// CUDA engine's stream-ordered workspace, copies and kernel: src/cuda/cuda_engine.h). The
// schedule (adasum.cc) is the same for both; only these steps differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/adasum_tasks.h"
#include "nccl.h"
#include "src/plan/coll_args.h"

struct ncclComm;

namespace ringcc {

class AdasumLocal {
 public:
  virtual ~AdasumLocal() = default;
  // One call's workspace of `bytes` (memory of the communicator's kind), usable by the steps
  // that follow; releaseWorkspace after the call's last step that uses it.
  virtual ncclResult_t acquireWorkspace(size_t bytes, char** out) = 0;
  virtual ncclResult_t releaseWorkspace(char* workspace) = 0;
  virtual ncclResult_t copy(void* dst, const void* src, size_t bytes) = 0;
  virtual ncclResult_t zero(void* dst, size_t bytes) = 0;
  // One step: products, coefficients or the combination.
  virtual ncclResult_t run(const AdasumArgs& args) = 0;
  // How many elements of `elementSize` bytes an exchange moves before the products of what it
  // brought are taken (adasum.cc, exchangeWithProducts); the same on every rank of a
  // communicator. Default: all at once.
  virtual size_t windowElems(size_t /*elementSize*/) const { return SIZE_MAX; }
  // Whether each step has run when it returns (the calling thread is the executor), so that
  // the schedule can read what a step wrote, a coefficient, say, before it queues the next.
  virtual bool stepsRunAtOnce() const { return false; }
  // Whether a call prepares every batch of its schedule (prepare) before it queues anything,
  // every rank having done so (a barrier): CUDA communicators whose ranks share a GPU, where a
  // connection made between two of the call's kernels could wait for the first of them.
  virtual bool preparesFirst() const { return false; }
  // One batch's connections and uploads, without running it.
  virtual ncclResult_t prepare(std::span<const CollArgs>) { return ncclSuccess; }
};

// Host: comm->hostScratch, kept between calls (counted as suspendable memory). CUDA: allocated
// per call in stream order (cuMemAllocAsync / cuMemFreeAsync), which never waits for running
// kernels: a call can be made while an earlier one's kernels wait for a peer.
std::unique_ptr<AdasumLocal> adasumLocal(ncclComm* comm, cudaStream_t stream);

}  // namespace ringcc
