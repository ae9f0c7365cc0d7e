#include "src/cuda/cuda_engine.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/batch_block.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/core/comm.h"
#include "src/cuda/kernel_module.h"
#include "src/exec/engine_setup.h"
#include "transports/proxy/proxy.h"

namespace ringcc {
namespace {

// Host-mapped words: the abort flag, then (a cache line further) one status word per block.
constexpr uint32_t kStatusAt = 16;
constexpr size_t kMappedBytes = (kStatusAt + kLaunchMaxBlocks) * sizeof(uint32_t);

// Makes `ctx` current on the calling thread for the scope's life, then restores the previous
// one: the user's thread keeps the device it had.
class ContextScope {
 public:
  ContextScope(const CudaDriver& cu, CuContext ctx) : cu_(cu), ctx_(ctx) {
    if (cu_.cuCtxGetCurrent(&previous_) != kCuSuccess) previous_ = nullptr;
    if (previous_ != ctx_) cu_.cuCtxSetCurrent(ctx_);
  }
  ~ContextScope() {
    if (previous_ != ctx_) cu_.cuCtxSetCurrent(previous_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const CudaDriver& cu_;
  CuContext ctx_;
  CuContext previous_ = nullptr;
};

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
      batchThread_(
          [this](std::span<const CollArgs> ops, cudaStream_t stream) {
            ContextScope scope(cu_, ctx_);
            return launchBatch(ops, reinterpret_cast<CuStream>(stream));
          },
          [this](const std::function<void()>& body) {
            CommScope scope(comm_);
            body();
          }) {}

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
  if (copyStream_ != nullptr) cu_.cuStreamDestroy(copyStream_);
}

ncclResult_t CudaEngine::cudaFailed(CuResult r, const char* what) const {
  char name[96];
  return fail(ncclUnhandledCudaError, "cuda", "%s failed: %s", what,
              cuErrorName(cu_, r, name, sizeof name));
}

ncclResult_t CudaEngine::allocate() {
  ContextScope scope(cu_, ctx_);
  RINGCC_CHECK(batchKernelFunction(cu_, &kernel_));
  CuResult r = cu_.cuStreamCreate(&copyStream_, kCuStreamNonBlocking);
  if (r != kCuSuccess) return cudaFailed(r, "cuStreamCreate");
  r = cu_.cuEventCreate(&lastEvent_, kCuEventDisableTiming);
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
  uploads_ = std::make_unique<DeviceUploads>(cu_, copyStream_);
  return ncclSuccess;
}

ncclResult_t CudaEngine::enqueue(const EngineBatch& batch, EngineHandle* handle) {
  return batchThread_.enqueue(batch, handle);
}

ncclResult_t CudaEngine::wait(EngineHandle handle) { return batchThread_.wait(handle); }

void CudaEngine::abortOps() {
  abortOps_.store(true);
  // Every block that waits reads the flag between polls and stops.
  if (mapped_ != nullptr) __atomic_store_n(&mapped_[0], 1u, __ATOMIC_RELEASE);
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

ncclResult_t CudaEngine::resolveJob(size_t index, const PlanJob& job, CuStream stream,
                                    JobDeviceRefs* refs) {
  RINGCC_CHECK(uploads_->get(job.program, 1, stream, &refs->program));
  const std::vector<ConnectorView>& views = views_[index];
  RINGCC_CHECK(uploads_->get(views.data(), views.size(), stream, &refs->ports));
  if (job.ringRanks != nullptr)
    RINGCC_CHECK(uploads_->get(job.ringRanks, job.nRingRanks, stream, &refs->ringRanks));
  return ncclSuccess;
}

ncclResult_t CudaEngine::launchBatch(std::span<const CollArgs> ops, CuStream stream) {
  RINGCC_CHECK(pollAsyncError());  // an earlier kernel's stop is this call's error
  if (abortOps_.load() || comm_->abortFlag.load())
    return fail(ncclInvalidUsage, "collective", "communicator was aborted");
  RINGCC_CHECK(planner_.plan(ops, &plan_));
  if (plan_.nJobs == 0) return ncclSuccess;

  // The connections the jobs' ports name, made on first use like the host engine's.
  planPortKeys(plan_, &keys_);
  RINGCC_CHECK(conns_.ensure(keys_, &abortOps_, timeoutMs_));
  if (views_.size() < plan_.nJobs) views_.resize(plan_.nJobs);
  bool proxyFed = false;  // a connection the proxy must watch for our kernels (ucx)
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

  const std::span<const PlanJob> jobs(plan_.jobs.data(), plan_.nJobs);
  LaunchContext lc;
  lc.scratch = reinterpret_cast<ChannelScratch*>(scratch_);
  lc.nScratch = kLaunchMaxBlocks;
  lc.abortFlag = reinterpret_cast<const uint32_t*>(mappedDev_);
  lc.status = reinterpret_cast<uint32_t*>(mappedDev_) + kStatusAt;
  lc.timeoutNs = static_cast<uint64_t>(timeoutMs_) * 1000000u;
  RINGCC_CHECK(packLaunches(
      jobs, lc,
      [&](const PlanJob& job, JobDeviceRefs* refs) {
        return resolveJob(static_cast<size_t>(&job - jobs.data()), job, stream, refs);
      },
      &args_));

  // After this communicator's previous kernels, whichever stream they went to.
  CuResult r = kCuSuccess;
  if (launched_ && stream != lastStream_) {
    r = cu_.cuStreamWaitEvent(stream, lastEvent_, 0);
    if (r != kCuSuccess) return cudaFailed(r, "cuStreamWaitEvent");
  }
  for (BatchArgs& a : args_) {
    void* params[] = {&a};
    r = cu_.cuLaunchKernel(kernel_, a.nBlocks, 1, 1, kLaunchThreads, 1, 1, 0, stream, params,
                           nullptr);
    if (r != kCuSuccess) return cudaFailed(r, "cuLaunchKernel");
    ++launches_;
  }
  r = cu_.cuEventRecord(lastEvent_, stream);
  if (r != kCuSuccess) return cudaFailed(r, "cuEventRecord");
  // The kernels cannot wake the proxy; this tells it to watch their connections closely now.
  if (proxyFed) Proxy::get().wake();
  launched_ = true;
  lastStream_ = stream;
  LOG_TRACE(kLogColl, "cuda: %zu jobs in %zu launches on stream %p", plan_.nJobs, args_.size(),
            static_cast<void*>(stream));
  return ncclSuccess;
}

}  // namespace ringcc
