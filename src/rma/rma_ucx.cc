// CommRma's kUcx path (rma_comm.h): peers reached by the network, through UCX's RMA and atomics
// (transports/ucx/ucx_rma.h). What is exchanged:
//
//   setup (second allGather, only when some rank has UCX; every rank's slot as long as the
//   longest):   [u32 address bytes][u32 key bytes][worker address][our counters' packed key]
//   each window: RmaWindowDesc::ucxKey, the buffer's packed key (in the one allGather).
//
// Remote addresses are the peer's own: its counters' base (SetupInfo) plus
// SignalGeometry::counterOffset, its window's base (RmaWindowDesc) plus the put's offset.
#include <algorithm>
#include <cstring>
#include <string>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/bootstrap.h"
#include "src/rma/rma_comm.h"

namespace ringcc {
namespace {

struct BlobHeader {
  uint32_t addressBytes;
  uint32_t keyBytes;
};

// RINGCC_RMA_UCX (src/base/param.cc).
enum UcxMode : int64_t { kNever = 0, kWhereOffered = 1, kAlways = 2 };

}  // namespace

bool CommRma::byNetwork(int r, bool netForced) const {
  if (r == comm_->rank) return false;
  const PeerInfo& me = comm_->peers[comm_->rank];
  const PeerInfo& info = comm_->peers[r];
  if (sameProcess(me, info)) return netForced;
  const bool host = sameHost(me, info) && me.pidNamespace == info.pidNamespace;
  return netForced || !host;
}

ncclResult_t CommRma::startUcx(bool netForced, const SignalView& ours,
                               std::vector<uint8_t>* blob) {
  blob->clear();
  if (comm_->memKind != MemoryKind::Host) return ncclSuccess;  // CUDA: staged messages (docs)
  bool wanted = false;
  for (int r = 0; r < comm_->nranks && !wanted; ++r) wanted = byNetwork(r, netForced);
  if (!wanted) return ncclSuccess;
  const int64_t mode = paramInt("RMA_UCX");
  if (mode < kNever || mode > kAlways)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister",
                "RINGCC_RMA_UCX=%lld: 0 (messages), 1 (UCX where it has RMA and atomics, the "
                "default) or 2 (UCX always)",
                static_cast<long long>(mode));
  if (mode == kNever) {
    LOG_INFO(kLogNet | kLogInit, "rma: RINGCC_RMA_UCX=0: puts to peers on the network go by "
             "message");
    return ncclSuccess;
  }
  std::string why;
  ucx_ = UcxRma::create(comm_->nranks, &comm_->abortFlag, &why);
  if (!ucx_) {
    LOG_INFO(kLogNet | kLogInit, "rma: no UCX (%s): puts to peers on the network go by message",
             why.c_str());
    return ncclSuccess;
  }
  std::vector<uint8_t> key;
  if (ucx_->map(ours.base(), geometry_.bytes(), &ucxSignals_, &key) != ncclSuccess) {
    // Not a failure of the registration: this rank still takes part in every exchange.
    LOG_WARN("rma: UCX cannot register this rank's counters (above): puts to peers on the "
             "network go by message");
    ucx_.reset();
    return ncclSuccess;
  }
  const std::span<const uint8_t> address = ucx_->address();
  const BlobHeader h{static_cast<uint32_t>(address.size()), static_cast<uint32_t>(key.size())};
  blob->resize(sizeof(h) + address.size() + key.size());
  std::memcpy(blob->data(), &h, sizeof(h));
  std::memcpy(blob->data() + sizeof(h), address.data(), address.size());
  std::memcpy(blob->data() + sizeof(h) + address.size(), key.data(), key.size());
  return ncclSuccess;
}

