#include "transports/ucx/ucx_link.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/base/error.h"
#include "src/base/log.h"
#include "transports/fifo_host.h"
#include "transports/fifo_layout.h"
#include "transports/proxy/proxy.h"
#include "transports/ucx/ucx_ep_info.h"
#include "transports/ucx/ucx_worker.h"

namespace ringcc {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kFullMask = ~uint64_t{0};
constexpr uint64_t kNoStepMask = ~uint64_t{0xffffffffu};
// How long an orderly close waits for its close message to leave, and then for UCX to give
// back what was posted, before it gives up (leaks the memory rather than free what UCX may
// still write).
constexpr auto kCloseSendWait = std::chrono::milliseconds(500);
constexpr auto kReleaseWait = std::chrono::seconds(2);
// A first message this long after the endpoint was made is worth a WARN (firstMessage()).
constexpr auto kSlowFirstMessage = std::chrono::seconds(5);

bool done(void* req) { return req == nullptr || ucp_request_check_status(req) != UCS_INPROGRESS; }
bool succeeded(void* req) { return req == nullptr || ucp_request_check_status(req) == UCS_OK; }

// Frees a completed request and returns its status (UCS_OK for a null request).
ucs_status_t finish(void*& req) {
  if (req == nullptr) return UCS_OK;
  ucs_status_t st = ucp_request_check_status(req);
  ucp_request_free(req);
  req = nullptr;
  return st;
}

}  // namespace

UcxLink::UcxLink(UcxWorker* worker, ConnSide side, const ConnSpec& spec)
    : worker_(worker),
      side_(side),
      peerRank_(spec.peer.rank),
      channel_(spec.channel),
      nSlots_(spec.nSlots),
      slotBytes_(spec.slotBytes),
      id_(worker->newLinkId()),
      slotReqs_(spec.nSlots, nullptr),
      metaReqs_(spec.nSlots, nullptr) {
  const ConnGeometry g{spec.nSlots, spec.slotBytes, 0, 0};
  const FifoLayout l = fifoLayout(g, 0, kPage);
  blockBytes_ = alignUp(l.total, kPage);
  void* p = std::aligned_alloc(kPage, blockBytes_);
  if (p == nullptr) return;
  std::memset(p, 0, l.total);  // counters, waiters and sizes start at 0
  block_ = static_cast<char*>(p);
  control_ = reinterpret_cast<FifoControl*>(block_ + l.controlOffset);
  slots_ = block_ + l.slotsOffset;
  // The reader of a send side's FIFO is our own proxy: a Direct runner on host memory may
  // publish a large slice by reference, and progressSend() sends it from the user's buffer,
  // one copy fewer. (A CUDA rank's buffers are device memory, which this UCX cannot send
  // from: its kernels copy into the slots.)
  if (side_ == ConnSide::Send && spec.self.memory == MemoryKind::Host)
    control_->refKind = kRefNetwork;
}

UcxLink::~UcxLink() {
  device_ = HostMapping();  // unregistered before the memory goes
  std::free(block_);
}

ncclResult_t UcxLink::mapForKernels(const ConnSpec& spec) {
  return HostMapping::map(block_, blockBytes_, peerRank_, spec.channel, "ucx setup", &device_);
}

ConnectorView UcxLink::view() const {
  // The kernels' addresses of the same bytes, when they are mapped for a CUDA rank.
  char* base = device_.mapped() ? device_.device() : block_;
  ConnectorView v{};
  v.control = reinterpret_cast<FifoControl*>(base + (reinterpret_cast<char*>(control_) - block_));
  v.slots = base + (slots_ - block_);
  v.nSlots = nSlots_;
  v.slotBytes = slotBytes_;
  v.llSlots = nullptr;  // no LL over the network: the runner would need every line sent
  v.llSlotBytes = 0;
  v.doorbell = device_.mapped() ? nullptr : Proxy::get().doorbell();
  return v;
}

void UcxLink::setPeer(uint32_t peerId, std::vector<uint8_t> address) {
  peerId_ = peerId;
  peerAddress_ = std::move(address);
}

PeerState UcxLink::peerState() const {
  if (failed_.load(std::memory_order_acquire) || epStatus_.load(std::memory_order_acquire) != 0)
    return PeerState::Dead;
  if (peerClosed_.load(std::memory_order_acquire)) return PeerState::Closed;
  return PeerState::Open;
}

