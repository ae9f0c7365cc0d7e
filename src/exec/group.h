// Group semantics: ncclGroupStart/ncclGroupEnd batch operations (and communicator inits) of
// the calling thread, on one communicator or many, and launch them together at the
// outermost ncclGroupEnd. Outside a group every operation is a group of one.
//
// On host communicators a launched batch is complete when launch returns: ncclGroupEnd
// returns when every grouped operation is done. Operations on different communicators of
// one batch progress concurrently (a single thread may drive every rank made by
// ncclCommInitAll).
//
// The group state is per thread, as NCCL's API defines it.
#pragma once

#include <functional>

#include "nccl.h"
#include "src/plan/coll_args.h"

namespace ringcc {

ncclResult_t groupStart();
ncclResult_t groupEnd();
bool groupActive();

// ncclGroupSimulateEnd: closes the group like groupEnd but launches nothing; the operations
// are dropped and *estimatedMicros receives the tuner's estimate of their time.
ncclResult_t groupSimulateEnd(float* estimatedMicros);

// Queues the operation in the current group, or runs it now if no group is open.
ncclResult_t enqueueOp(const CollArgs& args);

// Queues work that must run at the outermost ncclGroupEnd concurrently with the other
// deferred work of the group (communicator init inside a group), or runs it now.
ncclResult_t enqueueDeferred(std::function<ncclResult_t()> work);

// Queues a call made of several steps of its own (Adasum: src/adasum) on `like.comm`, to run
// at the outermost ncclGroupEnd after the group's operations completed: each communicator's
// calls in call order, communicators concurrently (one thread may drive every rank of a
// clique, and each rank's steps wait for its peers'). Runs it now if no group is open. `like`
// is what ncclGroupSimulateEnd counts for it (for Adasum, an all-reduce of the same size).
ncclResult_t enqueueAfterOps(const CollArgs& like, std::function<ncclResult_t()> work);

}  // namespace ringcc
