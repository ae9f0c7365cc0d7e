#include "src/bootstrap/bootstrap.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/inbox.h"
#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"

namespace ringcc {
namespace {

constexpr const char* kWhere = "bootstrap";

// The code a root rejection maps to: a disagreement among the callers is their misuse.
ncclResult_t rejectionCode(uint32_t status) {
  switch (status) {
    case wire::kBadNranks:
    case wire::kNranksMismatch:
    case wire::kBadRank:
    case wire::kDuplicateRank:
    case wire::kIdConsumed:
      return ncclInvalidUsage;
    case wire::kBadAddress:
      return ncclInternalError;
    default:
      return ncclRemoteError;
  }
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, uint64_t magic, const std::atomic<bool>* abortFlag)
    : rank_(rank),
      nranks_(nranks),
      magic_(magic),
      abortFlag_(abortFlag),
      timeoutMs_(paramInt("BOOTSTRAP_TIMEOUT")),
      peers_(nranks),
      toPeer_(nranks) {}

Bootstrap::~Bootstrap() {
  aborted_.store(true, std::memory_order_release);
  inbox_.reset();  // joins the listener thread
}

void Bootstrap::abort() {
  aborted_.store(true, std::memory_order_release);
  if (inbox_) inbox_->wakeWaiters();
}

std::string Bootstrap::peerLabel(int r) const {
  return "rank " + std::to_string(r) + " at " + peers_[r].toString();
}

ncclResult_t Bootstrap::create(const ncclUniqueId& id, int rank, int nranks,
                               const std::atomic<bool>* abortFlag,
                               std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, kWhere, "out is NULL");
  if (nranks < 1 || nranks > wire::kMaxRanks)
    return fail(ncclInvalidArgument, kWhere, "nranks %d is out of range [1, %d]", nranks,
                wire::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, kWhere, "rank %d is out of range [0, %d)", rank, nranks);
  BootstrapId fields;
  RINGCC_CHECK(bootstrapParseId(id, &fields));
  if (fields.fromCommId && rank == 0) RINGCC_CHECK(startRootAt(fields.root, fields.magic));

  // Listen where the others can reach us: on loopback when the root is (so is everyone),
  // else on the bootstrap interface.
  SocketAddress me;
  if (fields.root.isLoopback()) {
    me = SocketAddress::loopback(fields.root.family());
  } else {
    NetInterface nif;
    RINGCC_CHECK(bootstrapInterface(&nif));
    me = nif.address;
  }
  Socket listener;
  RINGCC_CHECK(Socket::listen(me, &listener));
  me = listener.localAddress();

  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks, fields.magic, abortFlag));
  b->inbox_ = std::make_unique<Inbox>(std::move(listener), fields.magic, rank, nranks,
                                      (rank + nranks - 1) % nranks, b->timeoutMs_);
  RINGCC_CHECK(b->inbox_->start());
  {
    LogRankScope scope(rank);
    RINGCC_CHECK(b->joinRoot(fields.root, me));
    RINGCC_CHECK(b->connectRing());
    LOG_INFO(kLogBootstrap | kLogInit, "bootstrap: rank %d of %d ready, listening on %s", rank,
             nranks, me.toString().c_str());
  }
  *out = std::move(b);
  return ncclSuccess;
}

ncclResult_t Bootstrap::joinRoot(const SocketAddress& root, const SocketAddress& me) {
  const std::string label = "root " + root.toString();
  wire::RootHello hello{magic_, wire::kHello, rank_, nranks_, 0, me.toWire()};
  wire::RootReply reply{};
  WaitLimit lim = limit();
  for (;;) {
    Socket s;
    RINGCC_CHECK(Socket::connect(root, label, lim, &s));
    RINGCC_CHECK(s.sendAll(&hello, sizeof(hello), lim));
    bool closedEarly = false;
    ncclResult_t rc = s.recvAll(&reply, sizeof(reply), lim, &closedEarly);
    if (rc == ncclSuccess) {
      if (reply.magic != magic_)
        return fail(ncclRemoteError, kWhere, "%s answered without the rendezvous magic",
                    label.c_str());
      if (reply.status != wire::kOk)
        return fail(rejectionCode(reply.status), kWhere,
                    "%s refused rank %d of %d: %s (%d of %d ranks had arrived)", label.c_str(),
                    rank_, nranks_, wire::rootStatusText(reply.status), reply.arrived,
                    reply.nranks);
      if (reply.nranks != nranks_)
        return fail(ncclRemoteError, kWhere, "%s answered for %d ranks, not %d", label.c_str(),
                    reply.nranks, nranks_);
      std::vector<WireAddress> table(nranks_);
      RINGCC_CHECK(s.recvAll(table.data(), table.size() * sizeof(WireAddress), lim));
      for (int r = 0; r < nranks_; ++r)
        if (!SocketAddress::fromWire(table[r], &peers_[r]))
          return fail(ncclRemoteError, kWhere, "%s sent a malformed address for rank %d",
                      label.c_str(), r);
      if (!(peers_[rank_] == me))
        return fail(ncclRemoteError, kWhere, "%s lists %s for this rank, which listens on %s",
                    label.c_str(), peers_[rank_].toString().c_str(), me.toString().c_str());
      return ncclSuccess;
    }
    // Closed without a word: the root went away (an NCCL_COMM_ID root of a previous
    // rendezvous closing, or one that stopped). The next one may be on its way: try again.
    if (!closedEarly) return rc;
    if (lim.aborted()) return ncclRemoteError;
    if (lim.expired())
      return fail(ncclRemoteError, kWhere, "%s kept closing the connection for %lld ms",
                  label.c_str(), static_cast<long long>(timeoutMs_));
    LOG_INFO(kLogBootstrap, "bootstrap: %s closed without an answer; connecting again",
             label.c_str());
  }
}

