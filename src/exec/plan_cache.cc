#include "src/exec/plan_cache.h"

#include "src/core/error.h"

namespace ringcc {

ncclResult_t PlanCache::get(const CollDesc& d, const Program** out) {
  if (!d.ring.empty())
    return fail(ncclInternalError, "plan", "custom ring orders are not cached yet");
  Key key{static_cast<int>(d.coll),
          d.count,
          d.elemSize,
          d.nranks,
          d.rank,
          d.root,
          d.nChannels,
          d.channel,
          d.sliceElems,
          d.chunkElems};
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    *out = it->second.get();
    return ncclSuccess;
  }
  auto program = std::make_unique<Program>();
  RINGCC_CHECK(buildProgram(d, program.get()));
  *out = program.get();
  plans_.emplace(key, std::move(program));
  return ncclSuccess;
}

void PlanCache::beginBatch() {
  if (plans_.size() >= kMaxPlans) plans_.clear();
}

}  // namespace ringcc
