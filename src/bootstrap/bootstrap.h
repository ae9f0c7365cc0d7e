// Bootstrap: the TCP rendezvous every communicator is created from, and the small setup
// messages exchanged afterwards (address and topology tables, connect info).
//
//   create():  each rank opens its own listener (an Inbox thread), connects to the root named
//              by the unique id, proves the magic and sends {rank, nranks, listen address};
//              the root answers with every rank's address once all nranks arrived. Then
//              the ranks form a ring of sockets: connect to next, accept from prev, each link
//              opened by a header carrying the magic and both ranks.
//
//      rank0 -> rank1 -> rank2 -> ... -> rank(n-1) -> rank0        (ring: allGather, barrier)
//      rank a -> listener of rank b, opened on first send(b, ...)  (tagged messages)
//
// Promises:
//   - Every wait ends within BOOTSTRAP_TIMEOUT (read once, at create) or when the abort flag
//     (the communicator's) or abort() is seen, within kAbortPollMs. A dead peer, a root that
//     never answers or a peer that stalls gives ncclRemoteError naming it; the other ranks of
//     a ring see it within one timeout, not a hang. An abort returns ncclRemoteError.
//   - Nothing read from the network is trusted: see root.h and inbox.h for what is dropped.
//   - Threads: one Bootstrap is used by one thread at a time (its calls are not reentrant),
//     except abort() and send(), which any thread may call (sends are serialized: the hang
//     report's watcher thread sends while the engine may be making connections). Many Bootstraps
//     may live in one process and be created concurrently from several threads (ncclCommInitAll).
//     The destructor stops the listener thread and closes every socket; no thread is left behind.
//   - allGather/barrier must be called by all ranks in the same order with the same sizes
//     (checked: a mismatch is ncclInternalError). Tagged messages between two ranks arrive in
//     send order per tag; recv takes them in any tag order. Tags <= kBootstrapReservedTag
//     are ringcc's own (sub-group creation).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/socket.h"

namespace ringcc {

class Inbox;

inline constexpr int kBootstrapReservedTag = -(1 << 30);

class Bootstrap {
 public:
  // Joins rendezvous `id` as `rank` of `nranks`. With an NCCL_COMM_ID id, rank 0 first starts
  // the root on that address. `abortFlag` (may be null) must outlive the Bootstrap.
  static ncclResult_t create(const ncclUniqueId& id, int rank, int nranks,
                             const std::atomic<bool>* abortFlag, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::atomic<bool>* abortFlag() const { return abortFlag_; }
  int64_t timeoutMs() const { return timeoutMs_; }
  // Where rank r's listener is (its table entry from the root).
  const SocketAddress& listenAddress(int r) const { return peers_[r]; }

  // buf holds nranks slots of bytesPerRank; this rank's slot is filled, the others are
  // filled from the other ranks (ring allgather, in place). Zero bytes: returns at once.
  ncclResult_t allGather(void* buf, size_t bytesPerRank);
  // Returns once every rank has entered the barrier.
  ncclResult_t barrier();
  // A message of `size` bytes (at most wire::kMaxMessageBytes) to `peer` (may be this rank).
  // Returns once it is handed to the peer's socket, not once it is received.
  ncclResult_t send(int peer, int tag, const void* data, size_t size);
  // The same, giving up after timeoutMs when that comes before BOOTSTRAP_TIMEOUT (a peer
  // that may have left: connecting to it retries until the deadline).
  ncclResult_t send(int peer, int tag, const void* data, size_t size, int64_t timeoutMs);
  // The oldest message from `peer` with `tag`; its size must be `size`.
  ncclResult_t recv(int peer, int tag, void* data, size_t size);
  // The same for a caller with its own stop flag and deadline (an engine making connections
  // inside a collective): the wait also ends, with ncclRemoteError, once *stop is set or after
  // timeoutMs when that comes before BOOTSTRAP_TIMEOUT.
  ncclResult_t recv(int peer, int tag, void* data, size_t size, const std::atomic<bool>* stop,
                    int64_t timeoutMs);

  // Messages with `tag` are handed to `handler` on the listener thread as they arrive instead
  // of waiting for recv() (src/trace/hang_report.h, src/exec/call_watch.h). The handler
  // must not block; an empty one removes the tag's (Inbox::setHandler).
  void onMessage(int tag, std::function<void(int from, const std::vector<char>& data)> handler);
  // Why every tagged connection `peer` opened to this rank has ended (its process exited, or
  // it destroyed its communicator), else "" (one is open, or it never sent to this rank).
  std::string peerEnded(int peer);

  // Makes waits in progress (within kAbortPollMs) and every later call return
  // ncclRemoteError.
  void abort();

 private:
  Bootstrap(int rank, int nranks, uint64_t magic, const std::atomic<bool>* abortFlag);
  WaitLimit limit() const { return WaitLimit(timeoutMs_, abortFlag_, &aborted_); }
  ncclResult_t joinRoot(const SocketAddress& root, const SocketAddress& me);
  ncclResult_t connectRing();
  std::string peerLabel(int r) const;

  const int rank_, nranks_;
  const uint64_t magic_;
  const std::atomic<bool>* const abortFlag_;
  const int64_t timeoutMs_;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<Inbox> inbox_;
  std::vector<SocketAddress> peers_;  // listen address by rank
  std::mutex sendMu_;                 // guards toPeer_: send() may come from any thread
  std::vector<Socket> toPeer_;        // tagged-message connections, opened on first send
  Socket ringNext_, ringPrev_;
  int32_t ringSeq_ = 0;  // numbers ring operations, so ranks that disagree are caught
};

}  // namespace ringcc
