#include "src/cuda/cuda_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <utility>

#include "kernels/cuda/batch_block.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/core/comm.h"
#include "src/cuda/context_scope.h"
#include "src/cuda/kernel_module.h"
#include "src/exec/engine_setup.h"
#include "transports/proxy/proxy.h"

namespace ringcc {
namespace {

// Host-mapped words: the abort flag, then (a cache line further) one status word per block,
// then the one-sided waits' status (kernels/rma_tasks.h).
constexpr uint32_t kStatusAt = 16;
constexpr uint32_t kRmaStatusAt = kStatusAt + kLaunchMaxBlocks;
constexpr size_t kMappedBytes = (kRmaStatusAt + kRmaStatusWords) * sizeof(uint32_t);
// The upload arena's first chunk, allocated at init: the tables of a few dozen batch shapes.
constexpr size_t kUploadArenaBytes = 256 << 10;

// Whether two ranks use one GPU: the same host and the same PCI bus id.
bool anyRanksShareGpu(const std::vector<PeerInfo>& peers) {
  std::set<std::pair<uint64_t, int64_t>> gpus;
  for (const PeerInfo& p : peers)
    if (p.busId >= 0 && !gpus.insert({p.hostHash, p.busId}).second) return true;
  return false;
}

}  // namespace

ncclResult_t CudaEngine::create(ncclComm* comm, std::unique_ptr<CommEngine>* out) {
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "a CUDA communicator"));
  CuContext ctx = nullptr;
  if (cu->cuCtxGetCurrent(&ctx) != kCuSuccess || ctx == nullptr)
    return fail(ncclInvalidUsage, "init",
                "a CUDA communicator is made on a thread with a current CUDA device "
                "(cudaSetDevice), and this thread has none");
  std::unique_ptr<CudaEngine> engine(new CudaEngine(comm, *cu, ctx));
  RINGCC_CHECK(engine->allocate());
  RINGCC_CHECK(checkSharedSettings(comm, engine->conns_, engine->planner_.context().tune));
  RINGCC_CHECK(connectFirstRing(comm, engine->conns_));
  *out = std::move(engine);
  return ncclSuccess;
}

CudaEngine::CudaEngine(ncclComm* comm, const CudaDriver& cu, CuContext ctx)
    : comm_(comm),
      cu_(cu),
      ctx_(ctx),
      timeoutMs_(std::max<int64_t>(1, paramInt("TIMEOUT"))),
      conns_(comm),
      planner_(ringcc::planContext(comm, conns_)),
      ranksShareGpu_(anyRanksShareGpu(comm->peers)),
      batchThread_(
          [this](std::span<const CollArgs> ops, cudaStream_t stream) {
            ContextScope scope(cu_, ctx_);
            return runBatch(ops, reinterpret_cast<CuStream>(stream));
          },
          [this](const std::function<void()>& body) {
            CommScope scope(comm_);
            body();
          }) {
  defersLaunch_ = true;  // a group's batches launch at finishBatch
}

CudaEngine::~CudaEngine() {
  abortOps_.store(true);  // a batch still making connections stops; queued kernels do not
  batchThread_.stop();
  ContextScope scope(cu_, ctx_);
  // Everything below is in use until this communicator's last kernel is done; its event
  // covers every earlier one (stream order, and the waits between streams).
  if (launched_) cu_.cuEventSynchronize(lastEvent_);
  peerWatch_.stop();  // (it ran until here: a kernel waiting on a dead peer must stop)
  conns_.closeAll(/*failed=*/comm_->abortFlag.load() || comm_->revoked.load());
  uploads_.reset();
  if (scratch_ != 0) cu_.cuMemFree(scratch_);
  if (mapped_ != nullptr) cu_.cuMemFreeHost(mapped_);
  if (lastEvent_ != nullptr) cu_.cuEventDestroy(lastEvent_);
  if (captureEvent_ != nullptr) cu_.cuEventDestroy(captureEvent_);
}

ncclResult_t CudaEngine::cudaFailed(CuResult r, const char* what) const {
  char name[96];
  return fail(ncclUnhandledCudaError, "cuda", "%s failed: %s", what,
              cuErrorName(cu_, r, name, sizeof name));
}

