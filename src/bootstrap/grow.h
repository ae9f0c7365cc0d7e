// Growing: the Bootstrap of a larger group made of an existing one's ranks and new processes
// (ncclCommGrow).
//
//   coordinator (one existing rank)   ncclCommGetUniqueId: a single-use root in its process,
//                                     the id records the old size n (unique_id.h)
//   every existing rank               bootstrapGrowExisting: allGather over the old Bootstrap
//                                     of {role, nRanks, id}; the coordinator's id is everyone's;
//                                     then joins the id's rendezvous under its old rank
//   every new rank (ranks n..N-1)     Bootstrap::create on the id, from the id alone
//
// The allGather makes the existing ranks agree before anyone joins: no coordinator, two, a
// coordinator whose id was refused (reused, not its communicator's), or ranks that disagree on
// nRanks fail on every existing rank at once with ncclInvalidUsage, instead of leaving the
// others at the root until BOOTSTRAP_TIMEOUT. A new rank that never comes is the root's
// timeout: every rank that did come fails with ncclRemoteError after BOOTSTRAP_TIMEOUT.
#pragma once

#include <atomic>
#include <memory>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"

namespace ringcc {

// What an existing rank brings to the grow.
enum class GrowRole : int32_t {
  kMember = 0,       // passed no id
  kCoordinator = 1,  // passed the id (its ncclCommGetUniqueId's)
  kRefused = 2,      // passed an id that its communicator refused (the cause is logged there)
};

// Collective over `parent` (every rank calls it): the Bootstrap of the grown group of nRanks,
// this rank keeping parent.rank(). `id` is the coordinator's (role kCoordinator), else
// ignored. The new Bootstrap watches `abortFlag` (the new communicator's; may be null).
ncclResult_t bootstrapGrowExisting(Bootstrap& parent, GrowRole role, const ncclUniqueId* id,
                                   int nRanks, const std::atomic<bool>* abortFlag,
                                   std::unique_ptr<Bootstrap>* out);

// The size of the communicator a grow id grows (its ranks keep 0..n-1); ncclInvalidArgument,
// with `where` and a WARN, if `id` is not a grow id (ncclCommGetUniqueId's).
ncclResult_t bootstrapGrowFrom(const ncclUniqueId& id, const char* where, int* growFrom);

}  // namespace ringcc