ncclResult_t Bootstrap::connectRing() {
  if (nranks_ == 1) return ncclSuccess;
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  WaitLimit lim = limit();
  RINGCC_CHECK(Socket::connect(peers_[next], peerLabel(next) + " (ring)", lim, &ringNext_));
  wire::PeerHeader h{magic_, wire::kRingHello, rank_, next, 0, 0};
  RINGCC_CHECK(ringNext_.sendAll(&h, sizeof(h), lim));
  RINGCC_CHECK(inbox_->takeRingPrev(lim, &ringPrev_));
  ringPrev_.setLabel(peerLabel(prev) + " (ring)");
  return ncclSuccess;
}

ncclResult_t Bootstrap::allGather(void* buf, size_t bytesPerRank) {
  if (buf == nullptr && bytesPerRank > 0)
    return fail(ncclInvalidArgument, kWhere, "allGather: buf is NULL");
  if (limit().aborted()) return ncclRemoteError;
  if (nranks_ == 1 || bytesPerRank == 0) return ncclSuccess;
  LogRankScope scope(rank_);
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const int32_t seq = ++ringSeq_;
  char* base = static_cast<char*>(buf);
  // Step s: pass on the slot received in step s-1 (own slot first), receive prev's.
  for (int s = 0; s < nranks_ - 1; ++s) {
    const int sendSlot = (rank_ - s + nranks_) % nranks_;
    const int recvSlot = (rank_ - s - 1 + nranks_) % nranks_;
    WaitLimit lim = limit();
    wire::PeerHeader out{magic_, wire::kRingStep, rank_, next, seq, bytesPerRank};
    wire::PeerHeader in{};
    RINGCC_CHECK(exchange(ringNext_, &out, sizeof(out), ringPrev_, &in, sizeof(in), lim));
    if (in.magic != magic_ || in.kind != wire::kRingStep || in.from != prev || in.to != rank_)
      return failPeer(ncclRemoteError, prev, kWhere, "ring link sent a corrupt step header");
    if (in.tag != seq || in.size != bytesPerRank)
      return failPeer(ncclInternalError, prev, kWhere,
                      "ring operations disagree: operation %d with %llu bytes per rank there, "
                      "operation %d with %zu here",
                      in.tag, static_cast<unsigned long long>(in.size), seq, bytesPerRank);
    RINGCC_CHECK(exchange(ringNext_, base + sendSlot * bytesPerRank, bytesPerRank, ringPrev_,
                          base + recvSlot * bytesPerRank, bytesPerRank, lim));
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier() {
  std::vector<char> slots(nranks_, 0);
  return allGather(slots.data(), 1);
}

ncclResult_t Bootstrap::send(int peer, int tag, const void* data, size_t size) {
  return send(peer, tag, data, size, timeoutMs_);
}

ncclResult_t Bootstrap::send(int peer, int tag, const void* data, size_t size, int64_t timeoutMs) {
  if (peer < 0 || peer >= nranks_)
    return fail(ncclInvalidArgument, kWhere, "send: peer %d is out of range [0, %d)", peer,
                nranks_);
  if (data == nullptr && size > 0) return fail(ncclInvalidArgument, kWhere, "send: data is NULL");
  if (size > wire::kMaxMessageBytes)
    return fail(ncclInvalidArgument, kWhere, "send: size %zu exceeds %llu", size,
                static_cast<unsigned long long>(wire::kMaxMessageBytes));
  WaitLimit lim(std::min(timeoutMs, timeoutMs_), abortFlag_, &aborted_);
  if (lim.aborted()) return ncclRemoteError;
  if (peer == rank_) {
    inbox_->putLocal(tag, data, size);
    return ncclSuccess;
  }
  LogRankScope scope(rank_);
  std::lock_guard<std::mutex> lock(sendMu_);
  Socket& s = toPeer_[peer];
  if (!s.valid()) RINGCC_CHECK(Socket::connect(peers_[peer], peerLabel(peer), lim, &s));
  wire::PeerHeader h{magic_, wire::kMessage, rank_, peer, tag, size};
  ncclResult_t rc = s.sendAll(&h, sizeof(h), lim);
  if (rc == ncclSuccess) rc = s.sendAll(data, size, lim);
  if (rc != ncclSuccess) s.close();  // the stream is broken mid-message: never reuse it
  return rc;
}

void Bootstrap::onMessage(int tag,
                          std::function<void(int from, const std::vector<char>& data)> handler) {
  inbox_->setHandler(tag, std::move(handler));
}

std::string Bootstrap::peerEnded(int peer) { return inbox_->senderEnded(peer); }

ncclResult_t Bootstrap::recv(int peer, int tag, void* data, size_t size) {
  return recv(peer, tag, data, size, nullptr, timeoutMs_);
}

ncclResult_t Bootstrap::recv(int peer, int tag, void* data, size_t size,
                             const std::atomic<bool>* stop, int64_t timeoutMs) {
  if (peer < 0 || peer >= nranks_)
    return fail(ncclInvalidArgument, kWhere, "recv: peer %d is out of range [0, %d)", peer,
                nranks_);
  if (data == nullptr && size > 0) return fail(ncclInvalidArgument, kWhere, "recv: data is NULL");
  WaitLimit lim(std::min(timeoutMs, timeoutMs_), abortFlag_, &aborted_, stop);
  if (lim.aborted()) return ncclRemoteError;
  LogRankScope scope(rank_);
  return inbox_->take(peer, tag, data, size, lim);
}

}  // namespace ringcc
