// The CUDA side of one communicator's one-sided operations (src/rma/rma_comm.h): what a CUDA
// communicator needs beyond the host path's bookkeeping (windows, paths, consumed counts).
//
//   counters  every rank's signal counters stay the host memory of src/rma/signal_region.h;
//             ours and each reachable peer's mapping of theirs are registered with the driver
//             (transports/host_mapped.h), so kernels add to a peer's counter and poll ours.
//   windows   a window is GPU memory. A peer in this process writes it at its own address
//             (unified addressing); one in another process of this host opens it by its
//             allocation's IPC handle plus the window's offset there (cuMemGetAddressRange,
//             cuIpcGetMemHandle / cuIpcOpenMemHandle).
//   a put     a copy on the user's stream (cuMemcpyDtoDAsync), then the signal kernel
//             (kernels/rma_tasks.h) on the same stream: stream order puts the data first.
//   a wait    the wait kernel on the user's stream: the stream's later work runs once the
//             signals came; the call returns at once, as NCCL's does.
//
// Peers reached only by message (another host, or every peer under NCCL_NET=ucx: the host
// path's bootstrap messages, src/rma/rma_comm.h) take the same messages, in stream order: the
// put's bytes are copied on the stream into a pinned host slot (kStagingSlots of
// kStagingSlotBytes, made at setup), then a host function (cuLaunchHostFunc) sends the slot's
// bytes and frees it; a signal is a host function alone. The receiving rank's listener copies
// a message's bytes into its GPU window (copyIn: its own stream, done before the count is
// added) and adds to its counter, which its wait kernel polls.
//
// Peers that go: a watch thread asks the caller's `gone` every kPeerWatchPeriod (a peer's
// process exited, its bootstrap connection closed) and raises that peer's flag in host-mapped
// memory, which the wait kernel reads between polls, so a wait for a dead peer ends at once
// rather than at NCCL_TIMEOUT.
//
// Every launch records an event per stream, so that drain() (before a window is deregistered
// or the communicator destroyed) waits for the launches that may still touch a window, a
// counter or a slot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/base/cuda_driver.h"
#include "src/core/comm.h"
#include "src/rma/signal_region.h"
#include "transports/host_mapped.h"

namespace ringcc {

class CudaEngine;

// How a window's buffer is named to a process that is not ours.
struct RmaDeviceExport {
  CuIpcMemHandle handle{};  // its allocation's
  uint64_t offset = 0;      // the buffer's offset in that allocation
};

class RmaDevice {
 public:
  // ncclInternalError if the communicator has no CUDA engine.
  static ncclResult_t create(Communicator* comm, int nranks, std::unique_ptr<RmaDevice>* out);
  ~RmaDevice();  // drains, then unregisters the counters
  RmaDevice(const RmaDevice&) = delete;
  RmaDevice& operator=(const RmaDevice&) = delete;

  // Our counters (waits poll them) and a peer's mapping of its counters (signals add to them),
  // registered for the engine's kernels. `bytes` is the region's size.
  ncclResult_t mapOwn(const SignalView& view, size_t bytes);
  ncclResult_t mapPeer(int peer, const SignalView& view, size_t bytes);
  bool reaches(int peer) const { return peers_[peer].mapped(); }

  // A window's buffer: GPU memory of this communicator's device, named for other processes.
  ncclResult_t exportWindow(const void* buff, RmaDeviceExport* out) const;
  // A peer's buffer in another process, opened here: *base is its allocation's base here, to
  // be closed with closeWindow; the buffer is at *base + e.offset.
  ncclResult_t openWindow(int peer, const RmaDeviceExport& e, CuDevicePtr* base) const;
  void closeWindow(CuDevicePtr base) const;

  // Queued on `stream`: bytes from src to dst (device addresses; 0 bytes: none), then one added
  // to `peer`'s counter at `counter` (the host address in our mapping of its region). dst 0:
  // ncclSignal. A stream being captured is refused (put and wait): see rma_device.cc.
  ncclResult_t put(uint64_t dst, const void* src, size_t bytes, int peer, const uint64_t* counter,
                   cudaStream_t stream);
  // Queued on `stream`: a wait until each counter (our host addresses) reaches its target.
  struct Want {
    const uint64_t* counter;
    uint64_t target;
    int peer, sigIdx, ctx;
  };
  ncclResult_t wait(std::span<const Want> wants, cudaStream_t stream);
  // Waits on the host until every launch queued so far is done.
  ncclResult_t drain();
  // The error a stopped wait left, or an earlier one of the engine's kernels (pollAsyncError).
  ncclResult_t asyncError() const;

  // Starts the watch: `gone(peer)` says why a peer is gone ("" while it is not); called on the
  // watch thread, for every peer but this rank, until the object is destroyed.
  ncclResult_t watchPeers(int self, std::function<std::string(int peer)> gone);

  // The message path (peers reached by message). setupStaging at setup, when any peer is one.
  static constexpr int kStagingSlots = 4;
  static constexpr size_t kStagingSlotBytes = size_t{1} << 20;
  struct Slot {
    char* host = nullptr;
    CuDevicePtr device = 0;  // the same memory, as kernels and copies on the stream see it
    std::atomic<bool> busy{false};
  };
  ncclResult_t setupStaging();
  // A free slot, marked busy (the host function that sends it frees it); waits for one, up to
  // NCCL_TIMEOUT (ncclRemoteError: the streams holding them did not move).
  ncclResult_t acquireSlot(Slot** out);
  // Queued on `stream`: bytes (at most kStagingSlotBytes) from src into the slot.
  ncclResult_t stage(Slot* slot, const void* src, size_t bytes, cudaStream_t stream);
  // Queued on `stream`: fn(arg) on a driver thread once the stream's earlier work is done.
  ncclResult_t hostCall(cudaStream_t stream, void (*fn)(void*), void* arg);
  // The receiving side, on the listener thread: bytes of a message into our GPU window; false
  // (logged) if the driver refused. Done when it returns.
  bool copyIn(void* dst, const void* src, size_t bytes);

 private:
  RmaDevice(CudaEngine* engine, int nranks);
  ncclResult_t launched(cudaStream_t stream);  // records the stream's event
  void watch(int self, const std::function<std::string(int peer)>& gone);  // the watch thread
  void stopWatch();
  ncclResult_t notCapturing(cudaStream_t stream, const char* where) const;
  ncclResult_t cudaFailed(CuResult r, const char* what) const;

  CudaEngine* engine_;
  const CudaDriver& cu_;
  CuContext ctx_;
  HostMapping own_;
  const char* ownBase_ = nullptr;
  struct PeerCounters {
    HostMapping mapping;
    const char* base = nullptr;  // our host address of its region
    bool mapped() const { return mapping.mapped(); }
  };
  std::vector<PeerCounters> peers_;
  std::map<cudaStream_t, CuEvent> events_;  // the last launch on each stream used
  void* staging_ = nullptr;                 // kStagingSlots slots, pinned (cuMemHostAlloc)
  Slot slots_[kStagingSlots];
  CuStream copyStream_ = nullptr;  // copyIn's, with its event
  CuEvent copyEvent_ = nullptr;
  int64_t timeoutMs_ = 0;
  uint32_t* peerGone_ = nullptr;  // host-mapped, [nranks]: the wait kernel's flags
  CuDevicePtr peerGoneDev_ = 0;
  std::mutex watchMu_;
  std::condition_variable watchCv_;
  bool stopWatch_ = false;
  std::thread watch_;
};

}  // namespace ringcc
