#include "src/rma/rma_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/rma_tasks.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/cuda/context_scope.h"
#include "src/cuda/cuda_engine.h"
#include "src/cuda/peer_watch.h"

namespace ringcc {
namespace {

uint64_t deviceAddress(const HostMapping& m, const char* hostBase, const uint64_t* host) {
  return reinterpret_cast<uintptr_t>(m.device()) +
         static_cast<uint64_t>(reinterpret_cast<const char*>(host) - hostBase);
}

}  // namespace

ncclResult_t RmaDevice::create(Communicator* comm, int nranks, std::unique_ptr<RmaDevice>* out) {
  auto* engine = dynamic_cast<CudaEngine*>(comm->engine.get());
  if (engine == nullptr)
    return fail(ncclInternalError, "ncclCommWindowRegister",
                "a CUDA communicator without a CUDA engine");
  out->reset(new RmaDevice(engine, nranks));
  return ncclSuccess;
}

RmaDevice::RmaDevice(CudaEngine* engine, int nranks)
    : engine_(engine),
      cu_(engine->driver()),
      ctx_(engine->context()),
      peers_(nranks),
      timeoutMs_(std::max<int64_t>(1, paramInt("TIMEOUT"))) {}

RmaDevice::~RmaDevice() {
  drain();  // (a wait for a dead peer ends because the watch still runs)
  stopWatch();
  ContextScope scope(cu_, ctx_);
  if (peerGone_ != nullptr) cu_.cuMemFreeHost(peerGone_);
  for (auto& [stream, event] : events_) cu_.cuEventDestroy(event);
  if (copyEvent_ != nullptr) cu_.cuEventDestroy(copyEvent_);
  if (copyStream_ != nullptr) cu_.cuStreamDestroy(copyStream_);
  if (staging_ != nullptr) cu_.cuMemFreeHost(staging_);
}

ncclResult_t RmaDevice::watchPeers(int self, std::function<std::string(int peer)> gone) {
  ContextScope scope(cu_, ctx_);
  void* host = nullptr;
  const size_t bytes = peers_.size() * sizeof(uint32_t);
  CuResult r = cu_.cuMemHostAlloc(&host, bytes, kCuMemHostAllocDeviceMap | kCuMemHostAllocPortable);
  if (r != kCuSuccess) return cudaFailed(r, "cuMemHostAlloc of the peers' flags");
  peerGone_ = static_cast<uint32_t*>(host);
  std::memset(peerGone_, 0, bytes);
  r = cu_.cuMemHostGetDevicePointer(&peerGoneDev_, host, 0);
  if (r != kCuSuccess) return cudaFailed(r, "cuMemHostGetDevicePointer of the peers' flags");
  watch_ = std::thread([this, self, gone = std::move(gone)] { watch(self, gone); });
  return ncclSuccess;
}

void RmaDevice::watch(int self, const std::function<std::string(int peer)>& gone) {
  std::unique_lock<std::mutex> lock(watchMu_);
  while (!watchCv_.wait_for(lock, kPeerWatchPeriod, [this] { return stopWatch_; })) {
    for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
      if (p == self || __atomic_load_n(&peerGone_[p], __ATOMIC_RELAXED) != 0) continue;
      const std::string why = gone(p);
      if (why.empty()) continue;
      LOG_INFO(kLogInit, "rma: peer %d is gone (%s): its waits stop", p, why.c_str());
      __atomic_store_n(&peerGone_[p], 1u, __ATOMIC_RELEASE);
    }
  }
}

void RmaDevice::stopWatch() {
  if (!watch_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(watchMu_);
    stopWatch_ = true;
  }
  watchCv_.notify_all();
  watch_.join();
}

ncclResult_t RmaDevice::setupStaging() {
  ContextScope scope(cu_, ctx_);
  CuResult r = cu_.cuMemHostAlloc(&staging_, kStagingSlots * kStagingSlotBytes,
                                  kCuMemHostAllocDeviceMap | kCuMemHostAllocPortable);
  if (r != kCuSuccess) return cudaFailed(r, "cuMemHostAlloc of the one-sided staging slots");
  for (int i = 0; i < kStagingSlots; ++i) {
    slots_[i].host = static_cast<char*>(staging_) + i * kStagingSlotBytes;
    r = cu_.cuMemHostGetDevicePointer(&slots_[i].device, slots_[i].host, 0);
    if (r != kCuSuccess) return cudaFailed(r, "cuMemHostGetDevicePointer of a staging slot");
  }
  r = cu_.cuStreamCreate(&copyStream_, kCuStreamNonBlocking);
  if (r == kCuSuccess) r = cu_.cuEventCreate(&copyEvent_, kCuEventDisableTiming);
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuStreamCreate for one-sided messages");
}

