// Creating and ending communicators: the logic behind ncclCommInit*, ncclCommSplit,
// ncclCommShrink, ncclCommGrow, ncclCommFinalize, ncclCommRevoke, ncclCommDestroy and
// ncclCommAbort. Arguments are checked by src/api before they get here.
#pragma once

#include <vector>

#include "nccl.h"
#include "src/core/comm.h"
#include "src/core/config.h"

namespace ringcc {

// One rank of a new communicator from a unique id. Blocking configs return when the
// communicator is ready; non-blocking ones return ncclInProgress with *out set, and the
// result shows up in ncclCommGetAsyncError.
ncclResult_t commInitRank(Communicator** out, int nranks, const ncclUniqueId& id, int rank,
                          const CommConfig& config);

// nranks communicators in this process, one per rank, made concurrently from threads.
ncclResult_t commInitAll(Communicator** comms, int nranks, const int* devlist);

// Collective over `parent`: ranks with equal color form a new communicator, ordered by
// (key, parent rank). NCCL_SPLIT_NOCOLOR ranks take part but get *out = nullptr.
ncclResult_t commSplit(Communicator* parent, int color, int key, Communicator** out,
                       const CommConfig& config);

// Collective over the ranks of `parent` not in `exclude` (which must not call it): they form
// a new communicator in parent-rank order. Excluded ranks may be dead.
ncclResult_t commShrink(Communicator* parent, const std::vector<int>& exclude, Communicator** out,
                        const CommConfig& config, int flags);

// ncclCommGetUniqueId: a single-use id to grow `comm` with (a root in this process);
// ncclInvalidUsage while an earlier one is not consumed yet.
ncclResult_t commGrowId(Communicator* comm, ncclUniqueId* id);

// ncclCommGrow on a rank of `parent` (collective over its ranks): the grown communicator of
// nRanks ranks, in which this rank keeps its rank. `id` is non-null on the coordinator only,
// and must be the unconsumed id of parent's commGrowId (consumed here, whatever the outcome).
ncclResult_t commGrow(Communicator* parent, int nRanks, const ncclUniqueId* id, Communicator** out,
                      const CommConfig& config);

// ncclCommGrow on a new rank: joins the grow of `id` as `rank` of nRanks (checked by the
// caller: rank in [the id's old size, nRanks)).
ncclResult_t commGrowJoin(int nRanks, const ncclUniqueId& id, int rank, Communicator** out,
                          const CommConfig& config);

ncclResult_t commFinalize(Communicator* comm);
ncclResult_t commRevoke(Communicator* comm);
ncclResult_t commDestroy(Communicator* comm);
ncclResult_t commAbort(Communicator* comm);

}  // namespace ringcc
