#include "src/plan/plan_cache.h"

#include "src/base/error.h"

namespace ringcc {

ncclResult_t PlanCache::get(const CollDesc& d, int channel, const Program** out) {
  Key key{static_cast<int>(d.coll),
          static_cast<int>(d.algo),
          d.nranks,
          d.rank,
          d.root,
          channel,
          d.compact,
          d.ring,
          {d.tree.up, d.tree.down[0], d.tree.down[1], d.tree.down[2]}};
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    *out = it->second.get();
    return ncclSuccess;
  }
  auto program = std::make_unique<Program>();
  RINGCC_CHECK(buildProgram(d, program.get()));
  *out = program.get();
  plans_.emplace(std::move(key), std::move(program));
  return ncclSuccess;
}

void PlanCache::beginBatch() {
  if (plans_.size() >= kMaxPlans) plans_.clear();
}

}  // namespace ringcc
