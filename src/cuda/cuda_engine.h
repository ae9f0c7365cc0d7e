// The CUDA engine: runs a communicator's operations as kernel launches on the user's stream.
//
// Per batch (a lone call, or one communicator's part of a group):
//   1. the planner (src/plan/planner.h) makes the same jobs as for the host engine;
//   2. the connections their ports name are made (ConnectionTable; p2p FIFOs in GPU memory for
//      ranks of one process, transports/p2p/fifo_memory.h);
//   3. what outlives the call (Programs, connection views, ring orders) is found on the device
//      or uploaded once (DeviceUploads), and the jobs are packed into kernel arguments
//      (packLaunches, src/cuda/launch_plan.h);
//   4. one ringccBatchKernel launch per argument block goes onto the batch's stream.
// The call returns once the kernels are queued, as NCCL's do: the stream orders them with the
// user's work, wait() does not wait for the GPU.
//
// A lone call runs these steps on the calling thread. A group over several communicators runs
// them in two phases (EngineBatch::deferLaunch): steps 1-3 for every communicator, each batch
// but the last on the engine's own thread (making connections waits for the peers, which the
// same calling thread is about to serve), and once all have prepared, step 4 for all
// (finishBatch). Preparing may allocate and wait for copies, which the driver may hold until no
// kernel runs on the device; a rank's kernel queued before its peers' preparation ended would
// wait for those peers' kernels, and they for it. A group in which one batch fails to prepare
// queues no kernel at all.
//
// Ordering: a communicator's kernels share its per-channel scratch and FIFOs, so they must run
// one after another even when the user gives different streams: after each batch the engine
// records an event, and a batch on another stream first waits for it (cuStreamWaitEvent).
// A stream being captured into a CUDA graph (cuStreamGetCaptureInfo, asked first in each batch)
// may neither wait on an event recorded outside its capture (CUDA_ERROR_STREAM_CAPTURE_
// ISOLATION, which invalidates the capture) nor record the event that ordinary calls wait on
// (they would fail with CUDA_ERROR_CAPTURED_EVENT, every later one too). So ordinary batches
// use one event, captured batches another (ordering batches of one capture across its
// streams), and a captured batch first waits on the host until the ordinary work is done
// (cuEventQuery). A captured batch that would need a new connection or upload is refused
// before anything is made: both allocate, which a capture forbids.
//
// Errors on the GPU: a block that stops (abort, a runner error such as mismatched calls) writes
// why into a status word in host-mapped memory. The next call, and ncclCommGetAsyncError,
// read the status words (pollAsyncError) and turn a stop into the communicator's error.
// ncclCommAbort raises the abort flag (host-mapped) that every waiting block reads, so a kernel
// blocked on a peer that never comes is freed; a one-sided wait (launchRma) reads it too. A peer
// process that dies is seen by a watch thread (src/cuda/peer_watch.h) that marks its connections,
// which the waiting blocks read. Destroying the engine waits for its last kernel to finish (the
// event), then frees connections, uploads and scratch.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "kernels/adasum_tasks.h"
#include "kernels/cuda/batch_args.h"
#include "kernels/rma_tasks.h"
#include "src/base/cuda_driver.h"
#include "src/base/error.h"
#include "src/core/engine.h"
#include "src/cuda/device_uploads.h"
#include "src/cuda/launch_plan.h"
#include "src/cuda/peer_watch.h"
#include "src/exec/batch_thread.h"
#include "src/exec/connections.h"
#include "src/plan/planner.h"

namespace ringcc {

class CudaEngine final : public CommEngine {
 public:
  // Builds the engine for `comm` (CUDA memory) in the calling thread's current context, then
  // checks settings and connects channel 0's ring like the host engine. Collective.
  static ncclResult_t create(ncclComm* comm, std::unique_ptr<CommEngine>* out);
  ~CudaEngine() override;

  ncclResult_t enqueue(const EngineBatch& batch, EngineHandle* handle) override;
  ncclResult_t wait(EngineHandle handle) override;
  ncclResult_t finishBatch(bool launch, bool* dropped) override;
  void abortOps() override;
  ncclResult_t pollAsyncError() override;
  const PlanContext& planContext() const override { return planner_.context(); }
  // Releasable: the FIFO memory its connections map (p2p FIFOs in GPU memory, shm and network
  // FIFOs in host memory mapped for the GPU) and the upload arena's device chunks. Persistent:
  // the channels' scratch and the host-mapped flag and status words.
  Memory memory() const override;
  ncclResult_t finishQueued() override;
  // Closes the connections and frees the upload arena once this rank's kernels are done. A
  // communicator whose kernels were captured into a CUDA graph is refused: the graph may be
  // launched again and reads those connections and uploads.
  ncclResult_t releaseMemory() override;

  size_t launches() const { return launches_; }  // kernels queued so far (tests)

