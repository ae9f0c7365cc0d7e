// One-sided operations of one communicator: NCCL's memory windows (ncclCommWindowRegister),
// ncclPutSignal, ncclSignal and ncclWaitSignal, on host communicators and, for peers on this
// host, on CUDA ones (src/rma/rma_device.h: stream-ordered copies and kernels).
//
// Made at the communicator's first window registration (collective), kept until the
// communicator is destroyed (ncclComm::rma). What it promises:
//
//   - A window is registered by every rank, in the same order (each rank numbers its
//     registrations; the numbers are compared when the ranks exchange their buffers: address,
//     size, flags). Its handle (ncclWindow_t) is this rank's; it names every rank's buffer, so a
//     put names the peer and the window, and the offset is in bytes from the peer's buffer.
//   - A put writes count elements into the peer's window and then, for ncclPutSignal, adds one
//     to the peer's counter of (this rank, ctx, sigIdx); ncclSignal adds one without data. The
//     data is in the peer's window before the signal can be seen. A put is complete at the
//     source when the call returns (localbuff may be reused).
//   - A wait for opCnt signals from peer on (sigIdx, ctx) waits until that counter has reached
//     what earlier waits consumed plus opCnt, then consumes those (NCCL's count: signals beyond
//     it are left for the next wait). It ends with ncclRemoteError naming the peer and the signal
//     at NCCL_TIMEOUT, when a peer process on this host has exited, when UCX reported our
//     endpoint to a kUcx peer on another host failed (UcxRma::peerError), or when a kMessage
//     peer on another host closed the bootstrap connection it sent on (Bootstrap::peerEnded);
//     and with ncclInvalidUsage when the communicator is aborted or revoked. It spins
//     NCCL_SPIN_COUNT polls, then naps on the bell of our counters (2 ms at most per nap).
//
// How a put reaches each peer (RmaPath, chosen at setup, per peer):
//   kDirect   same process (threads, or this rank): memcpy into the window, atomic add on the
//             peer's counters (its memfd, mapped here).
//   kKernel   another process on this host, same pid namespace: process_vm_writev into the
//             window, atomic add on the peer's counters (its memfd, mapped here). Both probed
//             at setup (a mapping and an 8-byte write); a refusal falls back to kMessage.
//   kUcx      peers reached by the network (other hosts; every peer under NCCL_NET/RINGCC_NET=
//             ucx) when both ranks have UCX (transports/ucx/ucx_rma.h) and our endpoint to the
//             peer has RMA and atomic lanes (RINGCC_RMA_UCX=1, the default; 2: also where UCX
//             emulates them, as over TCP, where that is slower than kMessage): ucp_put_nbx
//             into the window, a flush, then ucp_atomic_op_nbx adding one to the peer's counter
//             (its region registered with UCX) and a flush; the call returns once all completed.
//             Setup exchanges the worker address and the counters' key (rma_ucx.cc), each
//             window registration the window's key (RmaWindowDesc::ucxKey).
//   kMessage  everyone else: such peers without UCX's RMA (no lanes for it, a build without UCX,
//             UCX failed to start or to reach the peer, RINGCC_RMA_UCX=0), and same-host peers
//             whose mapping or probe was refused. The data and the signal go as tagged bootstrap messages (chunks of 4
//             MiB, the signal with the last); the peer's bootstrap listener copies them into the
//             window and adds to the counter, in arrival order, which is send order.
//
// CUDA communicators (RmaDevice): windows are GPU memory, counters the same host memory mapped
// for the GPU; they never take kUcx; kDirect (same process) and kCudaIpc (another process on this host: the window by
// CUDA IPC) queue a copy and a signal kernel on the caller's stream; kMessage queues a copy into
// a pinned staging slot and a host function that sends the messages (the listener copies them
// into the GPU window); a wait queues a kernel that polls our counters; each call returns at
// once.
//
// Threads: NCCL's rule, one thread calls on a communicator at a time; the listener thread runs
// the message path's receive side at any time (the windows it may write are kept under a lock,
// so a deregistration never races a copy into a buffer being given back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "nccl.h"
#include "src/core/comm.h"
#include "src/rma/rma_device.h"
#include "src/rma/signal_region.h"
#include "transports/shm/process_watch.h"
#include "transports/ucx/ucx_rma.h"

