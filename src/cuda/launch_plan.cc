#include "src/cuda/launch_plan.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"

namespace ringcc {

size_t jobWords(const PlanJob& job) {
  // The kernel finds a job's outputs and counts by its Program's sizes (batch_block.h).
  return 2u * job.program->nBuffers + job.program->nCounts;
}

namespace {

uint64_t pointerWord(const void* p) { return reinterpret_cast<uintptr_t>(p); }

ncclResult_t checkJob(const PlanJob& job, size_t index, const LaunchContext& ctx) {
  if (!job.program)
    return fail(ncclInternalError, "cuda launch", "job %zu (%s) has no Program", index, job.name);
  // A job may carry more than its Program uses (grouped send/recv: a send to self and its
  // receive share one count), never fewer.
  const Program& g = *job.program;
  if (job.inputs.size() < g.nBuffers || job.outputs.size() < g.nBuffers ||
      job.counts.size() < g.nCounts)
    return fail(ncclInternalError, "cuda launch",
                "job %zu (%s): %zu inputs, %zu outputs, %zu counts for a Program of %d buffers "
                "and %d counts",
                index, job.name, job.inputs.size(), job.outputs.size(), job.counts.size(),
                g.nBuffers, g.nCounts);
  if (job.channel < 0 || job.channel >= kLaunchMaxBlocks ||
      static_cast<uint32_t>(job.channel) >= ctx.nScratch)
    return fail(ncclInvalidUsage, "cuda launch",
                "job %zu (%s) runs on channel %d: CUDA communicators have %u channels here "
                "(kLaunchMaxBlocks %d); more are not implemented yet",
                index, job.name, job.channel, ctx.nScratch, kLaunchMaxBlocks);
  if (jobWords(job) > static_cast<size_t>(kLaunchWords))
    return fail(ncclInvalidUsage, "cuda launch",
                "job %zu (%s) needs %zu argument words (buffers and counts), more than one "
                "kernel launch carries (%d): such batches (many grouped send/recv operations) "
                "are not implemented yet on CUDA communicators",
                index, job.name, jobWords(job), kLaunchWords);
  return ncclSuccess;
}

BatchArgs& newLaunch(const LaunchContext& ctx, std::vector<BatchArgs>* out) {
  BatchArgs& b = out->emplace_back();
  std::memset(&b, 0, sizeof b);
  b.scratch = ctx.scratch;
  b.abortFlag = ctx.abortFlag;
  b.status = ctx.status;
  b.timeoutNs = ctx.timeoutNs;
  return b;
}

}  // namespace

ncclResult_t packLaunches(std::span<const PlanJob> jobs, const LaunchContext& ctx,
                          const ResolveJob& resolve, std::vector<BatchArgs>* out) {
  out->clear();
  uint32_t wordsUsed = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const PlanJob& job = jobs[i];
    RINGCC_CHECK(checkJob(job, i, ctx));
    const uint32_t need = static_cast<uint32_t>(jobWords(job));
    if (out->empty() || out->back().nJobs == kLaunchMaxJobs || wordsUsed + need > kLaunchWords) {
      newLaunch(ctx, out);
      wordsUsed = 0;
    }
    BatchArgs& b = out->back();
    JobDeviceRefs refs;
    RINGCC_CHECK(resolve(job, &refs));
    DeviceJob& d = b.jobs[b.nJobs++];
    d.program = refs.program;
    d.ports = refs.ports;
    d.ringRanks = refs.ringRanks;
    d.op = job.op;
    d.sliceElems = job.sliceElems;
    d.chunkElems = job.chunkElems;
    d.type = job.type;
    d.elemSize = job.elemSize;
    d.nChannels = job.nChannels;
    d.channel = static_cast<uint32_t>(job.channel);
    d.sigRoot = job.sig.root;
    d.nRingRanks = job.nRingRanks;
    d.wordsAt = static_cast<uint16_t>(wordsUsed);
    d.nBuffers = job.program->nBuffers;
    d.nCounts = job.program->nCounts;
    d.protocol = static_cast<uint8_t>(job.protocol);
    d.sigColl = job.sig.coll;
    d.sigOp = job.sig.op;
    uint64_t* w = b.words + wordsUsed;
    for (uint16_t k = 0; k < d.nBuffers; ++k) *w++ = pointerWord(job.inputs[k]);
    for (uint16_t k = 0; k < d.nBuffers; ++k) *w++ = pointerWord(job.outputs[k]);
    for (uint16_t k = 0; k < d.nCounts; ++k) *w++ = job.counts[k];
    wordsUsed += need;
    b.nBlocks = std::max(b.nBlocks, d.channel + 1);
  }
  return ncclSuccess;
}

}  // namespace ringcc
