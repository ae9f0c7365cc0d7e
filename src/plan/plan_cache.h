// Built Programs, kept per communicator so that a repeated operation (the common case: the
// same all-reduce every training step, at any message size) skips the builder.
//
// Programs are free of the message (kernels/program.h), so the key is what a builder reads:
// (collective, algorithm, nranks, rank, root, channel, compact, ring order, tree node). Any ring
// order is accepted; the protocol is a run-time argument of the runner, not part of a Program.
// Bounded: a batch that finds the cache full starts it over. Used by one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/program.h"
#include "nccl.h"
#include "src/sched/builders.h"

namespace ringcc {

class PlanCache {
 public:
  // Called before a batch plans its operations: trims the cache if it is full.
  void beginBatch();

  // The Program for `d` on `channel` (built on first use). Valid until the next beginBatch().
  ncclResult_t get(const CollDesc& d, int channel, const Program** out);

  size_t size() const { return plans_.size(); }

 private:
  using Key = std::tuple<int, int, int, int, int, int, bool, std::vector<int>, std::array<int, 4>>;
  static constexpr size_t kMaxPlans = 1024;
  std::map<Key, std::unique_ptr<Program>> plans_;
};

}  // namespace ringcc
