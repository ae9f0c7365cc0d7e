// Built Programs, kept per communicator so that a repeated operation (the common case: the
// same all-reduce every training step) skips the builder and the 24 KB Program it fills.
//
// Keyed by every field of CollDesc that a builder reads; ring order is 0..n-1 for now and
// not part of the key. Bounded: a batch that finds it full starts it over. Used by one
// engine thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "nccl.h"
#include "src/sched/builders.h"
#include "src/sched/program.h"

namespace ringcc {

class PlanCache {
 public:
  // Called before a batch plans its operations: trims the cache if it is full.
  void beginBatch();

  // The Program for `d` (built on first use). Valid until the next beginBatch().
  ncclResult_t get(const CollDesc& d, const Program** out);

  size_t size() const { return plans_.size(); }

 private:
  using Key = std::tuple<int, size_t, size_t, int, int, int, int, int, size_t, size_t>;
  static constexpr size_t kMaxPlans = 256;
  std::map<Key, std::unique_ptr<Program>> plans_;
};

}  // namespace ringcc
