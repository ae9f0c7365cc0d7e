#include "src/rma/rma_comm.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "kernels/peer_read.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/base/peer_info.h"
#include "src/bootstrap/bootstrap.h"
#include "transports/fifo_host.h"
#include "transports/ucx/ucx_transport.h"

namespace ringcc {
namespace {

constexpr int kTagRma = kBootstrapReservedTag - 4;
constexpr size_t kMessageChunkBytes = size_t{4} << 20;
constexpr int kLongestNapMicros = 2000;
// A peer's add by UCX rings no bell (the network, or our UCX worker, writes the counter), so a
// wait for one naps this long at most: the nap is then its latency.
constexpr int kLongestUcxNapMicros = 100;

// The message path's header; the data follows it.
struct RmaMessage {
  uint32_t windowId;
  uint32_t hasWindow;  // 0: a signal without data (ncclSignal)
  uint64_t offset;
  uint64_t bytes;
  int32_t sigIdx;
  int32_t ctx;
  uint32_t signal;  // 1: add to (sender, ctx, sigIdx) after the data
  uint32_t pad;
};

// At setup, from every rank.
struct SetupInfo {
  SignalRegionDesc signals;
  uint64_t signalsBase;  // our address of the region (kKernel's write probe, kUcx's adds)
  int32_t nCtx;
  int32_t nSig;
  uint32_t ucxBytes;  // our UCX blob (rma_ucx.cc; 0: no UCX here)
  uint32_t pad;
};

int resolvedContexts(const CommConfig& config) {
  return config.numRmaCtx == NCCL_CONFIG_UNDEF_INT ? 1 : config.numRmaCtx;
}

}  // namespace

const char* rmaPathName(RmaPath path) {
  switch (path) {
    case RmaPath::kDirect:
      return "direct";
    case RmaPath::kKernel:
      return "process_vm_writev";
    case RmaPath::kMessage:
      return "message";
    case RmaPath::kCudaIpc:
      return "cuda_ipc";
    case RmaPath::kUcx:
      return "ucx_rma";
  }
  return "?";
}

// The windows the listener may write into (id -> this rank's buffer) and our counters.
struct CommRma::Inbound {
  struct Target {
    char* base;
    size_t size;
  };
  std::mutex mu;
  std::map<uint32_t, Target> targets;
  std::unique_ptr<SignalRegion> signals;
  SignalGeometry geometry;
  RmaDevice* device = nullptr;  // CUDA communicators with peers by message: windows are GPU memory