namespace ringcc {

enum class RmaPath : uint8_t { kDirect, kKernel, kMessage, kCudaIpc, kUcx };
const char* rmaPathName(RmaPath path);

// The signal indices each (peer, ctx) has (NCCL 2.30 accepts sigIdx 0 only).
inline constexpr int kRmaSignalIndices = 8;
// The contexts at most (config.numRmaCtx; NCCL's default, 1, when unset).
inline constexpr int kRmaMaxContexts = 8;
// Room for a window's UCX key in RmaWindowDesc (packed keys are 10-12 bytes over TCP, a few
// dozen per InfiniBand device); a larger one is not sent, and puts into that window go by
// message.
inline constexpr size_t kRmaUcxKeyBytes = 256;

// One rank's buffer of a window, as every rank knows it.
struct RmaWindowDesc {
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t id = 0;  // the registration's number on its rank
  int32_t flags = 0;
  RmaDeviceExport device;  // CUDA communicators: the buffer named for other processes
  uint32_t exported = 0;   // ... 1 when named so, 2 when the driver refused
  uint32_t ucxKeyBytes = 0;  // ranks with UCX: the buffer's packed key (0: none)
  uint8_t ucxKey[kRmaUcxKeyBytes] = {};
};

// What ncclWindow_t points to.
struct RmaWindow {
  uint32_t id = 0;
  void* buff = nullptr;
  size_t size = 0;
  int flags = 0;
  std::vector<RmaWindowDesc> ranks;  // by rank
  // CUDA communicators, by rank: where this rank writes that rank's buffer (0: not reachable),
  // and the IPC openings to close with the window.
  std::vector<uint64_t> reach;
  std::vector<CuDevicePtr> opened;
  // Ranks with UCX: our buffer's registration, and by rank the keys of kUcx peers' buffers
  // (null: that peer's puts into it go by message).
  UcxRma::Memory* ucxMemory = nullptr;
  std::vector<UcxRma::RemoteKey*> ucxKeys;
};

// One put or signal (bytes may be 0; signal false only for chunks before the last).
struct RmaPut {
  const void* src = nullptr;
  size_t bytes = 0;
  int peer = 0;
  const RmaWindow* win = nullptr;  // null: ncclSignal
  size_t offset = 0;
  int sigIdx = 0;
  int ctx = 0;
  cudaStream_t stream = nullptr;  // CUDA communicators: where the put is queued
};

class CommRma {
 public:
  // The collective setup at the first window: our counters, the message handler, the peers'
  // counters mapped where they can be, a path per peer.
  static ncclResult_t setup(Communicator* comm, std::unique_ptr<CommRma>* out);
  ~CommRma();
  CommRma(const CommRma&) = delete;
  CommRma& operator=(const CommRma&) = delete;

  int contexts() const { return geometry_.nCtx; }
  RmaPath path(int peer) const { return peers_[peer].path; }

  // Collective. ncclInvalidUsage if the ranks' registration numbers differ.
  ncclResult_t registerWindow(void* buff, size_t size, int flags, RmaWindow** out);
  // Collective (a barrier, then the window is gone on this rank).
  ncclResult_t deregisterWindow(RmaWindow* win);
  // The window behind `handle` if it is one of this communicator's live windows, else null.
  RmaWindow* find(const void* handle) const;

  // ncclInvalidArgument unless sigIdx and ctx are in range; `what` prefixes their names.
  ncclResult_t checkSignal(int sigIdx, int ctx, const char* what, const char* where) const;
  // ncclInvalidArgument if the bytes at offset do not fit the peer's buffer of win.
  ncclResult_t checkPut(const RmaPut& put, const char* where) const;
  ncclResult_t put(const RmaPut& put);
  ncclResult_t wait(std::span<const ncclWaitSignalDesc_t> descs, cudaStream_t stream);

