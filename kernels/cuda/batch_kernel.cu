// The CUDA executor's one kernel: runs a batch's planner jobs (kernels/cuda/batch_args.h), one
// block per channel, each block's threads driving ProgramRunner<DeviceSync> through its three
// phases: thread 0 acquires a slice, every thread takes its share of the reduce-copy (warps
// side by side, 16-byte packs: ProgramRunner::reduceCopy), thread 0 publishes it.
//
// Waiting: when no lane can move, thread 0 polls the connection counters again, napping with
// __nanosleep after a short spin, and reads the communicator's abort flag (host-mapped) between
// polls, so ncclCommAbort frees a blocked kernel. A block that stops early (abort, a runner
// error) writes why to status[block] (host-mapped) and returns; the engine reads it.
//
// Built into a fatbin (sm_80, sm_90, compute_90 PTX) that libnccl.so.2 embeds and loads with
// cuModuleLoadData: the kernel's name is unmangled so that cuModuleGetFunction finds it.
#include "kernels/cuda/batch_args.h"
#include "kernels/cuda/device_sync.cuh"

namespace ringcc {
namespace {

constexpr int kStop = 0xff;  // block state: stop here (aborted or failed)

__device__ bool abortRaised(const uint32_t* flag) {
  return flag != nullptr && *(const volatile uint32_t*)flag != 0;
}

// Thread 0: binds the job to this block's runner. False (status written) if it cannot run.
__device__ bool bindJob(const BatchArgs& args, const DeviceJob& job, ChannelScratch* s) {
  RunArgs a{};
  a.program = job.program;
  a.ports = job.ports;
  a.inputs = reinterpret_cast<const void* const*>(s->words);
  a.outputs = reinterpret_cast<void* const*>(s->words + job.nBuffers);
  a.counts = s->words + 2 * job.nBuffers;
  a.type = job.type;
  a.elemSize = job.elemSize;
  a.op = job.op;
  a.protocol = job.protocol;
  a.nChannels = job.nChannels;
  a.channel = job.channel;
  a.sliceElems = job.sliceElems;
  a.chunkElems = job.chunkElems;
  a.sigColl = job.sigColl;
  a.sigOp = job.sigOp;
  a.sigRoot = job.sigRoot;
  a.ringRanks = job.ringRanks;
  a.nRingRanks = job.nRingRanks;
  RunError e = s->runner.init(a);
  if (e == kRunOk) return true;
  args.status[blockIdx.x] = kBlockRunError | (static_cast<uint32_t>(e) << 8);
  return false;
}

// Thread 0: the next slice that can move, waiting (and watching the abort flag) until one can.
__device__ int acquireWaiting(const BatchArgs& args, ChannelScratch* s, Slice* slice) {
  DeviceSync sync;
  for (unsigned polls = 0;; ++polls) {
    RunError error = kRunOk;
    RunStatus st = s->runner.acquire(sync, slice, &error);
    if (st == kRunReady || st == kRunDone) return st;
    if (st == kRunError) {
      args.status[blockIdx.x] = kBlockRunError | (static_cast<uint32_t>(error) << 8);
      return kStop;
    }
    if (abortRaised(args.abortFlag)) {
      args.status[blockIdx.x] = kBlockAborted;
      return kStop;
    }
    if (polls > 64) __nanosleep(polls > 4096 ? 1000 : 100);
  }
}

// Thread 0's `value` for every thread of the block. The second barrier keeps thread 0 from
// writing the next value before every thread has read this one.
__device__ int fromThread0(int* slot, int value) {
  if (threadIdx.x == 0) *slot = value;
  __syncthreads();
  const int v = *slot;
  __syncthreads();
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kLaunchThreads)
    ringccBatchKernel(const BatchArgs args) {
  ChannelScratch* s = args.scratch + blockIdx.x;
  __shared__ Slice slice;
  __shared__ int shared;
  for (uint32_t j = 0; j < args.nJobs; ++j) {
    const DeviceJob& job = args.jobs[j];
    if (job.channel != blockIdx.x) continue;
    // The job's buffers and counts next to the runner, which reads them through pointers.
    const uint32_t nWords = 2u * job.nBuffers + job.nCounts;
    for (uint32_t k = threadIdx.x; k < nWords; k += blockDim.x)
      s->words[k] = args.words[job.wordsAt + k];
    __syncthreads();
    int state = fromThread0(&shared, threadIdx.x == 0 && bindJob(args, job, s) ? kRunReady : kStop);
    while (state == kRunReady) {
      state = fromThread0(&shared, threadIdx.x == 0 ? acquireWaiting(args, s, &slice) : 0);
      if (state != kRunReady) break;
      s->runner.reduceCopy(slice, threadIdx.x, blockDim.x);
      __syncthreads();  // every share done before the slice is handed on
      if (threadIdx.x == 0) {
        DeviceSync sync;
        s->runner.publish(sync, slice);
      }
    }
    if (state != kRunDone) return;
  }
}

}  // namespace ringcc