ncclResult_t CudaEngine::allocate() {
  ContextScope scope(cu_, ctx_);
  RINGCC_CHECK(kernelFunction(cu_, Kernel::Batch, &kernel_));
  RINGCC_CHECK(kernelFunction(cu_, Kernel::Adasum, &adasumKernel_));
  RINGCC_CHECK(kernelFunction(cu_, Kernel::Rma, &rmaKernel_));
  CuResult r = cu_.cuEventCreate(&lastEvent_, kCuEventDisableTiming);
  if (r == kCuSuccess) r = cu_.cuEventCreate(&captureEvent_, kCuEventDisableTiming);
  if (r != kCuSuccess) return cudaFailed(r, "cuEventCreate");
  // One runner per channel a launch may use. The host's ChannelScratch is at least as large as
  // the device's (the host runner also keeps its reduce-copy function pointer), so the blocks'
  // stride fits.
  r = cu_.cuMemAlloc(&scratch_, kLaunchMaxBlocks * sizeof(ChannelScratch));
  if (r != kCuSuccess) return cudaFailed(r, "cuMemAlloc of the channels' scratch");
  void* host = nullptr;
  r = cu_.cuMemHostAlloc(&host, kMappedBytes, kCuMemHostAllocDeviceMap | kCuMemHostAllocPortable);
  if (r != kCuSuccess) return cudaFailed(r, "cuMemHostAlloc of the abort flag");
  mapped_ = static_cast<uint32_t*>(host);
  std::memset(mapped_, 0, kMappedBytes);
  r = cu_.cuMemHostGetDevicePointer(&mappedDev_, host, 0);
  if (r != kCuSuccess) return cudaFailed(r, "cuMemHostGetDevicePointer");
  uploads_ = std::make_unique<DeviceUploads>(cu_);
  return uploads_->reserve(kUploadArenaBytes);
}

ncclResult_t CudaEngine::enqueue(const EngineBatch& batch, EngineHandle* handle) {
  deferLaunch_ = batch.deferLaunch;  // (read by the batch's thread after the hand-off)
  return batchThread_.enqueue(batch, handle);
}

ncclResult_t CudaEngine::finishBatch(bool launch, bool* dropped) {
  *dropped = prepared_ && !launch;
  if (!prepared_) return ncclSuccess;
  ContextScope scope(cu_, ctx_);
  // A dropped batch queues no kernel, but uploads it queued on its stream are in the arena
  // now: later batches find them, so they must stay ordered after them.
  if (!launch && uploads_->uploads() == uploadsBefore_) {
    prepared_ = false;
    return ncclSuccess;
  }
  return launchPrepared(launch);
}

ncclResult_t CudaEngine::wait(EngineHandle handle) { return batchThread_.wait(handle); }

void CudaEngine::abortOps() {
  abortOps_.store(true);
  // Every block that waits reads the flag between polls and stops.
  if (mapped_ != nullptr) __atomic_store_n(&mapped_[0], 1u, __ATOMIC_RELEASE);
}

CommEngine::Memory CudaEngine::memory() const {
  Memory m;
  m.releasable = conns_.mappedBytes() + (uploads_ ? uploads_->deviceBytes() : 0);
  m.persistent = kLaunchMaxBlocks * sizeof(ChannelScratch) + kMappedBytes;
  return m;
}

ncclResult_t CudaEngine::finishQueued() {
  if (!launched_) return pollAsyncError();
  ContextScope scope(cu_, ctx_);
  // The last ordinary batch's event covers every earlier one (stream order, and the waits
  // between streams).
  const CuResult r = cu_.cuEventSynchronize(lastEvent_);
  if (r != kCuSuccess) return cudaFailed(r, "cuEventSynchronize of the last batch");
  return pollAsyncError();  // a kernel that stopped: the suspend fails with its cause
}

