#include "src/bootstrap/grow.h"

#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/bootstrap/unique_id.h"

namespace ringcc {
namespace {

constexpr const char* kWhere = "ncclCommGrow";

struct GrowOffer {
  int32_t role;  // GrowRole
  int32_t nRanks;
  ncclUniqueId id;
};

}  // namespace

ncclResult_t bootstrapGrowFrom(const ncclUniqueId& id, const char* where, int* growFrom) {
  BootstrapId fields;
  if (bootstrapParseId(id, &fields) != ncclSuccess || fields.growFrom < 1)
    return fail(ncclInvalidArgument, where,
                "uniqueId was not made by ncclCommGetUniqueId (an id of ncclGetUniqueId "
                "cannot grow a communicator)");
  *growFrom = fields.growFrom;
  return ncclSuccess;
}

ncclResult_t bootstrapGrowExisting(Bootstrap& parent, GrowRole role, const ncclUniqueId* id,
                                   int nRanks, const std::atomic<bool>* abortFlag,
                                   std::unique_ptr<Bootstrap>* out) {
  const int n = parent.nranks(), me = parent.rank();
  std::vector<GrowOffer> offers(n);
  offers[me].role = static_cast<int32_t>(role);
  offers[me].nRanks = nRanks;
  if (role == GrowRole::kCoordinator) offers[me].id = *id;
  RINGCC_CHECK(parent.allGather(offers.data(), sizeof(GrowOffer)));
  int coordinator = -1;
  for (int r = 0; r < n; ++r) {
    const GrowOffer& o = offers[r];
    if (o.role == static_cast<int32_t>(GrowRole::kRefused))
      return fail(ncclInvalidUsage, kWhere,
                  "rank %d's uniqueId was refused there (reused, or not its communicator's "
                  "ncclCommGetUniqueId); no rank grows",
                  r);
    if (o.nRanks != nRanks)
      return fail(ncclInvalidUsage, kWhere, "rank %d passed nRanks %d, rank %d passed %d", r,
                  o.nRanks, me, nRanks);
    if (o.role != static_cast<int32_t>(GrowRole::kCoordinator)) continue;
    if (coordinator >= 0)
      return fail(ncclInvalidUsage, kWhere,
                  "ranks %d and %d both passed a uniqueId; only the rank that called "
                  "ncclCommGetUniqueId passes it, the others NULL",
                  coordinator, r);
    coordinator = r;
  }
  if (coordinator < 0)
    return fail(ncclInvalidUsage, kWhere,
                "no rank of the %d-rank communicator passed a uniqueId: the rank that called "
                "ncclCommGetUniqueId passes it, the others NULL",
                n);
  const ncclUniqueId& grownId = offers[coordinator].id;
  int growFrom = 0;
  RINGCC_CHECK(bootstrapGrowFrom(grownId, kWhere, &growFrom));
  if (growFrom != n)
    return fail(ncclInvalidUsage, kWhere,
                "rank %d's uniqueId grows a communicator of %d ranks, this one has %d", coordinator,
                growFrom, n);
  LOG_INFO(kLogInit | kLogBootstrap,
           "grow: rank %d of %d joins the rendezvous of %d ranks "
           "(coordinator rank %d)",
           me, n, nRanks, coordinator);
  return Bootstrap::create(grownId, me, nRanks, abortFlag, out);
}

}  // namespace ringcc