  // The receive side of kMessage, on the listener thread. Nothing here may block, and nothing
  // from the wire is trusted: a bad message is dropped with a WARN (the waiter then times out).
  void receive(int from, const std::vector<char>& data) {
    RmaMessage m;
    if (data.size() < sizeof(m) || from < 0 || from >= geometry.nranks) {
      LOG_WARN("rma: dropped a malformed message from rank %d", from);
      return;
    }
    std::memcpy(&m, data.data(), sizeof(m));
    if (m.bytes != data.size() - sizeof(m)) {
      LOG_WARN("rma: dropped a message from rank %d: size does not match its header", from);
      return;
    }
    if (m.hasWindow) {
      std::lock_guard<std::mutex> lock(mu);
      auto it = targets.find(m.windowId);
      if (it == targets.end() || m.offset > it->second.size ||
          m.bytes > it->second.size - m.offset) {
        LOG_WARN(
            "rma: dropped a put from rank %d into window %u (deregistered, or %llu bytes at "
            "offset %llu do not fit)",
            from, m.windowId, static_cast<unsigned long long>(m.bytes),
            static_cast<unsigned long long>(m.offset));
        return;
      }
      char* to = it->second.base + m.offset;
      if (m.bytes && device) {
        if (!device->copyIn(to, data.data() + sizeof(m), m.bytes)) return;  // (logged)
      } else if (m.bytes) {
        std::memcpy(to, data.data() + sizeof(m), m.bytes);
      }
    }
    if (!m.signal) return;
    if (m.ctx < 0 || m.ctx >= geometry.nCtx || m.sigIdx < 0 || m.sigIdx >= geometry.nSig) {
      LOG_WARN("rma: dropped a signal from rank %d with sigIdx %d ctx %d", from, m.sigIdx, m.ctx);
      return;
    }
    signals->view().bump(from, m.ctx, m.sigIdx);
  }
};

CommRma::CommRma(Communicator* comm, const SignalGeometry& g)
    : comm_(comm),
      geometry_(g),
      inbound_(std::make_shared<Inbound>()),
      peers_(g.nranks),
      consumed_(static_cast<size_t>(g.nranks) * g.nCtx * g.nSig, 0) {
  inbound_->geometry = g;
}

CommRma::~CommRma() {
  // The handler may still run on its copy: it holds inbound_ itself.
  if (comm_->bootstrap) comm_->bootstrap->onMessage(kTagRma, nullptr);
  stopUcx();  // before the memory it registered goes
  if (device_) {
    device_->drain();  // no launch of ours still writes a peer's buffer or counter
    for (auto& [handle, win] : windows_) closeWindow(win.get());
    std::lock_guard<std::mutex> lock(inbound_->mu);  // a late message is dropped, not copied
    inbound_->device = nullptr;
    inbound_->targets.clear();
  }
}

ncclResult_t CommRma::setup(Communicator* comm, std::unique_ptr<CommRma>* out) {
  const char* where = "ncclCommWindowRegister";
  const int nCtx = resolvedContexts(comm->config);
  if (nCtx <= 0)
    return fail(ncclInvalidUsage, where,
                "config numRmaCtx is %d: one-sided operations are off on this communicator", nCtx);
  if (nCtx > kRmaMaxContexts)
    return fail(ncclInvalidArgument, where, "config numRmaCtx %d: ringcc has at most %d", nCtx,
                kRmaMaxContexts);
  const SignalGeometry g{comm->nranks, nCtx, kRmaSignalIndices};
  std::unique_ptr<CommRma> rma(new CommRma(comm, g));
  RINGCC_CHECK(SignalRegion::create(g, &rma->inbound_->signals));
  // Before the exchange: once a peer has our info it may send.
  std::shared_ptr<Inbound> in = rma->inbound_;
  comm->bootstrap->onMessage(
      kTagRma, [in](int from, const std::vector<char>& data) { in->receive(from, data); });
  bool forced = false;
  RINGCC_CHECK(netForced(&forced));
  std::vector<uint8_t> ucxBlob;
  RINGCC_CHECK(rma->startUcx(forced, in->signals->view(), &ucxBlob));
  std::vector<SetupInfo> infos(comm->nranks);
  SetupInfo& mine = infos[comm->rank];
  mine.signals = in->signals->desc();
  mine.signalsBase = reinterpret_cast<uintptr_t>(in->signals->view().base());
  mine.nCtx = g.nCtx;
  mine.nSig = g.nSig;
  mine.ucxBytes = static_cast<uint32_t>(ucxBlob.size());
  RINGCC_CHECK(comm->bootstrap->allGather(infos.data(), sizeof(SetupInfo)));
  std::vector<SignalRegionDesc> descs(comm->nranks);
  std::vector<uint32_t> ucxBytes(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    if (infos[r].nCtx != g.nCtx || infos[r].nSig != g.nSig)
      return fail(ncclInvalidUsage, where,
                  "rank %d has %d RMA contexts, rank %d has %d: numRmaCtx must be the same on "
                  "every rank",
                  r, infos[r].nCtx, comm->rank, g.nCtx);
    descs[r] = infos[r].signals;
    ucxBytes[r] = infos[r].ucxBytes;
    rma->peers_[r].signalsBase = infos[r].signalsBase;
  }
  RINGCC_CHECK(rma->connectPeers(descs, forced));
  if (comm->memKind == MemoryKind::Cuda) RINGCC_CHECK(rma->setupDevice());
  // kKernel's probe: an 8-byte write into the peer's region header (its own magic, so a
  // concurrent probe by another rank changes nothing).
  for (int r = 0; r < comm->nranks; ++r) {
    Peer& p = rma->peers_[r];
    if (p.path != RmaPath::kKernel) continue;
    uint64_t magic = 0;
    std::memcpy(&magic, p.signals->view().base(), sizeof(magic));
    if (!peerWrite(p.pid, infos[r].signalsBase, &magic, sizeof(magic))) {
      LOG_INFO(kLogShm,
               "rma: cannot write into rank %d's memory (%s): puts to it go by message (or "
               "UCX, where both ranks have it)",
               r, strerror(errno));
      p.path = RmaPath::kMessage;
    }
  }
  // After the probes: a peer they turned to kMessage may take UCX too.
  RINGCC_CHECK(rma->connectUcx(ucxBytes, ucxBlob));
  for (int r = 0; r < comm->nranks; ++r)
    LOG_INFO(kLogInit, "rma: rank %d -> rank %d by %s", comm->rank, r,
             rmaPathName(rma->peers_[r].path));
  *out = std::move(rma);
  return ncclSuccess;
}

ncclResult_t CommRma::connectPeers(const std::vector<SignalRegionDesc>& descs, bool netForced) {
  const PeerInfo& me = comm_->peers[comm_->rank];
  for (int r = 0; r < comm_->nranks; ++r) {
    const PeerInfo& info = comm_->peers[r];
    Peer& p = peers_[r];
    p.pid = info.pid;
    const bool process = r == comm_->rank || sameProcess(me, info);
    if (!process && sameHost(me, info)) p.watch = ProcessWatch(info.pid);
    // NCCL_NET=ucx: every peer by the network, as every connection goes by it then.
    if (byNetwork(r, netForced)) continue;  // kMessage (kUcx: connectUcx)
    p.signals = SignalRegion::mapPeer(descs[r], geometry_);
    if (!p.signals) {
      LOG_INFO(kLogShm, "rma: cannot map rank %d's signals: its puts go by message", r);
      continue;
    }
    p.path = process ? RmaPath::kDirect : RmaPath::kKernel;
  }
  return ncclSuccess;
}

ncclResult_t CommRma::setupDevice() {
  RINGCC_CHECK(RmaDevice::create(comm_, comm_->nranks, &device_));
  RINGCC_CHECK(device_->mapOwn(inbound_->signals->view(), geometry_.bytes()));
  for (int r = 0; r < comm_->nranks; ++r) {
    Peer& p = peers_[r];
    if (p.path == RmaPath::kMessage) continue;
    // Another process's GPU memory is reached by CUDA IPC, not process_vm_writev.
    if (p.path == RmaPath::kKernel) p.path = RmaPath::kCudaIpc;
    RINGCC_CHECK(device_->mapPeer(r, p.signals->view(), geometry_.bytes()));
  }
  if (std::any_of(peers_.begin(), peers_.end(),
                  [](const Peer& p) { return p.path == RmaPath::kMessage; })) {
    RINGCC_CHECK(device_->setupStaging());
    std::lock_guard<std::mutex> lock(inbound_->mu);
    inbound_->device = device_.get();
  }
  // What the host path's wait looks at between naps, asked by the device's watch thread:
  // another process on this host exited; a peer elsewhere closed the bootstrap connection it
  // sent on (one never heard from is found at NCCL_TIMEOUT, as on the host path).
  return device_->watchPeers(comm_->rank, [this](int r) -> std::string {
    const Peer& p = peers_[r];
    if (!p.watch.alive()) return "its process has exited";
    if (p.path == RmaPath::kMessage && p.watch.pid() == 0) {
      const std::string ended = comm_->bootstrap->peerEnded(r);
      if (!ended.empty()) return "its bootstrap connection " + ended;
    }
    return "";
  });
}

ncclResult_t CommRma::reachWindow(RmaWindow* win) {
  win->reach.assign(comm_->nranks, 0);
  for (int r = 0; r < comm_->nranks; ++r) {
    const RmaWindowDesc& d = win->ranks[r];
    if (peers_[r].path == RmaPath::kDirect) {
      win->reach[r] = d.base;
    } else if (peers_[r].path == RmaPath::kCudaIpc) {
      CuDevicePtr base = 0;
      RINGCC_CHECK(device_->openWindow(r, d.device, &base));
      win->opened.push_back(base);
      win->reach[r] = base + d.device.offset;
    }
  }
  return ncclSuccess;
}

void CommRma::closeWindow(RmaWindow* win) {
  for (CuDevicePtr base : win->opened) device_->closeWindow(base);
  win->opened.clear();
}

// One staged chunk of a CUDA put by message (or a signal alone), sent by a host function.
struct CommRma::StagedSend {
  CommRma* rma;
  RmaPut put;             // this chunk's offset and bytes
  RmaDevice::Slot* slot;  // null: no bytes
  bool signal;
};

void CommRma::sendStaged(void* arg) {
  std::unique_ptr<StagedSend> job(static_cast<StagedSend*>(arg));
  RmaPut put = job->put;
  if (job->slot) put.src = job->slot->host;
  const ncclResult_t r = job->rma->sendMessages(put, job->signal);
  if (job->slot) job->slot->busy.store(false, std::memory_order_release);
  // On a driver thread, so no caller hears it: the communicator's error, as a kernel's stop.
  if (r != ncclSuccess) job->rma->comm_->recordError(r);
}

ncclResult_t CommRma::putStaged(const RmaPut& put) {
  size_t done = 0;
  do {
    const size_t n = std::min(put.bytes - done, RmaDevice::kStagingSlotBytes);
    RmaDevice::Slot* slot = nullptr;
    if (n > 0) {
      RINGCC_CHECK(device_->acquireSlot(&slot));
      if (const ncclResult_t r =
              device_->stage(slot, static_cast<const char*>(put.src) + done, n, put.stream);
          r != ncclSuccess) {
        slot->busy.store(false);
        return r;
      }
    }
    RmaPut chunk = put;
    chunk.offset = put.offset + done;
    chunk.bytes = n;
    auto job = std::make_unique<StagedSend>(StagedSend{this, chunk, slot, done + n == put.bytes});
    if (const ncclResult_t r = device_->hostCall(put.stream, &CommRma::sendStaged, job.get());
        r != ncclSuccess) {
      if (slot) slot->busy.store(false);  // (a copy into it may still be queued: harmless)
      return r;
    }
    job.release();  // the host function's now
    done += n;
  } while (done < put.bytes);
  return ncclSuccess;
}

ncclResult_t CommRma::registerWindow(void* buff, size_t size, int flags, RmaWindow** out) {
  const char* where = "ncclCommWindowRegister";
  auto win = std::make_unique<RmaWindow>();
  win->id = nextId_++;
  win->buff = buff;
  win->size = size;
  win->flags = flags;
  win->ranks.resize(comm_->nranks);
  RmaWindowDesc& mine = win->ranks[comm_->rank];
  mine.base = reinterpret_cast<uintptr_t>(buff);
  mine.size = size;
  mine.id = win->id;
  mine.flags = flags;
  keyWindow(win.get(), &mine);  // ranks with UCX
  // Named for other processes when a peer is one (paths are symmetric, so that peer opens it);
  // a refusal is every rank's failure (below), not a registration that hangs half made.
  const bool exports = std::any_of(peers_.begin(), peers_.end(),
                                   [](const Peer& p) { return p.path == RmaPath::kCudaIpc; });
  if (device_ && exports)
    mine.exported = device_->exportWindow(buff, &mine.device) == ncclSuccess ? 1 : 2;
  {
    // Before the exchange, as at setup: a peer may put once it has our buffer.
    std::lock_guard<std::mutex> lock(inbound_->mu);
    inbound_->targets[win->id] = {static_cast<char*>(buff), size};
  }
  auto forget = [&] {
    unkeyWindow(win.get());
    std::lock_guard<std::mutex> lock(inbound_->mu);
    inbound_->targets.erase(win->id);
  };
  ncclResult_t r = comm_->bootstrap->allGather(win->ranks.data(), sizeof(RmaWindowDesc));
  if (r != ncclSuccess) {
    forget();
    return r;
  }
  for (int peer = 0; peer < comm_->nranks; ++peer) {
    if (win->ranks[peer].id == win->id) continue;
    forget();
    return fail(ncclInvalidUsage, where,
                "rank %d registered its window number %u while rank %d registered number %u: "
                "every rank must register (and deregister) windows in the same order",
                peer, win->ranks[peer].id, comm_->rank, win->id);
  }
  if (device_) {
    for (int peer = 0; peer < comm_->nranks; ++peer) {
      if (win->ranks[peer].exported != 2) continue;
      forget();
      return fail(ncclInvalidArgument, where,
                  "rank %d's window buffer is not memory CUDA IPC can share (its WARN says why)",
                  peer);
    }
    if (const ncclResult_t r = reachWindow(win.get()); r != ncclSuccess) {
      closeWindow(win.get());
      forget();
      return r;
    }
  }
  unpackWindowKeys(win.get());
  *out = win.get();
  windows_[win.get()] = std::move(win);
  return ncclSuccess;
}

ncclResult_t CommRma::deregisterWindow(RmaWindow* win) {
  // Every rank has stopped putting into it once all have arrived here (NCCL's contract: the
  // puts were waited for before); on CUDA once the copies queued here are done too.
  if (device_) RINGCC_CHECK(device_->drain());
  RINGCC_CHECK(comm_->bootstrap->barrier());
  unkeyWindow(win);  // no peer puts into it by UCX any more
  {
    std::lock_guard<std::mutex> lock(inbound_->mu);
    inbound_->targets.erase(win->id);
  }
  if (device_) closeWindow(win);
  windows_.erase(win);
  return ncclSuccess;
}

RmaWindow* CommRma::find(const void* handle) const {
  auto it = windows_.find(handle);
  return it == windows_.end() ? nullptr : it->second.get();
}

ncclResult_t CommRma::checkPut(const RmaPut& put, const char* where) const {
  RINGCC_CHECK(checkSignal(put.sigIdx, put.ctx, "", where));
  if (!put.win) return ncclSuccess;
  const RmaWindowDesc& d = put.win->ranks[put.peer];
  if (put.offset > d.size || put.bytes > d.size - put.offset)
    return fail(ncclInvalidArgument, where,
                "peerWinOffset %zu + %zu bytes is beyond peer %d's window of %llu bytes",
                put.offset, put.bytes, put.peer, static_cast<unsigned long long>(d.size));
  return ncclSuccess;
}

ncclResult_t CommRma::put(const RmaPut& put) {
  const char* where = put.win ? "ncclPutSignal" : "ncclSignal";
  Peer& p = peers_[put.peer];
  if (device_) {
    RINGCC_CHECK(device_->asyncError());
    if (p.path == RmaPath::kMessage) return putStaged(put);
    const uint64_t to = put.win ? put.win->reach[put.peer] + put.offset : 0;
    return device_->put(to, put.src, put.win ? put.bytes : 0, put.peer,
                        p.signals->view().counter(comm_->rank, put.ctx, put.sigIdx), put.stream);
  }
  if (p.path == RmaPath::kUcx) return putUcx(put, where);
  if (p.path == RmaPath::kMessage) return sendMessages(put, /*signal=*/true);
  if (put.win && put.bytes > 0) {
    const uint64_t to = put.win->ranks[put.peer].base + put.offset;
    if (p.path == RmaPath::kDirect) {
      std::memcpy(reinterpret_cast<void*>(to), put.src, put.bytes);
    } else if (!peerWrite(p.pid, to, put.src, put.bytes)) {
      return failPeer(ncclRemoteError, put.peer, where,
                      "cannot write %zu bytes into peer %d's window (pid %d): %s", put.bytes,
                      put.peer, p.pid, strerror(errno));
    }
  }
  p.signals->view().bump(comm_->rank, put.ctx, put.sigIdx);
  return ncclSuccess;
}

ncclResult_t CommRma::sendMessages(const RmaPut& put, bool signal) {
  size_t done = 0;
  std::vector<char> buf;
  do {
    const size_t n = std::min(put.bytes - done, kMessageChunkBytes);
    RmaMessage m{};
    m.windowId = put.win ? put.win->id : 0;
    m.hasWindow = put.win ? 1 : 0;
    m.offset = put.offset + done;
    m.bytes = n;
    m.sigIdx = put.sigIdx;
    m.ctx = put.ctx;
    m.signal = signal && done + n == put.bytes ? 1 : 0;
    buf.resize(sizeof(m) + n);
    std::memcpy(buf.data(), &m, sizeof(m));
    if (n) std::memcpy(buf.data() + sizeof(m), static_cast<const char*>(put.src) + done, n);
    RINGCC_CHECK(comm_->bootstrap->send(put.peer, kTagRma, buf.data(), buf.size()));
    done += n;
  } while (done < put.bytes);
  return ncclSuccess;
}

ncclResult_t CommRma::waitFailed(const char* why, int peer, int sigIdx, int ctx, uint64_t got,
                                 uint64_t want) const {
  return failPeer(ncclRemoteError, peer, "ncclWaitSignal",
                  "%s: rank %d waited for signal (sigIdx %d, ctx %d) from peer %d and got %llu "
                  "of %llu",
                  why, comm_->rank, sigIdx, ctx, peer, static_cast<unsigned long long>(got),
                  static_cast<unsigned long long>(want));
}

ncclResult_t CommRma::checkSignal(int sigIdx, int ctx, const char* what, const char* where) const {
  if (ctx >= geometry_.nCtx)
    return fail(ncclInvalidArgument, where,
                "%sctx %d is out of range [0, %d) (config numRmaCtx, default 1)", what, ctx,
                geometry_.nCtx);
  if (sigIdx >= geometry_.nSig)
    return fail(ncclInvalidArgument, where, "%ssigIdx %d is out of range [0, %d)", what, sigIdx,
                geometry_.nSig);
  return ncclSuccess;
}

ncclResult_t CommRma::wait(std::span<const ncclWaitSignalDesc_t> descs, cudaStream_t stream) {
  const char* where = "ncclWaitSignal";
  // Targets per counter: what earlier waits consumed plus this wait's opCnt (summed when a
  // counter is named twice).
  struct Want {
    size_t index;
    int peer, sigIdx, ctx;
    uint64_t target;
  };
  std::vector<Want> wants;
  for (size_t i = 0; i < descs.size(); ++i) {
    const ncclWaitSignalDesc_t& d = descs[i];
    const size_t index = geometry_.index(d.peer, d.ctx, d.sigIdx);
    auto it =
        std::find_if(wants.begin(), wants.end(), [&](const Want& w) { return w.index == index; });
    if (it == wants.end()) {
      wants.push_back({index, d.peer, d.sigIdx, d.ctx, consumed_[index]});
      it = wants.end() - 1;
    }
    it->target += static_cast<uint64_t>(d.opCnt);
  }
  if (device_) {
    std::vector<RmaDevice::Want> onDevice;
    for (const Want& w : wants) {
      onDevice.push_back({inbound_->signals->view().counter(w.peer, w.ctx, w.sigIdx), w.target,
                          w.peer, w.sigIdx, w.ctx});
    }
    RINGCC_CHECK(device_->asyncError());
    RINGCC_CHECK(device_->wait(onDevice, stream));
    for (const Want& w : wants) consumed_[w.index] = w.target;
    return ncclSuccess;
  }
  const SignalView ours = inbound_->signals->view();
  FifoCounter* bell = ours.bell();
  const int spins = static_cast<int>(std::max<int64_t>(0, paramInt("SPIN_COUNT")));
  const int64_t timeoutMs = paramInt("TIMEOUT");
  const auto deadline = WaitClock::now() + std::chrono::milliseconds(timeoutMs);
  size_t pending = 0;  // wants before it are reached
  for (int polls = 0;; ++polls) {
    // The bell before the counters: a signal after this read changes the bell, so the nap
    // below returns at once instead of sleeping through it.
    const uint32_t rung = std::atomic_ref<uint32_t>(bell->value).load(std::memory_order_acquire);
    while (pending < wants.size() && ours.count(wants[pending].peer, wants[pending].ctx,
                                                wants[pending].sigIdx) >= wants[pending].target)
      ++pending;
    if (pending == wants.size()) break;
    if (polls < spins) continue;
    const Want& w = wants[pending];
    const uint64_t got = ours.count(w.peer, w.ctx, w.sigIdx);
    if (comm_->abortFlag.load() || comm_->revoked.load())
      return fail(ncclInvalidUsage, where,
                  "stopped waiting for signal (sigIdx %d, ctx %d) from peer %d: the communicator "
                  "was %s",
                  w.sigIdx, w.ctx, w.peer, comm_->revoked.load() ? "revoked" : "aborted");
    if (WaitClock::now() >= deadline) {
      char why[96];
      snprintf(why, sizeof(why), "timed out after NCCL_TIMEOUT (%lld ms)",
               static_cast<long long>(timeoutMs));
      return waitFailed(why, w.peer, w.sigIdx, w.ctx, got, w.target);
    }
    if (!peers_[w.peer].watch.alive())
      return waitFailed("the peer's process has exited", w.peer, w.sigIdx, w.ctx, got, w.target);
    if (peers_[w.peer].path == RmaPath::kUcx && peers_[w.peer].watch.pid() == 0) {
      // The same for a peer reached by UCX, through our endpoint to it: UCX reports it failed
      // once the peer's process is gone (its connections closed) or the network path is down.
      // Its adds were flushed before its calls returned, so the counter gets a last look.
      const std::string broke = ucx_->peerError(w.peer);
      if (!broke.empty()) {
        const uint64_t last = ours.count(w.peer, w.ctx, w.sigIdx);
        if (last >= w.target) continue;
        const std::string why = "the peer's UCX endpoint ended (" + broke +
                                "; its process ended, it destroyed its communicator, or the "
                                "network path is down)";
        return waitFailed(why.c_str(), w.peer, w.sigIdx, w.ctx, last, w.target);
      }
    }
    if (peers_[w.peer].path == RmaPath::kMessage && peers_[w.peer].watch.pid() == 0) {
      // A peer on another host has no process to watch, but its bootstrap connection ends
      // when it does (one on this host is watched: that says "exited", above, and its socket
      // may close a moment before its process is gone). What it sent came in before that end,
      // so the counter gets a last look.
      const std::string ended = comm_->bootstrap->peerEnded(w.peer);
      if (!ended.empty()) {
        const uint64_t last = ours.count(w.peer, w.ctx, w.sigIdx);
        if (last >= w.target) continue;  // reached after all: the loop's top moves on
        const std::string why = "the peer's bootstrap connection " + ended +
                                " (its process ended or it destroyed its communicator)";
        return waitFailed(why.c_str(), w.peer, w.sigIdx, w.ctx, last, w.target);
      }
    }
    const int longest =
        peers_[w.peer].path == RmaPath::kUcx ? kLongestUcxNapMicros : kLongestNapMicros;
    const int nap = std::min(longest, 50 * (polls - spins + 1));
    napOnCounter(bell, rung, nap);
  }
  for (const Want& w : wants) consumed_[w.index] = w.target;
  return ncclSuccess;
}

}  // namespace ringcc