ncclResult_t CommRma::connectUcx(const std::vector<uint32_t>& blobBytes,
                                 const std::vector<uint8_t>& mine) {
  // Every rank sees the same sizes, so all of them take part in this exchange or none.
  const size_t longest = *std::max_element(blobBytes.begin(), blobBytes.end());
  if (longest == 0) return ncclSuccess;
  const size_t stride = (longest + 7) / 8 * 8;
  std::vector<uint8_t> all(stride * static_cast<size_t>(comm_->nranks), 0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<ptrdiff_t>(stride * comm_->rank));
  RINGCC_CHECK(comm_->bootstrap->allGather(all.data(), stride));
  if (!ucx_) return ncclSuccess;
  const bool always = paramInt("RMA_UCX") == kAlways;
  for (int r = 0; r < comm_->nranks; ++r) {
    Peer& p = peers_[r];
    if (r == comm_->rank || p.path != RmaPath::kMessage || blobBytes[r] == 0) continue;
    const uint8_t* b = all.data() + stride * static_cast<size_t>(r);
    BlobHeader h;
    std::memcpy(&h, b, sizeof(h));
    if (blobBytes[r] < sizeof(h) || h.addressBytes == 0 || h.keyBytes == 0 ||
        uint64_t{h.addressBytes} + h.keyBytes != blobBytes[r] - sizeof(h)) {
      LOG_WARN("rma: rank %d's UCX address and key do not add up to the %u bytes it sent: its "
               "puts go by message",
               r, blobBytes[r]);
      continue;
    }
    std::string why;
    UcxReach reach;
    if (ucx_->connect(r, {b + sizeof(h), h.addressBytes}, &reach, &why) != ncclSuccess) {
      LOG_WARN("rma: UCX does not reach rank %d (%s): puts to it go by message", r, why.c_str());
      continue;
    }
    if (!always && !(reach.rma && reach.amo)) {
      // Emulated with active messages (TCP): each put then costs fragments and two round
      // trips, slower than the bootstrap's one message (docs/rma.md has the figures).
      LOG_INFO(kLogNet | kLogInit,
               "rma: UCX only emulates %s to rank %d (lanes %s): puts to it go by message "
               "(RINGCC_RMA_UCX=2 takes UCX anyway)",
               reach.rma ? "atomics" : reach.amo ? "RMA" : "RMA and atomics", r,
               reach.lanes.c_str());
      continue;
    }
    if (ucx_->unpack(r, {b + sizeof(h) + h.addressBytes, h.keyBytes}, &p.ucxSignals) !=
        ncclSuccess) {
      LOG_WARN("rma: rank %d's UCX key of its counters does not unpack: puts to it go by message",
               r);
      continue;
    }
    p.path = RmaPath::kUcx;
    LOG_INFO(kLogNet | kLogInit, "rma: rank %d reached by UCX RMA (lanes %s%s)", r,
             reach.lanes.c_str(), reach.rma && reach.amo ? "" : ", emulated");
  }
  // Nobody else has UCX: nobody reaches us by it either, so our registrations buy nothing.
  bool others = false;
  for (int r = 0; r < comm_->nranks; ++r) others |= r != comm_->rank && blobBytes[r] > 0;
  if (!others) stopUcx();
  return ncclSuccess;
}

void CommRma::keyWindow(RmaWindow* win, RmaWindowDesc* mine) {
  if (!ucx_) return;
  win->ucxKeys.assign(comm_->nranks, nullptr);
  std::vector<uint8_t> key;
  // Peers put into a window without a key by message (their listener path needs no UCX).
  if (ucx_->map(win->buff, win->size, &win->ucxMemory, &key) != ncclSuccess) {
    LOG_WARN("rma: UCX cannot register window %u (above): peers put into it by message",
             win->id);
    win->ucxMemory = nullptr;
    return;
  }
  if (key.size() > sizeof(mine->ucxKey)) {
    LOG_INFO(kLogNet, "rma: window %u's UCX key is %zu bytes, more than the %zu sent: peers put "
             "into it by message",
             win->id, key.size(), sizeof(mine->ucxKey));
    ucx_->unmap(win->ucxMemory);
    win->ucxMemory = nullptr;
    return;
  }
  std::memcpy(mine->ucxKey, key.data(), key.size());
  mine->ucxKeyBytes = static_cast<uint32_t>(key.size());
}

void CommRma::unpackWindowKeys(RmaWindow* win) {
  if (!ucx_) return;
  for (int r = 0; r < comm_->nranks; ++r) {
    const RmaWindowDesc& d = win->ranks[r];
    if (peers_[r].path != RmaPath::kUcx) continue;
    if (d.ucxKeyBytes == 0 || d.ucxKeyBytes > sizeof(d.ucxKey) ||
        ucx_->unpack(r, {d.ucxKey, d.ucxKeyBytes}, &win->ucxKeys[r]) != ncclSuccess) {
      win->ucxKeys[r] = nullptr;
      LOG_INFO(kLogNet, "rma: no UCX key of rank %d's window %u: puts into it go by message", r,
               win->id);
    }
  }
}

void CommRma::unkeyWindow(RmaWindow* win) {
  if (!ucx_) return;
  for (UcxRma::RemoteKey*& k : win->ucxKeys) {
    ucx_->release(k);
    k = nullptr;
  }
  ucx_->unmap(win->ucxMemory);
  win->ucxMemory = nullptr;
}

void CommRma::stopUcx() {
  if (!ucx_) return;
  for (auto& [handle, win] : windows_) unkeyWindow(win.get());
  for (Peer& p : peers_) {
    ucx_->release(p.ucxSignals);
    p.ucxSignals = nullptr;
  }
  ucx_->unmap(ucxSignals_);
  ucxSignals_ = nullptr;
  ucx_.reset();  // the endpoints
}

ncclResult_t CommRma::putUcx(const RmaPut& put, const char* where) {
  const Peer& p = peers_[put.peer];
  const uint64_t counter =
      p.signalsBase + geometry_.counterOffset(comm_->rank, put.ctx, put.sigIdx);
  if (put.win == nullptr || put.bytes == 0)
    return ucx_->putSignal(put.peer, nullptr, 0, 0, nullptr, counter, p.ucxSignals, where);
  const UcxRma::RemoteKey* key = put.win->ucxKeys[put.peer];
  // A window without the peer's key: data and signal by message, so the data still comes
  // before its signal (both in one stream the listener handles in order).
  if (key == nullptr) return sendMessages(put, /*signal=*/true);
  return ucx_->putSignal(put.peer, put.src, put.bytes, put.win->ranks[put.peer].base + put.offset,
                         key, counter, p.ucxSignals, where);
}

}  // namespace ringcc
