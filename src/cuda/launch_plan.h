// Host-side launch planning for the CUDA batch kernel: a batch's planner jobs packed into
// BatchArgs blocks (kernels/cuda/batch_args.h), one kernel launch each. Pure: no CUDA call, so
// what goes into a launch (jobs, channels, buffers, counts, sizes) is unit-tested without a
// GPU. The engine supplies the device addresses of what outlives a call (Programs, connection
// views, ring orders) through a resolver, and launches the blocks in order on the user's
// stream.
//
// Rules: jobs keep their order; a launch holds at most kLaunchMaxJobs jobs and kLaunchWords
// words, so a batch that does not fit is cut between jobs (stream order keeps each channel's
// jobs in order across launches). A launch has one block per channel up to its highest
// channel. Limits are checked: a channel beyond kLaunchMaxBlocks, or one job whose words alone
// exceed a launch, is an error naming the limit.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "kernels/cuda/batch_args.h"
#include "nccl.h"
#include "src/plan/planner.h"

namespace ringcc {

// Device addresses for one job's long-lived tables.
struct JobDeviceRefs {
  const Program* program = nullptr;
  const ConnectorView* ports = nullptr;
  const int* ringRanks = nullptr;
};
using ResolveJob = std::function<ncclResult_t(const PlanJob& job, JobDeviceRefs* refs)>;

// What every launch of a communicator shares.
struct LaunchContext {
  ChannelScratch* scratch = nullptr;  // device, one per channel
  uint32_t nScratch = 0;              // channels the scratch covers
  const uint32_t* abortFlag = nullptr;
  uint32_t* status = nullptr;  // host-mapped, [nScratch]
  uint64_t timeoutNs = 0;      // NCCL_TIMEOUT for a block's waits; 0: none
};

// Packs jobs[0..n) into *out (cleared first): one BatchArgs per launch, in launch order.
ncclResult_t packLaunches(std::span<const PlanJob> jobs, const LaunchContext& ctx,
                          const ResolveJob& resolve, std::vector<BatchArgs>* out);

// Words one job needs in a launch: an input and an output per buffer of its Program, one per
// count of it (a job may carry more, unused: grouped send/recv).
size_t jobWords(const PlanJob& job);

}  // namespace ringcc
