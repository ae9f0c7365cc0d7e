// The CUDA batch kernel's argument block (device-clean: compiled by g++ for the host side that
// packs it, src/cuda/launch_plan.h, and by nvcc for the kernel, kernels/cuda/batch_kernel.cu).
//
// One launch runs planner jobs (src/plan/planner.h), one block per channel: block c runs, in
// table order, the jobs whose channel is c. Everything a call changes travels by value in this
// block (buffers, counts, operator, sizes), and everything that outlives the call (Programs,
// connection views, ring orders, the runners' scratch, the abort flag) is device memory the
// block points to, uploaded once. So a launch needs no host synchronisation and can be
// captured into a CUDA graph.
//
//   BatchArgs { nJobs, nBlocks, scratch, abortFlag, status, timeoutNs,
//               jobs[0..nJobs) ── wordsAt ──► words[ inputs | outputs | counts ]  per job }
//
// The block must fit CUDA's classic 4 KB kernel-parameter limit; a batch with more jobs or
// words than one block holds is cut into several launches on the same stream (which keeps the
// per-channel order), by whole jobs.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/prims.h"

namespace ringcc {

constexpr int kLaunchMaxJobs = 12;    // jobs in one launch
constexpr int kLaunchWords = 320;     // 8-byte words for the jobs' buffers and counts
constexpr int kLaunchMaxBlocks = 64;  // channels (blocks) of one launch
constexpr int kLaunchThreads = 512;   // threads per block: 16 warps share each reduce-copy

// One job: PlanJob's fields with device addresses.
struct DeviceJob {
  const Program* program;      // device copy, uploaded once per Program
  const ConnectorView* ports;  // device array, [program->nPorts]
  const int* ringRanks;        // device array, or null for 0..n-1
  RedOp op;
  uint64_t sliceElems;
  uint64_t chunkElems;
  ncclDataType_t type;
  uint32_t elemSize;
  uint32_t nChannels;
  uint32_t channel;
  int32_t sigRoot;
  uint32_t nRingRanks;
  uint16_t wordsAt;   // this job's words: inputs[nBuffers], outputs[nBuffers], counts[nCounts]
  uint16_t nBuffers;  // program->nBuffers, repeated so the kernel need not read the Program
  uint16_t nCounts;   // program->nCounts
  uint8_t protocol;
  uint8_t sigColl;
  uint8_t sigOp;
};

// A job's run-time words, as the kernel copies them next to its runner.
constexpr int kJobMaxWords = 2 * kMaxBuffers + kMaxCounts;

// Per-block device scratch (one per channel of the communicator): the runner (it holds
// per-lane state and the LL staging buffers, too big for shared memory) and the current job's
// words, which the runner reads through pointers.
struct ChannelScratch {
  ProgramRunner runner;
  uint64_t words[kJobMaxWords];
};

// Why a block stopped, written to status[block] (host-mapped) when it did not finish.
enum BlockStatus : uint32_t {
  kBlockOk = 0,
  kBlockAborted = 1,     // the abort flag was raised while the block waited
  kBlockRunError = 2,    // the runner reported an error; the RunError is in the next byte
  kBlockPeerFailed = 3,  // a peer's block stopped first; its FailReason is in the next byte
  kBlockTimeout = 4,     // nothing could move for timeoutNs (NCCL_TIMEOUT)
};

struct BatchArgs {
  uint32_t nJobs;
  uint32_t nBlocks;
  ChannelScratch* scratch;    // device, [nBlocks] at least
  const uint32_t* abortFlag;  // host-mapped: non-zero stops every waiting block
  uint32_t* status;           // host-mapped, [nBlocks]: BlockStatus (| RunError << 8)
  uint64_t timeoutNs;         // a block that waits this long without a slice to move stops
  DeviceJob jobs[kLaunchMaxJobs];
  uint64_t words[kLaunchWords];
};

static_assert(sizeof(BatchArgs) <= 4096, "the kernel's parameters fit CUDA's 4 KB limit");

}  // namespace ringcc
