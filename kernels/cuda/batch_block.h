// One block of the CUDA batch kernel (kernels/cuda/batch_kernel.cu), written once for two
// callers: the kernel itself (a block of 512 threads, DeviceSync) and the emulated driver the
// host tests use (tests/support/fake_cuda.h: one host thread per block, HostSync), so that the
// host tests run the kernel's own job loop, waits, abort checks and status words.
//
// Block c runs, in table order, the launch's jobs whose channel is c. Per job: the job's
// words are copied next to the channel's runner (which reads them through pointers); thread 0
// binds the runner; then, per slice, thread 0 acquires it (waiting, and watching the abort
// flag, until one can move), every thread takes its share (ProgramRunner::reduceCopyBlock:
// Simple in 16-byte packs, LL by lines that each thread polls itself), and thread 0
// publishes it. A block that stops early writes why into status[block] and returns.
//
// A block that stops also marks its job's connections failed (FifoControl::failReason), and a
// waiting block reads the failReason of its job's connections now and then: so when one rank's
// kernel stops (mismatched calls, an abort), the kernels of the ranks waiting on it stop too,
// with kBlockPeerFailed, instead of waiting until their own abort.
//
// The Block policy supplies:
//   uint32_t index(), thread(), threads()   blockIdx.x, threadIdx.x, blockDim.x
//   void barrier()                          __syncthreads()
//   bool barrierAnd(bool), barrierOr(bool)  __syncthreads_and / _or (optional for a block of
//                                           one thread: kernels/prims.h, blockAll)
//   void nap(unsigned polls)                pause after `polls` fruitless polls
//   uint64_t nanos()                        a clock in nanoseconds (the GPU's global timer)
//   Slice* slice(); int* word()             block-shared storage
//   using Sync = ...                        ProgramRunner's Sync policy
#pragma once

#include <stdint.h>

#include "kernels/cuda/batch_args.h"
#include "kernels/device_clean.h"
#include "kernels/device_ops.h"

namespace ringcc {

constexpr int kBlockStop = 0xff;  // block state: stop here (aborted or failed)

// A waiting block reads the abort flag, its peers' failures and the clock once every this many
// fruitless polls: the flag is host-mapped (a read crosses PCIe), the failures may be too.
constexpr unsigned kBatchCheckPolls = 64;

RINGCC_INLINE bool batchAbortRaised(const uint32_t* flag) {
  return flag != nullptr && ldVolatile32(flag) != 0;
}

RINGCC_INLINE void batchSetStatus(const BatchArgs& args, uint32_t block, uint32_t status) {
  stVolatile32(&args.status[block], status);
}

// Thread 0 of a block that stops: tells the peers on every connection of its job.
RINGCC_INLINE void batchMarkFailed(const DeviceJob& job, uint32_t reason) {
  for (int i = 0; i < job.program->nPorts; ++i)
    stVolatile32(&job.ports[i].control->failReason, reason);
}

// How much a FailReason tells: mismatched calls name the cause, a death names the peer, a
// stop the least. Connections may carry different ones (a peer that closed because it saw
// another die): the most telling is reported.
RINGCC_INLINE int batchFailWeight(uint32_t r) {
  return r == kFailMismatch ? 3 : r == kFailPeerDead ? 2 : r == kFailStopped ? 1 : 0;
}

// The most telling FailReason that peers left on the job's connections, or kFailNone.
RINGCC_INLINE uint32_t batchPeerFailed(const DeviceJob& job) {
  uint32_t found = kFailNone;
  for (int i = 0; i < job.program->nPorts; ++i) {
    const uint32_t r = ldVolatile32(&job.ports[i].control->failReason);
    if (batchFailWeight(r) > batchFailWeight(found)) found = r;
  }
  return found;
}

// Thread 0: the block tells its job's peers why it stops, then stops with `status`. In that
// order: the host acts on the status (an abort closes the connections), and peers must read
// the reason before they can see a close.
RINGCC_INLINE void batchStop(const BatchArgs& args, const DeviceJob& job, uint32_t block,
                             uint32_t status, uint32_t reason) {
  batchMarkFailed(job, reason);
  fenceSystem();
  batchSetStatus(args, block, status);
}

// The FailReason a block's stop tells its peers: the ranks' calls differ, or anything else.
RINGCC_INLINE uint32_t batchFailReason(RunError e) {
  return e == kRunErrMismatch || e == kRunErrSliceSize ? kFailMismatch : kFailStopped;
}

// Thread 0: binds the job to the block's runner. False (status written) if it cannot run.
RINGCC_INLINE bool batchBindJob(const BatchArgs& args, const DeviceJob& job, ChannelScratch* s,
                                uint32_t block) {
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
  a.sig = OpSig{0, job.sigRoot, job.sigColl, (uint8_t)job.type, job.sigOp, 0};
  a.ringRanks = job.ringRanks;
  a.nRingRanks = job.nRingRanks;
  a.llByLines = 1;  // reduceCopyBlock polls an LL slice's lines on every thread
  const RunError e = s->runner.init(a);
  if (e == kRunOk) return true;
  batchStop(args, job, block, kBlockRunError | (static_cast<uint32_t>(e) << 8), batchFailReason(e));
  return false;
}

// Thread 0's bookkeeping of one wait (for a slice to acquire, or for an LL slice's lines):
// after each fruitless poll, every kBatchCheckPolls polls the abort flag, the peers' failures
// and the clock (a wait in which nothing moved for args.timeoutNs, NCCL_TIMEOUT, as the host
// engine's waits: a peer that never makes its call, or a network path gone silent), then a nap.
struct BatchWait {
  uint64_t waitingSince = 0;  // read at the first check: a wait that ends soon reads no clock