uint32_t UcxLink::consumed() const { return consumed_.load(std::memory_order_acquire); }

bool UcxLink::drained() const {
  if (side_ == ConnSide::Recv || peerState() != PeerState::Open) return true;
  // Consumed by the peer (its credits moved our head up to the tail), not only handed to UCX:
  // a send UCX calls complete may still sit in a socket buffer, and a process that exits
  // right after its last operation would cut it off (the peer sees the connection reset).
  return consumed() == loadCounter(&control_->tail);
}

ncclResult_t UcxLink::fail(const char* fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  failed_.store(true, std::memory_order_release);
  return failPeer(ncclRemoteError, peerRank_, "ucx", "channel %d %s rank %d: %s", channel_,
                  side_ == ConnSide::Recv ? "recv from" : "send to", peerRank_, what);
}

void UcxLink::onEpError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* link = static_cast<UcxLink*>(arg);
  link->epStatus_.store(static_cast<int>(status), std::memory_order_release);
}

void* UcxLink::postRecv(void* buf, size_t bytes, uint64_t tag, uint64_t mask, bool registered) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (registered && memh_) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh_;
  }
  return ucp_tag_recv_nbx(worker_->worker(), buf, bytes, tag, mask, &p);
}

void* UcxLink::postSend(const void* buf, size_t bytes, uint64_t tag, bool registered) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (registered && memh_) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh_;
  }
  return ucp_tag_send_nbx(ep_, buf, bytes, tag, &p);
}