ncclResult_t CudaEngine::releaseMemory() {
  if (lastCaptureId_ != 0)
    return fail(ncclInvalidUsage, "ncclCommSuspend",
                "this communicator's kernels were captured into a CUDA graph, which may be "
                "launched again and reads its connections and uploads: a CUDA communicator "
                "used in a graph cannot release its memory (flags 0 suspends without it)");
  ContextScope scope(cu_, ctx_);
  // finishQueued ran before the caller's barrier: no kernel of ours runs, and every peer's is
  // done with our memory too. The watch reads the connectors, so it stops before they go.
  peerWatch_.stop();
  watchedConns_ = 0;
  conns_.closeAll();
  // The plan and the views point into the connections just closed; the uploads hold copies
  // of those views. The next batch uploads anew into a fresh arena (which allocates while it
  // prepares, before its kernels are queued, as a full arena does).
  plan_.clear();
  planner_.forgetLast();
  views_.clear();
  connectors_.clear();
  uploads_ = std::make_unique<DeviceUploads>(cu_);
  return ncclSuccess;
}

ncclResult_t CudaEngine::allocAsync(size_t bytes, CuStream stream, CuDevicePtr* out) {
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuMemAllocAsync(out, bytes, stream);
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuMemAllocAsync of a workspace");
}

ncclResult_t CudaEngine::freeAsync(CuDevicePtr ptr, CuStream stream) {
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuMemFreeAsync(ptr, stream);
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuMemFreeAsync of a workspace");
}

ncclResult_t CudaEngine::launchAdasum(const AdasumArgs& args, CuStream stream) {
  uint64_t blocks = args.step == kAdasumCoefficients
                        ? (args.segments + kLaunchThreads - 1) / kLaunchThreads
                        : adasumItems(args);
  if (blocks == 0) return ncclSuccess;
  blocks = std::min<uint64_t>(blocks, kAdasumMaxBlocks);
  ContextScope scope(cu_, ctx_);
  void* params[] = {const_cast<AdasumArgs*>(&args)};
  const CuResult r = cu_.cuLaunchKernel(adasumKernel_, static_cast<unsigned>(blocks), 1, 1,
                                        kLaunchThreads, 1, 1, 0, stream, params, nullptr);
  if (r != kCuSuccess) return cudaFailed(r, "cuLaunchKernel(ringccAdasumKernel)");
  ++launches_;
  return ncclSuccess;
}

ncclResult_t CudaEngine::launchRma(RmaArgs& args, CuStream stream) {
  args.abortFlag = static_cast<uint64_t>(mappedDev_);
  args.status = static_cast<uint64_t>(mappedDev_) + kRmaStatusAt * sizeof(uint32_t);
  args.timeoutNs = static_cast<uint64_t>(timeoutMs_) * 1000000u;
  ContextScope scope(cu_, ctx_);
  void* params[] = {&args};
  const CuResult r =
      cu_.cuLaunchKernel(rmaKernel_, 1, 1, 1, kRmaThreads, 1, 1, 0, stream, params, nullptr);
  if (r != kCuSuccess) return cudaFailed(r, "cuLaunchKernel(ringccRmaKernel)");
  ++launches_;
  return ncclSuccess;
}

ncclResult_t CudaEngine::copyAsync(CuDevicePtr dst, CuDevicePtr src, size_t bytes,
                                   CuStream stream) {
  if (bytes == 0 || dst == src) return ncclSuccess;
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuMemcpyDtoDAsync(dst, src, bytes, stream);
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuMemcpyDtoDAsync");
}

ncclResult_t CudaEngine::zeroAsync(CuDevicePtr dst, size_t bytes, CuStream stream) {
  if (bytes == 0) return ncclSuccess;
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuMemsetD8Async(dst, 0, bytes, stream);
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuMemsetD8Async");
}

ncclResult_t CudaEngine::pollAsyncError() {
  {
    // Found before: raised again without a second WARN (users poll ncclCommGetAsyncError).
    std::lock_guard<std::mutex> lock(asyncMu_);
    if (asyncCause_.code != ncclSuccess) {
      adoptError(asyncCause_);
      return asyncCause_.code;
    }
  }
  const ncclResult_t found = readStatusWords();
  if (found != ncclSuccess) {
    std::lock_guard<std::mutex> lock(asyncMu_);
    if (asyncCause_.code == ncclSuccess) asyncCause_ = lastError();
  }
  return found;
}

