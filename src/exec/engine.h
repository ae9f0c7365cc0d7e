// The engine of a communicator: its channels, their connectors and the executor that runs
// Programs on them. Created at the end of communicator init, once peers are known; destroyed
// before the bootstrap it used to exchange connection infos.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "nccl.h"
#include "src/exec/coll_args.h"

struct ncclComm;

namespace ringcc {

class CommEngine {
 public:
  // Builds the engine for an initialized communicator (peers exchanged, bootstrap up).
  // Collective: every rank of the communicator calls it.
  static ncclResult_t create(ncclComm* comm, std::unique_ptr<CommEngine>* out);
  virtual ~CommEngine() = default;

  // Starts a batch of operations (one group's operations on this communicator, in call
  // order) and returns without waiting; the caller then calls wait(). Connection set-up
  // and execution happen on the engine's own threads, so one thread may submit batches to
  // several communicators before waiting on any of them.
  virtual ncclResult_t submit(const std::vector<CollArgs>& ops) = 0;

  // Blocks until the submitted batch is done; returns its first error.
  virtual ncclResult_t wait() = 0;

  // Runs a batch to completion on the calling thread: for batches that touch only this
  // communicator, it saves the two thread hand-offs of submit() and wait().
  virtual ncclResult_t run(std::span<const CollArgs> ops) = 0;

  // Stops operations in flight (they return an error); the engine stays destroyable.
  virtual void abortOps() = 0;
};

}  // namespace ringcc