  // True when the block must stop (its status and its peers' failReason written).
  template <class Block>
  RINGCC_INLINE bool fruitless(const BatchArgs& args, const DeviceJob& job, Block& blk,
                               unsigned polls) {
    if (polls % kBatchCheckPolls == kBatchCheckPolls - 1) {
      if (batchAbortRaised(args.abortFlag)) {
        batchStop(args, job, blk.index(), kBlockAborted, kFailStopped);
        return true;
      }
      if (const uint32_t reason = batchPeerFailed(job); reason != kFailNone) {
        // Passed on with the same reason, so that ranks waiting on this one stop too (a
        // ring's far side never sees the rank that failed or died).
        batchStop(args, job, blk.index(), kBlockPeerFailed | (reason << 8), reason);
        return true;
      }
      if (args.timeoutNs != 0) {
        const uint64_t now = blk.nanos();
        if (waitingSince == 0) {
          waitingSince = now;
        } else if (now - waitingSince > args.timeoutNs) {
          batchStop(args, job, blk.index(), kBlockTimeout, kFailStopped);
          return true;
        }
      }
    }
    blk.nap(polls);
    return false;
  }
};

// Thread 0: the next slice that can move, waiting (BatchWait) until one can.
template <class Block>
RINGCC_INLINE int batchAcquire(const BatchArgs& args, const DeviceJob& job, Block& blk,
                               ChannelScratch* s) {
  typename Block::Sync sync;
  BatchWait wait;
  for (unsigned polls = 0;; ++polls) {
    RunError error = kRunOk;
    const RunStatus st = s->runner.acquire(sync, blk.slice(), &error);
    if (st == kRunReady || st == kRunDone) return st;
    if (st == kRunError) {
      batchStop(args, job, blk.index(), kBlockRunError | (static_cast<uint32_t>(error) << 8),
                batchFailReason(error));
      return kBlockStop;
    }
    if (wait.fruitless(args, job, blk, polls)) return kBlockStop;
  }
}

// Thread 0's `value` for every thread of the block. The second barrier keeps thread 0 from
// writing the next value before every thread has read this one.
template <class Block>
RINGCC_INLINE int batchFromThread0(Block& blk, int value) {
  if (blk.thread() == 0) *blk.word() = value;
  blk.barrier();
  const int v = *blk.word();
  blk.barrier();
  return v;
}

template <class Block>
RINGCC_INLINE void runBatchBlock(const BatchArgs& args, Block& blk) {
  const uint32_t block = blk.index();
  ChannelScratch* s = args.scratch + block;
  const bool lead = blk.thread() == 0;
  for (uint32_t j = 0; j < args.nJobs; ++j) {
    const DeviceJob& job = args.jobs[j];
    if (job.channel != block) continue;
    // The job's buffers and counts next to the runner, which reads them through pointers.
    const uint32_t nWords = 2u * job.nBuffers + job.nCounts;
    for (uint32_t k = blk.thread(); k < nWords; k += blk.threads())
      s->words[k] = args.words[job.wordsAt + k];
    blk.barrier();
    int state =
        batchFromThread0(blk, lead && batchBindJob(args, job, s, block) ? kRunReady : kBlockStop);
    while (state == kRunReady) {
      state = batchFromThread0(blk, lead ? batchAcquire(args, job, blk, s) : 0);
      if (state != kRunReady) break;
      BatchWait wait;  // thread 0's, while an LL slice's lines are on their way
      RunError error = kRunOk;
      if (!s->runner.reduceCopyBlock(
              blk, *blk.slice(),
              [&](unsigned polls) { return wait.fruitless(args, job, blk, polls); }, &error)) {
        if (lead && error != kRunOk)
          batchStop(args, job, block, kBlockRunError | (static_cast<uint32_t>(error) << 8),
                    batchFailReason(error));
        return;  // every thread: the block agreed to stop
      }
      blk.barrier();  // every share done before the slice is handed on
      if (lead) {
        typename Block::Sync sync;
        s->runner.publish(sync, *blk.slice());
      }
    }
    if (state != kRunDone) return;
  }
}

}  // namespace ringcc