 private:
  struct Inbound;  // what the listener thread uses (shared with its handler)
  struct Peer {
    RmaPath path = RmaPath::kMessage;
    int32_t pid = 0;
    std::unique_ptr<SignalRegion> signals;  // mapped: kDirect, kKernel
    ProcessWatch watch;                     // another process on this host
    uint64_t signalsBase = 0;               // its address of its counters
    UcxRma::RemoteKey* ucxSignals = nullptr;  // kUcx: the key of its counters
  };
  CommRma(Communicator* comm, const SignalGeometry& g);
  ncclResult_t connectPeers(const std::vector<SignalRegionDesc>& descs, bool netForced);
  // Whether peer r is reached by the network (another host, or NCCL_NET=ucx): kMessage or kUcx.
  bool byNetwork(int r, bool netForced) const;
  // kUcx (rma_ucx.cc). Before the setup exchange: UCX started when a peer is reached by the
  // network (host communicators), our counters (`ours`) registered, and what peers need of us
  // (the worker address and the counters' key) in *blob; empty without UCX.
  ncclResult_t startUcx(bool netForced, const SignalView& ours, std::vector<uint8_t>* blob);
  // After it: every rank's blob (a second allGather, when any rank has one); kMessage peers
  // that have one, and that our endpoint reaches, become kUcx.
  ncclResult_t connectUcx(const std::vector<uint32_t>& blobBytes, const std::vector<uint8_t>& mine);
  // A window: our buffer registered and its key in *mine (before the exchange); kUcx peers'
  // keys unpacked (after it); all of it released (deregistration, or a registration that failed).
  // A registration UCX refuses is logged and leaves the window without a key (by message):
  // never a rank that skips the exchange.
  void keyWindow(RmaWindow* win, RmaWindowDesc* mine);
  void unpackWindowKeys(RmaWindow* win);
  void unkeyWindow(RmaWindow* win);
  ncclResult_t putUcx(const RmaPut& put, const char* where);
  void stopUcx();  // every key and registration, then the endpoints (the destructor)
  // kMessage: the put as tagged bootstrap messages, the last one signalling if `signal`.
  ncclResult_t sendMessages(const RmaPut& put, bool signal);
  ncclResult_t setupDevice();  // CUDA: counters mapped for kernels, kKernel peers -> kCudaIpc
  ncclResult_t reachWindow(RmaWindow* win);  // CUDA: win->reach, opening other processes' buffers
  void closeWindow(RmaWindow* win);
  // CUDA, kMessage: the put staged on its stream and sent by host functions, chunk by chunk.
  struct StagedSend;
  ncclResult_t putStaged(const RmaPut& put);
  static void sendStaged(void* job);
  ncclResult_t waitFailed(const char* why, int peer, int sigIdx, int ctx, uint64_t got,
                          uint64_t want) const;

  Communicator* comm_;
  SignalGeometry geometry_;
  std::shared_ptr<Inbound> inbound_;
  std::vector<Peer> peers_;
  std::vector<uint64_t> consumed_;  // by SignalGeometry::index(peer, ctx, sigIdx)
  std::map<const void*, std::unique_ptr<RmaWindow>> windows_;
  uint32_t nextId_ = 0;
  // Ranks with UCX (with kUcx peers or not: a peer may reach us by it). Declared after the
  // counters it registers (inbound_), so gone before them; the destructor stops it first anyway.
  std::unique_ptr<UcxRma> ucx_;
  UcxRma::Memory* ucxSignals_ = nullptr;  // our counters, registered
  // CUDA communicators only. Last: it is gone before the counters it maps (peers_, inbound_).
  std::unique_ptr<RmaDevice> device_;
};

}  // namespace ringcc