ncclResult_t CudaEngine::readStatusWords() const {
  if (mapped_ == nullptr) return ncclSuccess;
  RINGCC_CHECK(readRmaStatus());
  for (uint32_t b = 0; b < kLaunchMaxBlocks; ++b) {
    const uint32_t st = __atomic_load_n(&mapped_[kStatusAt + b], __ATOMIC_ACQUIRE);
    if (st == kBlockOk) continue;
    if ((st & 0xff) == kBlockAborted)
      return fail(ncclInvalidUsage, "collective",
                  "a kernel of this communicator stopped on channel %u: the communicator was "
                  "aborted",
                  b);
    if ((st & 0xff) == kBlockTimeout)
      return fail(ncclRemoteError, "collective",
                  "a kernel of this communicator stopped on channel %u: nothing moved for %lld "
                  "ms (NCCL_TIMEOUT): a peer did not make the matching call, or stopped",
                  b, static_cast<long long>(timeoutMs_));
    if ((st & 0xff) == kBlockPeerFailed && (st >> 8) == kFailPeerDead) {
      if (const int dead = peerWatch_.deadRank(); dead >= 0)
        return fail(ncclRemoteError, "collective",
                    "a kernel of this communicator stopped on channel %u: rank %d's process died",
                    b, dead);
      return fail(ncclRemoteError, "collective",
                  "a kernel of this communicator stopped on channel %u: a peer's process died "
                  "(another rank saw it)",
                  b);
    }
    if ((st & 0xff) == kBlockPeerFailed) {
      const bool mismatch = (st >> 8) == kFailMismatch;
      return fail(mismatch ? ncclInvalidUsage : ncclRemoteError, "collective",
                  "a kernel of this communicator stopped on channel %u: %s", b,
                  mismatch ? "a peer found that the ranks' calls differ"
                           : "a peer's kernel stopped (an error there, or ncclCommAbort)");
    }
    const RunError e = static_cast<RunError>(st >> 8);
    const bool usersMistake = e == kRunErrMismatch || e == kRunErrSliceSize;
    return fail(usersMistake ? ncclInvalidUsage : ncclInternalError, "collective",
                "a kernel of this communicator stopped on channel %u: %s%s", b, runErrorText(e),
                usersMistake ? " (the ranks' calls differ)" : "");
  }
  return ncclSuccess;
}

ncclResult_t CudaEngine::readRmaStatus() const {
  const uint32_t* w = mapped_ + kRmaStatusAt;
  const uint32_t stop = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
  if (stop == kRmaStopNone) return ncclSuccess;
  const unsigned peer = w[1], sigIdx = w[2] & 0xffff, ctx = w[2] >> 16;
  if (stop == kRmaStopAborted)
    return fail(ncclInvalidUsage, "ncclWaitSignal",
                "a wait of this communicator for signal (sigIdx %u, ctx %u) from peer %u "
                "stopped: the communicator was aborted",
                sigIdx, ctx, peer);
  if (stop == kRmaStopPeerGone)
    return failPeer(ncclRemoteError, static_cast<int>(peer), "ncclWaitSignal",
                    "a wait of this communicator for signal (sigIdx %u, ctx %u) from peer %u "
                    "stopped: the peer is gone (its process exited, or its connection to this "
                    "rank closed; the counter was at %u of %u)",
                    sigIdx, ctx, peer, w[3], w[4]);
  return failPeer(ncclRemoteError, static_cast<int>(peer), "ncclWaitSignal",
                  "a wait of this communicator for signal (sigIdx %u, ctx %u) from peer %u "
                  "stopped: no signal came for %lld ms (NCCL_TIMEOUT; the counter was at %u of "
                  "%u): the peer did not signal, or stopped",
                  sigIdx, ctx, peer, static_cast<long long>(timeoutMs_), w[3], w[4]);
}

ncclResult_t CudaEngine::resolveJob(size_t index, const PlanJob& job, JobDeviceRefs* refs) {
  const bool capturing = captureId_ != 0;
  RINGCC_CHECK(uploads_->get(job.program, 1, stream_, capturing, &refs->program));
  const std::vector<ConnectorView>& views = views_[index];
  RINGCC_CHECK(uploads_->get(views.data(), views.size(), stream_, capturing, &refs->ports));
  if (job.ringRanks != nullptr)
    RINGCC_CHECK(
        uploads_->get(job.ringRanks, job.nRingRanks, stream_, capturing, &refs->ringRanks));
  return ncclSuccess;
}

