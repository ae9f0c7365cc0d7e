// A rank's listener: the thread that accepts peer connections, checks them, and sorts what
// arrives into the ring link and a queue of tagged messages.
//
// Promises:
//   - A connection must open with a PeerHeader that carries the magic, names this rank as its
//     receiver and a sender in range, within BOOTSTRAP_TIMEOUT; otherwise it is dropped and
//     logged at WARN. Announced sizes above wire::kMaxMessageBytes, or beyond
//     wire::kMaxQueuedBytes of unclaimed messages, drop the connection too. A header that
//     goes bad later (wrong magic, another sender) drops it as well.
//   - Connections are served side by side (poll), so no peer can hold up another.
//   - Messages from one sender are queued in arrival order; take() returns the oldest one
//     with the asked (sender, tag). Once every connection from a sender has ended (closed,
//     broken, or dropped) and nothing of its is queued, take() for it fails at once instead
//     of waiting: nothing more can come.
//   - The thread ends in the destructor (it is woken through an eventfd, not by timeouts).
// Locking: mu_ guards the queue, the per-sender state and the ring handoff; the thread and
// callers of take()/takeRingPrev()/putLocal() share it, and nothing else is locked inside.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/socket.h"

namespace ringcc {

class Inbox {
 public:
  // `listener` is bound and listening; `magic` the rendezvous' magic; connections must be
  // addressed to `rank` of `nranks`; `ringPrev` is the only rank that may open the ring link.
  Inbox(Socket listener, uint64_t magic, int rank, int nranks, int ringPrev, int64_t timeoutMs);
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  ncclResult_t start();
  SocketAddress address() const { return listen_.localAddress(); }

  // Waits for the ring link from ringPrev and hands over its socket.
  ncclResult_t takeRingPrev(const WaitLimit& limit, Socket* out);
  // Copies the oldest message from `from` with `tag` into data. A size other than `size` is
  // an error (the message is consumed).
  ncclResult_t take(int from, int tag, void* data, size_t size, const WaitLimit& limit);
  // Queues a message this rank sends to itself.
  void putLocal(int tag, const void* data, size_t size);
  // Messages with `tag` go to `handler` (called on the listener thread, no lock held; it must
  // not block) instead of the queue: requests nobody waits for with take() (hang reports,
  // posted calls). One handler per tag; an empty handler removes the tag's. A handler may
  // still run, on its copy, after it was replaced: what it uses must outlive that.
  using Handler = std::function<void(int from, const std::vector<char>& data)>;
  void setHandler(int tag, Handler handler);
  // Why the connections from `from` ended, once every one of them has (at least one was
  // opened, none is open now), else "": nothing more can come from that sender, and what it
  // sent before was delivered (handlers included) before its end was noted.
  std::string senderEnded(int from);
  // Wakes waiters in take()/takeRingPrev() so they see an abort flag at once.
  void wakeWaiters() { cv_.notify_all(); }

 private:
  struct Message {
    int from;
    int tag;
    std::vector<char> data;
  };
  struct Conn;

  void run();
  void acceptAll();
  void readConn(Conn& c);
  bool onHeader(Conn& c);  // false: drop the connection
  void deliver(Conn& c);
  void endConn(Conn& c, const char* why, bool warn);

  Socket listen_;
  const uint64_t magic_;
  const int rank_, nranks_, ringPrev_;
  const int64_t timeoutMs_;
  int wakeFd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<Conn> conns_;  // thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  size_t queuedBytes_ = 0;
  std::vector<int> liveConns_;         // per sender: authenticated connections open now
  std::vector<std::string> endedWhy_;  // per sender: why its last connection ended ("" if none)
  Socket ringLink_;
  bool ringLinkSeen_ = false;
  std::string fatal_;                // the thread stopped on an error; every wait fails with this
  std::map<int, Handler> handlers_;  // by tag
};

}  // namespace ringcc