void UcxLink::firstMessage(const char* what) {
  firstSeen_ = true;
  const auto waited = std::chrono::steady_clock::now() - startedAt_;
  if (waited < kSlowFirstMessage) return;
  LOG_WARN(
      "ucx: channel %d %s rank %d: the first message %s %lld ms after the endpoint was "
      "made (UCX's connection set-up between the workers was slow)",
      channel_, side_ == ConnSide::Recv ? "recv from" : "send to", peerRank_, what,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
}

ncclResult_t UcxLink::start() {
  started_ = true;
  startedAt_ = std::chrono::steady_clock::now();
  // The slots are registered once, here, for the life of the link.
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = slots_;
  mp.length = uint64_t{nSlots_} * slotBytes_;
  ucs_status_t st = ucp_mem_map(worker_->context(), &mp, &memh_);
  if (st != UCS_OK) {
    memh_ = nullptr;
    return fail("registering %llu bytes of slots failed: %s",
                static_cast<unsigned long long>(mp.length), ucs_status_string(st));
  }
  closeReq_ = postRecv(&closeBuf_, sizeof(closeBuf_), ucxTag(kUcxClose, id_, 0), kFullMask, false);
  if (UCS_PTR_IS_ERR(closeReq_)) {
    st = UCS_PTR_STATUS(closeReq_);
    closeReq_ = nullptr;
    return fail("posting the close receive failed: %s", ucs_status_string(st));
  }
  if (side_ == ConnSide::Send) {
    creditReq_ =
        postRecv(&credit_, sizeof(credit_), ucxTag(kUcxCredit, id_, 0), kNoStepMask, false);
    if (UCS_PTR_IS_ERR(creditReq_)) {
      st = UCS_PTR_STATUS(creditReq_);
      creditReq_ = nullptr;
      return fail("posting the credit receive failed: %s", ucs_status_string(st));
    }
  }
  // A peer that closed already (it made its connection and destroyed it before our proxy got
  // here; its close message waits in our worker) needs no endpoint of ours, and may have
  // exited: connecting to it would find its port closed, which UCX 1.13's tcp transport can
  // answer with a failed assertion (tcp_ep.c:478) that aborts the process.
  // (Progress until idle: a new incoming connection takes several steps before its first
  // message matches.)
  for (int i = 0; i < 64 && ucp_worker_progress(worker_->worker()) != 0; ++i) {
  }
  if (ucp_request_check_status(closeReq_) == UCS_OK) {
    peerClosed_.store(true, std::memory_order_release);
    LOG_INFO(kLogNet, "ucx: channel %d rank %d closed its side before this one connected", channel_,
             peerRank_);
    return ncclSuccess;
  }
  st = worker_->createEndpoint(peerAddress_, &UcxLink::onEpError, this, &ep_);
  if (st != UCS_OK) {
    return fail(
        "creating the endpoint failed: %s; no UCX transport allowed here (%s) reaches "
        "the peer's worker",
        ucs_status_string(st), worker_->allowed().c_str());
  }
  if (logEnabled(LogLevel::Info, kLogNet | kLogInit))
    LOG_INFO(kLogNet | kLogInit,
             "ucx: channel %d %s rank %d: endpoint created (lanes: %s), %u x %u B slots", channel_,
             side_ == ConnSide::Recv ? "recv from" : "send to", peerRank_,
             laneTransports(endpointInfo(ep_)).c_str(), nSlots_, slotBytes_);
  return ncclSuccess;
}

ncclResult_t UcxLink::progress(bool* moved) {
  *moved = false;
  if (failed_.load(std::memory_order_relaxed)) return ncclRemoteError;
  if (!started_) {
    RINGCC_CHECK(start());
    *moved = true;
  }
  if (int st = epStatus_.load(std::memory_order_acquire); st != 0) {
    // What happened before the endpoint failed still counts: a sender publishes the sends
    // that completed (head: a runner waiting for its references ends well if they all left)
    // and takes the credits that arrived (consumed(), which its Connector's close waits for).
    if (side_ == ConnSide::Send && takeCredits(moved) == ncclSuccess)
      (void)finishSends(/*quiet=*/true, moved);
    // Logged at INFO only: a peer that exits after its last operation ends its connections
    // this way too. peerState() now says Dead, so a runner waiting on this link fails with a
    // WARN that names the peer; nobody waiting, nothing went wrong.
    failed_.store(true, std::memory_order_release);
    LOG_INFO(kLogNet,
             "ucx: channel %d %s rank %d: the connection ended: %s (peer exited or died, "
             "or the network path is down)",
             channel_, side_ == ConnSide::Recv ? "recv from" : "send to", peerRank_,
             ucs_status_string(static_cast<ucs_status_t>(st)));
    return ncclRemoteError;
  }
  RINGCC_CHECK(side_ == ConnSide::Recv ? progressRecv(moved) : progressSend(moved));
  // After the data: what the peer sent before its close message is published first, so the
  // runner (which checks its counter before the peer's state) never loses it.
  if (closeReq_ && done(closeReq_)) {
    ucs_status_t st = finish(closeReq_);
    if (st == UCS_OK) {
      peerClosed_.store(true, std::memory_order_release);
      LOG_INFO(kLogNet, "ucx: channel %d rank %d closed its side", channel_, peerRank_);
    }
    *moved = true;
  }
  return ncclSuccess;
}

ncclResult_t UcxLink::progressRecv(bool* moved) {
  // Completed receives, in step order: size, then tail (the runner's acquire load of tail
  // sees the slot bytes UCX wrote and the size).
  while (completed_ != posted_) {
    const uint32_t slot = completed_ & (nSlots_ - 1);
    void*& req = slotReqs_[slot];
    if (!done(metaReqs_[slot])) break;  // the slot's size and signature come first
    ucp_tag_recv_info_t info{};
    ucs_status_t st = ucp_tag_recv_request_test(req, &info);
    if (st == UCS_INPROGRESS) break;
    finish(req);
    if (st != UCS_OK)
      return fail("receiving step %u failed: %s", completed_, ucs_status_string(st));
    st = finish(metaReqs_[slot]);
    if (st != UCS_OK)
      return fail("receiving the size of step %u failed: %s", completed_, ucs_status_string(st));
    if (control_->meta[slot].size != info.length)
      return fail("step %u: %zu bytes arrived, the sender announced %u", completed_,
                  static_cast<size_t>(info.length), control_->meta[slot].size);
    ++completed_;
    publishCounter(&control_->tail, completed_);
    if (!firstSeen_) firstMessage("arrived");
    *moved = true;
  }
  // Credits: the runner's head, one message in flight at a time.
  const uint32_t head = loadCounter(&control_->head);
  if (creditReq_ && done(creditReq_)) {
    ucs_status_t st = finish(creditReq_);
    if (st != UCS_OK) return fail("sending head %u failed: %s", credit_, ucs_status_string(st));
  }
  if (creditReq_ == nullptr && head != credit_ && ep_ != nullptr) {
    credit_ = head;
    void* r = postSend(&credit_, sizeof(credit_), ucxTag(kUcxCredit, peerId_, 0), false);
    if (UCS_PTR_IS_ERR(r))
      return fail("sending head %u failed: %s", head, ucs_status_string(UCS_PTR_STATUS(r)));
    creditReq_ = r;
    *moved = true;
  }
  // A receive into every free slot: steps up to head + nSlots - 1.
  while (posted_ != head + nSlots_) {
    const uint32_t slot = posted_ & (nSlots_ - 1);
    void* m = postRecv(&control_->meta[slot], sizeof(SlotMeta), ucxTag(kUcxMeta, id_, posted_),
                       kFullMask, false);
    if (UCS_PTR_IS_ERR(m))
      return fail("posting the receive of step %u's size failed: %s", posted_,
                  ucs_status_string(UCS_PTR_STATUS(m)));
    metaReqs_[slot] = m;
    void* r = postRecv(slots_ + uint64_t{slot} * slotBytes_, slotBytes_,
                       ucxTag(kUcxData, id_, posted_), kFullMask, true);
    if (UCS_PTR_IS_ERR(r))
      return fail("posting the receive of step %u failed: %s", posted_,
                  ucs_status_string(UCS_PTR_STATUS(r)));
    slotReqs_[slot] = r;
    ++posted_;
    *moved = true;
  }
  return ncclSuccess;
}

ncclResult_t UcxLink::progressSend(bool* moved) {
  if (ep_ == nullptr) return ncclSuccess;  // the peer closed before we connected (start())
  RINGCC_CHECK(takeCredits(moved));
  // Every slot the runner published goes out from the slot itself, or from the user's buffer
  // that its SlotRef names (kRefNetwork): the runner leaves that buffer alone until head
  // passes the slot, which needs this send complete (finishSends).
  // At most nSlots steps beyond the receiver's credited head: it has a receive posted for each.
  const uint32_t tail = loadCounter(&control_->tail);
  while (posted_ != tail && posted_ - remoteHead_ < nSlots_) {
    const uint32_t slot = posted_ & (nSlots_ - 1);
    SlotMeta& meta = control_->meta[slot];
    const bool byRef = (meta.size & kSlotRefBit) != 0;
    const uint32_t size = meta.size & ~kSlotRefBit;
    if (size > slotBytes_)
      return fail("step %u: slot size %u is larger than a slot (%u B)", posted_, size, slotBytes_);
    char* slotData = slots_ + uint64_t{slot} * slotBytes_;
    const void* from = slotData;
    if (byRef) {
      from = reinterpret_cast<const void*>(
          static_cast<uintptr_t>(reinterpret_cast<const SlotRef*>(slotData)->addr));
      meta.size = size;  // the far receiver gets plain data: it cannot read our memory
    }
    void* m = postSend(&meta, sizeof(SlotMeta), ucxTag(kUcxMeta, peerId_, posted_), false);
    if (UCS_PTR_IS_ERR(m))
      return fail("sending step %u's size failed: %s", posted_,
                  ucs_status_string(UCS_PTR_STATUS(m)));
    metaReqs_[slot] = m;
    // A user's buffer is not registered with UCX (over tcp nothing needs to be; a transport
    // that needs registration registers it per send).
    void* r = postSend(from, size, ucxTag(kUcxData, peerId_, posted_), !byRef);
    if (UCS_PTR_IS_ERR(r))
      return fail("sending step %u failed: %s", posted_, ucs_status_string(UCS_PTR_STATUS(r)));
    slotReqs_[slot] = r;
    ++posted_;
    *moved = true;
  }
  return finishSends(/*quiet=*/false, moved);
}

ncclResult_t UcxLink::takeCredits(bool* moved) {
  // The receiver's head (the latest wins; they arrive in order). A receive is posted on the
  // worker, not the endpoint, so this also takes credits that arrived before the endpoint
  // failed.
  while (creditReq_ && done(creditReq_)) {
    ucs_status_t st = finish(creditReq_);
    if (st != UCS_OK) return fail("receiving a credit failed: %s", ucs_status_string(st));
    if (counterReached(credit_, remoteHead_)) {
      remoteHead_ = credit_;
      consumed_.store(remoteHead_, std::memory_order_release);
    }
    void* r = postRecv(&credit_, sizeof(credit_), ucxTag(kUcxCredit, id_, 0), kNoStepMask, false);
    if (UCS_PTR_IS_ERR(r))
      return fail("posting the credit receive failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    creditReq_ = r;
    *moved = true;
  }
  return ncclSuccess;
}

ncclResult_t UcxLink::finishSends(bool quiet, bool* moved) {
  while (completed_ != posted_) {
    void*& req = slotReqs_[completed_ & (nSlots_ - 1)];
    void*& meta = metaReqs_[completed_ & (nSlots_ - 1)];
    if (!done(req) || !done(meta)) break;
    if (quiet && !(succeeded(req) && succeeded(meta))) break;  // left for release()
    ucs_status_t st = finish(meta);
    if (st == UCS_OK) st = finish(req);
    if (st != UCS_OK) return fail("sending step %u failed: %s", completed_, ucs_status_string(st));
    ++completed_;
    if (!firstSeen_) firstMessage("left");
    *moved = true;
  }
  // A slot, or the user's buffer its reference names, is free once UCX no longer reads it:
  // head is local. The receiver's capacity is the proxy's to respect (posting above), so the
  // runner neither waits for a credit's round trip nor, at the end of an operation that sent
  // by reference, for a receiver that may exit as soon as it has the data.
  if (completed_ != head_) {
    head_ = completed_;
    publishCounter(&control_->head, head_);
    *moved = true;
  }
  return ncclSuccess;
}

bool UcxLink::release(std::chrono::steady_clock::time_point now) {
  if (releasePhase_ == 0) {
    // Tell the peer (best effort: it may be gone), so its waits end at once with Closed;
    // unless it told us first (it waits on nothing of ours, and may have exited: see start()).
    if (!started_ && !peerAddress_.empty()) (void)start();
    const bool peerClosed = closeReq_ && ucp_request_check_status(closeReq_) == UCS_OK;
    if (!peerClosed && ep_ && epStatus_.load() == 0) {
      // A receiver's last head first (messages of one endpoint arrive in order): this side
      // may have consumed the last slots after its last credit left, and the sender's
      // Connector, closing, waits until the credits reach its tail (drained()).
      lastCredit_ = loadCounter(&control_->head);
      if (side_ == ConnSide::Recv && lastCredit_ != credit_) {
        void* r =
            postSend(&lastCredit_, sizeof(lastCredit_), ucxTag(kUcxCredit, peerId_, 0), false);
        lastCreditReq_ = UCS_PTR_IS_ERR(r) ? nullptr : r;
      }
      void* r = postSend(&closeBuf_, 0, ucxTag(kUcxClose, peerId_, 0), false);
      closeSendReq_ = UCS_PTR_IS_ERR(r) ? nullptr : r;
    }
    releasePhase_ = 1;
    releaseDeadline_ = now + kCloseSendWait;
  }
  if (releasePhase_ == 1) {
    if (!done(closeSendReq_) && now < releaseDeadline_) return false;
    // Cancel what is posted, then close the endpoint without waiting for the peer: its
    // outstanding operations end with an error status.
    for (const auto* reqs : {&slotReqs_, &metaReqs_})
      for (void* r : *reqs)
        if (r && !done(r)) ucp_request_cancel(worker_->worker(), r);
    for (void* r : {creditReq_, closeReq_, closeSendReq_, lastCreditReq_})
      if (r && !done(r)) ucp_request_cancel(worker_->worker(), r);
    if (ep_) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep_, &p);
      epCloseReq_ = UCS_PTR_IS_ERR(r) ? nullptr : r;
      ep_ = nullptr;
    }
    releasePhase_ = 2;
    releaseDeadline_ = now + kReleaseWait;
  }
  bool all = done(epCloseReq_) && done(creditReq_) && done(closeReq_) && done(closeSendReq_) &&
             done(lastCreditReq_);
  for (void* r : slotReqs_) all = all && done(r);
  for (void* r : metaReqs_) all = all && done(r);
  if (!all) {
    if (now < releaseDeadline_) return false;
    LOG_WARN(
        "ucx: channel %d rank %d: UCX still holds requests 2 s after close; leaving %u x %u "
        "B of slots allocated",
        channel_, peerRank_, nSlots_, slotBytes_);
    block_ = nullptr;  // never free memory UCX may still write
    return true;
  }
  for (void*& r : slotReqs_) finish(r);
  for (void*& r : metaReqs_) finish(r);
  finish(creditReq_);
  finish(closeReq_);
  finish(closeSendReq_);
  finish(lastCreditReq_);
  finish(epCloseReq_);
  if (memh_) ucp_mem_unmap(worker_->context(), memh_);
  memh_ = nullptr;
  return true;
}

}  // namespace ringcc