  // Services for composite operations above the engine (Adasum: src/adasum), queued on the
  // user's stream in this engine's context. Their work lies between the operation's first and
  // last batch, so the ordering of batches across streams (above) orders it too.
  //
  // A workspace for one operation, stream-ordered (cuMemAllocAsync from the device's current
  // pool): usable by work queued on `stream` after this call, freed by freeAsync queued after
  // the last work that uses it. Neither waits for running kernels, as cuMemAlloc may (a kernel
  // of an earlier call waiting for a peer whose thread would wait in cuMemAlloc behind it).
  ncclResult_t allocAsync(size_t bytes, CuStream stream, CuDevicePtr* out);
  ncclResult_t freeAsync(CuDevicePtr ptr, CuStream stream);
  // One launch of the module's Adasum kernel (kernels/adasum_tasks.h), its grid sized by the
  // work; nothing is queued for a step without work.
  ncclResult_t launchAdasum(const AdasumArgs& args, CuStream stream);
  ncclResult_t copyAsync(CuDevicePtr dst, CuDevicePtr src, size_t bytes, CuStream stream);
  ncclResult_t zeroAsync(CuDevicePtr dst, size_t bytes, CuStream stream);
  // Steps 1-3 of a batch without its kernels: its connections made and its tables uploaded
  // (ordered on `stream`, as a dropped batch's), so that the same batch later allocates
  // nothing. An operation of several batches prepares them all before its first kernel when
  // ranksShareGpu: a connection made later would allocate while the operation's earlier
  // kernels may wait for a peer on the same GPU, and an allocation may wait for those.
  ncclResult_t prepareOnly(std::span<const CollArgs> ops, CuStream stream);
  // Whether two ranks of the communicator use one GPU (same host, same PCI bus id).
  bool ranksShareGpu() const { return ranksShareGpu_; }
  // One launch of the module's one-sided kernel (kernels/rma_tasks.h): its abort flag, status
  // words and clock are set here (this engine's, NCCL_TIMEOUT). A wait that stops is found by
  // pollAsyncError like a stopped block of a collective.
  ncclResult_t launchRma(RmaArgs& args, CuStream stream);
  // The driver and the context the engine's work runs in (ContextScope: src/cuda/context_scope.h).
  const CudaDriver& driver() const { return cu_; }
  CuContext context() const { return ctx_; }

 private:
  CudaEngine(ncclComm* comm, const CudaDriver& cu, CuContext ctx);
  // Device scratch, the host-mapped flag and status words, the kernel, the ordering events and
  // the upload arena's first chunk.
  ncclResult_t allocate();
  // Steps 1-3 for one batch, on whichever thread runs it (its context made current); then
  // step 4 unless the batch's launch is deferred (a group: finishBatch).
  ncclResult_t runBatch(std::span<const CollArgs> ops, CuStream stream);
  ncclResult_t prepareBatch(std::span<const CollArgs> ops, CuStream stream);
  // Step 4 for the prepared batch: its kernels, ordered after this communicator's earlier ones
  // (`kernels` false: only the ordering, for uploads queued by a batch that was dropped).
  ncclResult_t launchPrepared(bool kernels);
  // A captured batch must not depend on an event from outside its capture: waits on the host
  // until the last ordinary batch is done.
  ncclResult_t waitOrdinaryWork();
  ncclResult_t resolveJob(size_t index, const PlanJob& job, JobDeviceRefs* refs);
  ncclResult_t cudaFailed(CuResult r, const char* what) const;
  // The first stop a block's status word tells, raised (ncclSuccess if none).
  ncclResult_t readStatusWords() const;
  ncclResult_t readRmaStatus() const;  // ... the one-sided waits' status words

  ncclComm* comm_;
  const CudaDriver& cu_;
  CuContext ctx_;
  const int64_t timeoutMs_;  // NCCL_TIMEOUT for making connections and kernels' waits, at init
  ConnectionTable conns_;
  Planner planner_;
  const bool ranksShareGpu_;
  Plan plan_;
  std::vector<std::vector<ConnectorView>> views_;  // per job of plan_: its ports' views
  // Scratch of prepareBatch, kept so that a repeated call allocates nothing.
  std::vector<PortKey> keys_;
  std::vector<const Connector*> connectors_;
  std::unique_ptr<DeviceUploads> uploads_;
  std::vector<BatchArgs> args_;  // the current batch's launches

  // The prepared batch (between prepareBatch and launchPrepared).
  bool deferLaunch_ = false;  // the batch being run is a group's: launch at finishBatch
  bool prepared_ = false;
  CuStream stream_ = nullptr;
  uint64_t captureId_ = 0;  // its stream's capture sequence, 0 if it is not capturing
  bool proxyFed_ = false;   // a connection the proxy must watch for our kernels (ucx)
  size_t uploadsBefore_ = 0;

  CuFunction kernel_ = nullptr;
  CuFunction adasumKernel_ = nullptr;
  CuFunction rmaKernel_ = nullptr;
  CuEvent lastEvent_ = nullptr;  // recorded after each ordinary batch (never in a capture)
  CuStream lastStream_ = nullptr;
  bool launched_ = false;           // lastEvent_ was recorded at least once
  CuEvent captureEvent_ = nullptr;  // recorded after each captured batch, inside its capture
  CuStream lastCaptureStream_ = nullptr;
  uint64_t lastCaptureId_ = 0;  // the capture captureEvent_ was last recorded in
  CuDevicePtr scratch_ = 0;     // kLaunchMaxBlocks ChannelScratch
  uint32_t* mapped_ = nullptr;  // host-mapped: [0] abort flag, [kStatusAt...] status words
  CuDevicePtr mappedDev_ = 0;   // ... as the device sees it
  size_t launches_ = 0;
  std::atomic<bool> abortOps_{false};  // ends a batch that waits for its connections
  std::mutex asyncMu_;
  ErrorCause asyncCause_;    // the first stop found in the status words, kept
  PeerWatch peerWatch_;      // peers in other processes that die while kernels wait on them
  size_t watchedConns_ = 0;  // conns_.size() when peerWatch_ was last told

  BatchThread batchThread_;  // last: its thread runs batches on everything above
};

}  // namespace ringcc
