// Sub-groups: a new Bootstrap for some ranks of an existing one (ncclCommSplit and friends).
//
// The group's new rank 0 (members[0]) starts a fresh root (bootstrapNewRoot, never the
// NCCL_COMM_ID address) and sends its unique id, with a fingerprint of the member list, to
// the other members through the parent's tagged messages; every member then joins with
// Bootstrap::create under its new rank. Members that disagree on the list get
// ncclInvalidUsage instead of a rendezvous that can never complete. Several groups may form
// at once from one parent (each has its own leader and root).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"

namespace ringcc {

// Parent ranks of the group of `rank`, in new-rank order: those with the same color, sorted by
// (key, parent rank). Empty when colors[rank] is NCCL_SPLIT_NOCOLOR. Pure.
std::vector<int> splitMembers(const std::vector<int>& colors, const std::vector<int>& keys,
                              int rank);

// Creates the Bootstrap of the group `members` (parent ranks in new-rank order, including the
// caller's). Every member must call it with the same list. The new Bootstrap watches
// `abortFlag` (the new communicator's; may be null), never the parent's: the group outlives
// its parent, which may be aborted and freed while the group goes on.
ncclResult_t bootstrapSubGroup(Bootstrap& parent, const std::vector<int>& members,
                               const std::atomic<bool>* abortFlag, std::unique_ptr<Bootstrap>* out);

// Collective over the parent: allGathers every rank's (color, key) and creates this rank's
// group as splitMembers says. With color NCCL_SPLIT_NOCOLOR, *out is null. A color below
// NCCL_SPLIT_NOCOLOR is ncclInvalidArgument on that rank, which still takes part in the
// allGather (as NOCOLOR) so that the others are not left waiting. The group's Bootstrap
// watches `abortFlag`, as with bootstrapSubGroup.
ncclResult_t bootstrapSplit(Bootstrap& parent, int color, int key,
                            const std::atomic<bool>* abortFlag, std::unique_ptr<Bootstrap>* out);

}  // namespace ringcc