ncclResult_t RmaDevice::acquireSlot(Slot** out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  for (int polls = 0;; ++polls) {
    for (Slot& s : slots_) {
      bool expected = false;
      if (s.busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        *out = &s;
        return ncclSuccess;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return fail(ncclRemoteError, "ncclPutSignal",
                  "no staging slot freed for %lld ms (NCCL_TIMEOUT): the streams of this "
                  "communicator's earlier puts by message did not move",
                  static_cast<long long>(timeoutMs_));
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 10 : 500));
  }
}

ncclResult_t RmaDevice::stage(Slot* slot, const void* src, size_t bytes, cudaStream_t stream) {
  return engine_->copyAsync(slot->device, reinterpret_cast<uintptr_t>(src), bytes,
                            reinterpret_cast<CuStream>(stream));
}

ncclResult_t RmaDevice::hostCall(cudaStream_t stream, void (*fn)(void*), void* arg) {
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuLaunchHostFunc(reinterpret_cast<CuStream>(stream), fn, arg);
  if (r != kCuSuccess) return cudaFailed(r, "cuLaunchHostFunc of a one-sided send");
  return launched(stream);
}

bool RmaDevice::copyIn(void* dst, const void* src, size_t bytes) {
  ContextScope scope(cu_, ctx_);
  CuResult r = cu_.cuMemcpyHtoDAsync(reinterpret_cast<uintptr_t>(dst), src, bytes, copyStream_);
  if (r == kCuSuccess) r = cu_.cuEventRecord(copyEvent_, copyStream_);
  if (r == kCuSuccess) r = cu_.cuEventSynchronize(copyEvent_);
  if (r == kCuSuccess) return true;
  char name[96];
  LOG_WARN("rma: a put's %zu bytes could not be copied into this rank's window: %s", bytes,
           cuErrorName(cu_, r, name, sizeof name));
  return false;
}

ncclResult_t RmaDevice::cudaFailed(CuResult r, const char* what) const {
  char name[96];
  return fail(ncclUnhandledCudaError, "rma", "%s failed: %s", what,
              cuErrorName(cu_, r, name, sizeof name));
}

ncclResult_t RmaDevice::mapOwn(const SignalView& view, size_t bytes) {
  ContextScope scope(cu_, ctx_);
  RINGCC_CHECK(HostMapping::map(view.base(), bytes, -1, 0, "rma: our signal counters", &own_));
  ownBase_ = view.base();
  return ncclSuccess;
}

ncclResult_t RmaDevice::mapPeer(int peer, const SignalView& view, size_t bytes) {
  ContextScope scope(cu_, ctx_);
  PeerCounters& p = peers_[peer];
  RINGCC_CHECK(
      HostMapping::map(view.base(), bytes, peer, 0, "rma: a peer's signal counters", &p.mapping));
  p.base = view.base();
  return ncclSuccess;
}

ncclResult_t RmaDevice::exportWindow(const void* buff, RmaDeviceExport* out) const {
  ContextScope scope(cu_, ctx_);
  CuDevicePtr base = 0;
  size_t bytes = 0;
  const auto ptr = static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(buff));
  const char* step = "cuMemGetAddressRange";
  CuResult r = cu_.cuMemGetAddressRange(&base, &bytes, ptr);
  if (r == kCuSuccess) {
    step = "cuIpcGetMemHandle of its allocation";
    r = cu_.cuIpcGetMemHandle(&out->handle, base);
  }
  char name[96];
  if (r != kCuSuccess)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister",
                "buff %p cannot be shared with the other processes of this communicator (%s: "
                "%s): windows reached from other processes are GPU memory from cudaMalloc or "
                "ncclMemAlloc",
                buff, step, cuErrorName(cu_, r, name, sizeof name));
  out->offset = ptr - base;
  return ncclSuccess;
}