ncclResult_t CudaEngine::prepareOnly(std::span<const CollArgs> ops, CuStream stream) {
  ContextScope scope(cu_, ctx_);
  prepared_ = false;
  const ncclResult_t r = prepareBatch(ops, stream);
  // Its uploads stay ordered for the batches that will find them (as a dropped batch's).
  const ncclResult_t ordered = prepared_ ? launchPrepared(/*kernels=*/false) : ncclSuccess;
  return r != ncclSuccess ? r : ordered;
}

ncclResult_t CudaEngine::runBatch(std::span<const CollArgs> ops, CuStream stream) {
  prepared_ = false;
  const ncclResult_t r = prepareBatch(ops, stream);
  if (r != ncclSuccess) {
    // Uploads it queued before failing are in the arena: ordered for later batches. (A
    // group's failed batch gets this at finishBatch.)
    if (prepared_ && !deferLaunch_) launchPrepared(/*kernels=*/false);
    return r;
  }
  if (!prepared_ || deferLaunch_) return ncclSuccess;
  return launchPrepared(/*kernels=*/true);
}

ncclResult_t CudaEngine::prepareBatch(std::span<const CollArgs> ops, CuStream stream) {
  RINGCC_CHECK(pollAsyncError());  // an earlier kernel's stop is this call's error
  if (abortOps_.load() || comm_->abortFlag.load())
    return fail(ncclInvalidUsage, "collective", "communicator was aborted");
  // Capture first: everything below must know whether it may allocate or wait.
  int status = kCuStreamCaptureStatusNone;
  uint64_t captureId = 0;
  CuResult r = cu_.cuStreamGetCaptureInfo(stream, &status, &captureId, nullptr, nullptr, nullptr);
  if (r != kCuSuccess) return cudaFailed(r, "cuStreamGetCaptureInfo");
  if (status == kCuStreamCaptureStatusInvalidated)
    return fail(ncclInvalidUsage, "collective",
                "the stream's CUDA graph capture was invalidated by an earlier error: end it "
                "(cudaStreamEndCapture) before calling on this stream");
  const bool capturing = status == kCuStreamCaptureStatusActive;
  RINGCC_CHECK(planner_.plan(ops, &plan_));
  if (plan_.nJobs == 0) return ncclSuccess;

  // The connections the jobs' ports name, made on first use like the host engine's; a new one
  // allocates and waits for its initialization, which a capture forbids.
  planPortKeys(plan_, &keys_);
  if (capturing) {
    for (const PortKey& key : keys_)
      if (conns_.find(key) == nullptr)
        return fail(ncclInvalidUsage, "collective",
                    "this call needs a connection to rank %d (channel %d) that the "
                    "communicator has not made yet, which cannot happen while the stream is "
                    "captured into a CUDA graph: run the same call once before capturing",
                    key.peer, key.channel);
  }
  RINGCC_CHECK(conns_.ensure(keys_, &abortOps_, timeoutMs_));
  if (views_.size() < plan_.nJobs) views_.resize(plan_.nJobs);
  bool proxyFed = false;
  for (size_t j = 0; j < plan_.nJobs; ++j) {
    RINGCC_CHECK(bindPorts(conns_, plan_.jobs[j], &views_[j], &connectors_));
    for (const Connector* c : connectors_) proxyFed |= c->fedByDevice();
  }
  if (conns_.size() != watchedConns_) {  // new connections: watch those to other processes
    watchedConns_ = conns_.size();
    std::vector<const Connector*> all;
    conns_.forEach([&](const Connector& c) { all.push_back(&c); });
    peerWatch_.watch(all);
  }
  if (capturing) RINGCC_CHECK(waitOrdinaryWork());

  stream_ = stream;
  captureId_ = capturing ? captureId : 0;
  proxyFed_ = proxyFed;
  uploadsBefore_ = uploads_->uploads();
  const std::span<const PlanJob> jobs(plan_.jobs.data(), plan_.nJobs);
  LaunchContext lc;
  lc.scratch = reinterpret_cast<ChannelScratch*>(scratch_);
  lc.nScratch = kLaunchMaxBlocks;
  lc.abortFlag = reinterpret_cast<const uint32_t*>(mappedDev_);
  lc.status = reinterpret_cast<uint32_t*>(mappedDev_) + kStatusAt;
  lc.timeoutNs = static_cast<uint64_t>(timeoutMs_) * 1000000u;
  const ncclResult_t packed = packLaunches(
      jobs, lc,
      [&](const PlanJob& job, JobDeviceRefs* refs) {
        return resolveJob(static_cast<size_t>(&job - jobs.data()), job, refs);
      },
      &args_);
  // Uploads already queued stay ordered (finishBatch of a dropped batch) even if packing failed.
  prepared_ = packed == ncclSuccess || uploads_->uploads() != uploadsBefore_;
  if (packed != ncclSuccess) args_.clear();
  return packed;
}