ncclResult_t RmaDevice::openWindow(int peer, const RmaDeviceExport& e, CuDevicePtr* base) const {
  ContextScope scope(cu_, ctx_);
  const CuResult r = cu_.cuIpcOpenMemHandle(base, e.handle, kCuIpcMemLazyEnablePeerAccess);
  if (r != kCuSuccess) {
    char name[96];
    return failPeer(ncclUnhandledCudaError, peer, "ncclCommWindowRegister",
                    "cannot open peer %d's window buffer here (cuIpcOpenMemHandle: %s)", peer,
                    cuErrorName(cu_, r, name, sizeof name));
  }
  return ncclSuccess;
}

void RmaDevice::closeWindow(CuDevicePtr base) const {
  ContextScope scope(cu_, ctx_);
  cu_.cuIpcCloseMemHandle(base);
}

ncclResult_t RmaDevice::notCapturing(cudaStream_t stream, const char* where) const {
  ContextScope scope(cu_, ctx_);
  int status = kCuStreamCaptureStatusNone;
  const CuResult r = cu_.cuStreamIsCapturing(reinterpret_cast<CuStream>(stream), &status);
  if (r != kCuSuccess) return cudaFailed(r, "cuStreamIsCapturing");
  if (status == kCuStreamCaptureStatusNone) return ncclSuccess;
  // A wait's target is counted at the call: a graph replayed would wait for the same count
  // again, which its signals passed long ago.
  return fail(ncclInvalidUsage, where,
              "%s on a stream being captured into a CUDA graph: ringcc's one-sided calls on CUDA "
              "communicators cannot be captured yet",
              where);
}

ncclResult_t RmaDevice::launched(cudaStream_t stream) {
  CuEvent& event = events_[stream];
  CuResult r = kCuSuccess;
  if (event == nullptr) r = cu_.cuEventCreate(&event, kCuEventDisableTiming);
  if (r == kCuSuccess) r = cu_.cuEventRecord(event, reinterpret_cast<CuStream>(stream));
  return r == kCuSuccess ? ncclSuccess : cudaFailed(r, "cuEventRecord after a one-sided call");
}

ncclResult_t RmaDevice::put(uint64_t dst, const void* src, size_t bytes, int peer,
                            const uint64_t* counter, cudaStream_t stream) {
  RINGCC_CHECK(notCapturing(stream, dst != 0 ? "ncclPutSignal" : "ncclSignal"));
  const PeerCounters& p = peers_[peer];
  auto s = reinterpret_cast<CuStream>(stream);
  if (bytes > 0) RINGCC_CHECK(engine_->copyAsync(dst, reinterpret_cast<uintptr_t>(src), bytes, s));
  RmaArgs args;
  args.kind = kRmaSignal;
  args.nItems = 1;
  args.items[0].counter = deviceAddress(p.mapping, p.base, counter);
  args.items[0].peer = static_cast<uint32_t>(peer);
  RINGCC_CHECK(engine_->launchRma(args, s));
  ContextScope scope(cu_, ctx_);
  return launched(stream);
}

ncclResult_t RmaDevice::wait(std::span<const Want> wants, cudaStream_t stream) {
  RINGCC_CHECK(notCapturing(stream, "ncclWaitSignal"));
  auto s = reinterpret_cast<CuStream>(stream);
  for (size_t first = 0; first < wants.size(); first += kRmaMaxItems) {
    RmaArgs args;
    args.kind = kRmaWait;
    args.peerGone = static_cast<uint64_t>(peerGoneDev_);
    args.nItems = static_cast<uint32_t>(std::min<size_t>(kRmaMaxItems, wants.size() - first));
    for (uint32_t i = 0; i < args.nItems; ++i) {
      const Want& w = wants[first + i];
      RmaItem& item = args.items[i];
      item.counter = deviceAddress(own_, ownBase_, w.counter);
      item.target = w.target;
      item.peer = static_cast<uint32_t>(w.peer);
      item.sigIdx = static_cast<uint16_t>(w.sigIdx);
      item.ctx = static_cast<uint16_t>(w.ctx);
    }
    RINGCC_CHECK(engine_->launchRma(args, s));
  }
  ContextScope scope(cu_, ctx_);
  return launched(stream);
}

ncclResult_t RmaDevice::drain() {
  ContextScope scope(cu_, ctx_);
  for (auto& [stream, event] : events_) {
    const CuResult r = cu_.cuEventSynchronize(event);
    if (r != kCuSuccess) return cudaFailed(r, "cuEventSynchronize of a one-sided call");
  }
  return ncclSuccess;
}

ncclResult_t RmaDevice::asyncError() const { return engine_->pollAsyncError(); }

}  // namespace ringcc