ncclResult_t CudaEngine::waitOrdinaryWork() {
  if (!launched_) return ncclSuccess;
  // Querying an event is an unsafe call in the default (global) capture mode and would
  // invalidate the capture: relaxed for the queries (as NCCL does), the mode restored after.
  int mode = kCuStreamCaptureModeRelaxed;
  CuResult r = cu_.cuThreadExchangeStreamCaptureMode(&mode);
  if (r != kCuSuccess) return cudaFailed(r, "cuThreadExchangeStreamCaptureMode");
  ncclResult_t result = ncclSuccess;
  for (unsigned polls = 1;; ++polls) {
    r = cu_.cuEventQuery(lastEvent_);
    if (r == kCuSuccess) break;
    if (r != kCuErrorNotReady) {
      result = cudaFailed(r, "cuEventQuery");
      break;
    }
    if (abortOps_.load() || comm_->abortFlag.load()) {
      result = fail(ncclInvalidUsage, "collective", "communicator was aborted");
      break;
    }
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cu_.cuThreadExchangeStreamCaptureMode(&mode);
  return result;
}

ncclResult_t CudaEngine::launchPrepared(bool kernels) {
  prepared_ = false;
  const CuStream stream = stream_;
  const bool captured = captureId_ != 0;
  // After this communicator's previous kernels, whichever stream they went to: by the event of
  // its own kind (a captured batch waited for the ordinary ones on the host, prepareBatch).
  CuResult r = kCuSuccess;
  if (!captured && launched_ && stream != lastStream_)
    r = cu_.cuStreamWaitEvent(stream, lastEvent_, 0);
  else if (captured && lastCaptureId_ == captureId_ && stream != lastCaptureStream_)
    r = cu_.cuStreamWaitEvent(stream, captureEvent_, 0);  // an edge inside the one graph
  if (r != kCuSuccess) return cudaFailed(r, "cuStreamWaitEvent");
  if (kernels) {
    for (BatchArgs& a : args_) {
      void* params[] = {&a};
      r = cu_.cuLaunchKernel(kernel_, a.nBlocks, 1, 1, kLaunchThreads, 1, 1, 0, stream, params,
                             nullptr);
      if (r != kCuSuccess) return cudaFailed(r, "cuLaunchKernel");
      ++launches_;
    }
  }
  r = cu_.cuEventRecord(captured ? captureEvent_ : lastEvent_, stream);
  if (r != kCuSuccess) return cudaFailed(r, "cuEventRecord");
  if (captured) {
    lastCaptureId_ = captureId_;
    lastCaptureStream_ = stream;
  } else {
    launched_ = true;
    lastStream_ = stream;
  }
  // The kernels cannot wake the proxy; this tells it to watch their connections closely now.
  if (kernels && proxyFed_) Proxy::get().wake();
  LOG_TRACE(kLogColl, "cuda: %zu jobs in %zu launches on stream %p%s", plan_.nJobs,
            kernels ? args_.size() : 0, static_cast<void*>(stream), captured ? " (captured)" : "");
  return ncclSuccess;
}

}  // namespace ringcc
