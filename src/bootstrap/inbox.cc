#include "src/bootstrap/inbox.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/bootstrap/wire.h"

namespace ringcc {
namespace {
using Clock = std::chrono::steady_clock;
constexpr int kReadsPerRound = 16;  // per connection and poll round: keeps the others served

}  // namespace

struct Inbox::Conn {
  Socket sock;
  wire::PeerHeader hdr{};
  size_t hdrGot = 0;
  bool authed = false;  // its first header was good: it speaks for rank `from`
  int from = -1;
  bool inPayload = false;
  std::vector<char> payload;
  size_t payloadGot = 0;
  Clock::time_point deadline = Clock::time_point::max();  // max: idle between messages
  bool dead = false;
};

Inbox::Inbox(Socket listener, uint64_t magic, int rank, int nranks, int ringPrev, int64_t timeoutMs)
    : listen_(std::move(listener)),
      magic_(magic),
      rank_(rank),
      nranks_(nranks),
      ringPrev_(ringPrev),
      timeoutMs_(timeoutMs),
      liveConns_(nranks, 0),
      endedWhy_(nranks) {}

Inbox::~Inbox() {
  stop_.store(true, std::memory_order_release);
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    ssize_t rc = ::write(wakeFd_, &one, sizeof(one));
    (void)rc;
  }
  if (thread_.joinable()) thread_.join();
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

ncclResult_t Inbox::start() {
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) return fail(ncclSystemError, "bootstrap", "eventfd failed: %s", strerror(errno));
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return fail(ncclSystemError, "bootstrap", "cannot start the listener thread: %s", e.what());
  }
  return ncclSuccess;
}

// ---- caller side -------------------------------------------------------------------------

ncclResult_t Inbox::takeRingPrev(const WaitLimit& limit, Socket* out) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (ringLink_.valid()) {
      *out = std::move(ringLink_);
      return ncclSuccess;
    }
    if (!fatal_.empty())
      return fail(ncclSystemError, "bootstrap", "listener failed: %s", fatal_.c_str());
    if (limit.aborted()) {
      LOG_INFO(kLogBootstrap, "bootstrap: wait for the ring link aborted");
      return ncclRemoteError;
    }
    if (limit.expired())
      return failPeer(ncclRemoteError, ringPrev_, "bootstrap",
                      "ring link from the previous rank did not arrive within %lld ms",
                      static_cast<long long>(limit.timeoutMs()));
    cv_.wait_for(lock, std::chrono::milliseconds(limit.pollMs()));
  }
}

ncclResult_t Inbox::take(int from, int tag, void* data, size_t size, const WaitLimit& limit) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const Message& m) { return m.from == from && m.tag == tag; });
    if (it != queue_.end()) {
      Message m = std::move(*it);
      queue_.erase(it);
      queuedBytes_ -= m.data.size();
      lock.unlock();
      if (m.data.size() != size)
        return failPeer(ncclInternalError, from, "bootstrap",
                        "message with tag %d has %zu bytes, the receiver expects %zu", tag,
                        m.data.size(), size);
      if (size > 0) std::memcpy(data, m.data.data(), size);
      return ncclSuccess;
    }
    if (from != rank_ && liveConns_[from] == 0 && !endedWhy_[from].empty())
      return failPeer(ncclRemoteError, from, "bootstrap",
                      "no message with tag %d: the peer's connection %s", tag,
                      endedWhy_[from].c_str());
    if (!fatal_.empty())
      return fail(ncclSystemError, "bootstrap", "listener failed: %s", fatal_.c_str());
    if (limit.aborted()) {
      LOG_INFO(kLogBootstrap, "bootstrap: receive from rank %d aborted", from);
      return ncclRemoteError;
    }
    if (limit.expired())
      return failPeer(ncclRemoteError, from, "bootstrap",
                      "no message with tag %d (%zu bytes) within %lld ms", tag, size,
                      static_cast<long long>(limit.timeoutMs()));
    cv_.wait_for(lock, std::chrono::milliseconds(limit.pollMs()));
  }
}

void Inbox::putLocal(int tag, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({rank_, tag, std::vector<char>(p, p + size)});
  queuedBytes_ += size;
  cv_.notify_all();
}

// ---- listener thread ---------------------------------------------------------------------

std::string Inbox::senderEnded(int from) {
  std::lock_guard<std::mutex> lock(mu_);
  if (from < 0 || from >= nranks_ || liveConns_[from] != 0) return "";
  return endedWhy_[from];
}

void Inbox::endConn(Conn& c, const char* why, bool warn) {
  if (warn) LOG_WARN("bootstrap rank %d: %s %s; dropped", rank_, c.sock.label().c_str(), why);
  c.dead = true;
  c.sock.close();
  if (c.authed) {
    std::lock_guard<std::mutex> lock(mu_);
    --liveConns_[c.from];
    endedWhy_[c.from] = why;
    cv_.notify_all();
  }
}

void Inbox::acceptAll() {
  for (;;) {
    Socket s;
    if (listen_.tryAccept(&s) != ncclSuccess) {
      // Out of descriptors or similar: the listener stays readable, so pause, not spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(kAbortPollMs));
      return;
    }
    if (!s.valid()) return;
    size_t pending = std::count_if(conns_.begin(), conns_.end(),
                                   [](const Conn& c) { return !c.dead && !c.authed; });
    if (pending >= wire::kMaxPendingConnections) {
      // Drop the oldest connection that has sent nothing yet: a rank sends its header as soon
      // as it connects, so under a flood of silent connections the peer's is the one with
      // bytes waiting, and it must not be dropped before the loop reads them (this loop can
      // accept hundreds before that). Only if every pending one has sent something, the oldest.
      Conn* victim = nullptr;
      for (Conn& c : conns_) {
        if (c.dead || c.authed) continue;
        if (victim == nullptr) victim = &c;
        if (!c.sock.hasBytesWaiting()) {
          victim = &c;
          break;
        }
      }
      if (victim) endConn(*victim, "is one of too many connections without a header", true);
    }
    Conn c;
    c.sock = std::move(s);
    c.deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
    conns_.push_back(std::move(c));
  }
}

bool Inbox::onHeader(Conn& c) {
  const wire::PeerHeader& h = c.hdr;
  if (h.magic != magic_) {
    endConn(c, c.authed ? "sent a header with a wrong magic" : "sent a wrong magic", true);
    return false;
  }
  if (h.to != rank_ || h.from < 0 || h.from >= nranks_ || h.from == rank_) {
    LOG_WARN("bootstrap rank %d: %s claims to be rank %d writing to rank %d", rank_,
             c.sock.label().c_str(), h.from, h.to);
    endConn(c, "sent a header with bad ranks", true);
    return false;
  }
  if (c.authed && (h.from != c.from || h.kind != wire::kMessage)) {
    endConn(c, "sent a header that does not belong on its connection", true);
    return false;
  }
  if (!c.authed && h.kind == wire::kRingHello) {
    std::lock_guard<std::mutex> lock(mu_);
    if (h.from != ringPrev_ || ringLinkSeen_ || h.size != 0) {
      LOG_WARN("bootstrap rank %d: unexpected ring link from rank %d (%s); dropped", rank_, h.from,
               c.sock.label().c_str());
      c.dead = true;
      c.sock.close();
      return false;
    }
    c.sock.setLabel("rank " + std::to_string(h.from) + " at " + c.sock.peerAddress().toString() +
                    " (ring)");
    ringLink_ = std::move(c.sock);
    ringLinkSeen_ = true;
    c.dead = true;  // the socket now belongs to the ring
    cv_.notify_all();
    return false;
  }
  if (h.kind != wire::kMessage) {
    endConn(c, "sent an unknown header kind", true);
    return false;
  }
  if (h.size > wire::kMaxMessageBytes) {
    LOG_WARN("bootstrap rank %d: %s announced an oversized message (%llu bytes, limit %llu)", rank_,
             c.sock.label().c_str(), static_cast<unsigned long long>(h.size),
             static_cast<unsigned long long>(wire::kMaxMessageBytes));
    endConn(c, "announced an oversized message", true);
    return false;
  }
  bool overLimit;
  {
    std::lock_guard<std::mutex> lock(mu_);
    overLimit = queuedBytes_ + h.size > wire::kMaxQueuedBytes;
    if (!c.authed) {
      c.authed = true;
      c.from = h.from;
      ++liveConns_[c.from];
      endedWhy_[c.from].clear();
    }
  }
  if (overLimit) {
    LOG_WARN("bootstrap rank %d: unclaimed messages would exceed %llu bytes", rank_,
             static_cast<unsigned long long>(wire::kMaxQueuedBytes));
    endConn(c, "exceeded the limit of unclaimed messages", true);
    return false;
  }
  c.sock.setLabel("rank " + std::to_string(c.from) + " at " + c.sock.peerAddress().toString());
  c.payload.assign(h.size, 0);
  c.payloadGot = 0;
  c.inPayload = true;
  c.deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
  if (h.size == 0) deliver(c);
  return true;
}

void Inbox::setHandler(int tag, Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  if (handler)
    handlers_[tag] = std::move(handler);
  else
    handlers_.erase(tag);
}

void Inbox::deliver(Conn& c) {
  Handler handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = handlers_.find(c.hdr.tag); it != handlers_.end()) handler = it->second;
  }
  if (handler) {
    handler(c.from, c.payload);  // outside the lock: it may post to another thread
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    queuedBytes_ += c.payload.size();
    queue_.push_back({c.from, c.hdr.tag, std::move(c.payload)});
    cv_.notify_all();
  }
  c.payload.clear();
  c.inPayload = false;
  c.hdrGot = 0;
  c.deadline = Clock::time_point::max();
}

void Inbox::readConn(Conn& c) {
  for (int round = 0; round < kReadsPerRound && !c.dead; ++round) {
    char* dst;
    size_t want;
    if (c.inPayload) {
      dst = c.payload.data() + c.payloadGot;
      want = c.payload.size() - c.payloadGot;
    } else {
      dst = reinterpret_cast<char*>(&c.hdr) + c.hdrGot;
      want = sizeof(c.hdr) - c.hdrGot;
    }
    size_t got = 0;
    switch (c.sock.recvSome(dst, want, &got)) {
      case IoStatus::kWouldBlock:
        return;
      case IoStatus::kClosed: {
        if (!c.authed)
          endConn(c, "was closed before a complete header", true);
        else if (!c.inPayload && c.hdrGot == 0)
          endConn(c, "was closed", false);
        else
          endConn(c, "was closed in the middle of a message", true);
        return;
      }
      case IoStatus::kError:
        endConn(c, "failed", true);
        return;
      case IoStatus::kProgress:
        break;
    }
    if (c.inPayload) {
      c.payloadGot += got;
      if (c.payloadGot == c.payload.size()) deliver(c);
      continue;
    }
    if (c.hdrGot == 0 && c.authed)
      c.deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
    c.hdrGot += got;
    // Check the magic as soon as it is in, so garbage is dropped without waiting for more.
    if (c.hdrGot >= sizeof(uint64_t) && c.hdr.magic != magic_) {
      endConn(c, c.authed ? "sent a header with a wrong magic" : "sent a wrong magic", true);
      return;
    }
    if (c.hdrGot == sizeof(c.hdr) && !onHeader(c)) return;
  }
}

void Inbox::run() {
  std::vector<pollfd> fds;
  while (!stop_.load(std::memory_order_acquire)) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake = now + std::chrono::seconds(1);
    fds.clear();
    fds.push_back({listen_.fd(), POLLIN, 0});
    fds.push_back({wakeFd_, POLLIN, 0});
    for (const Conn& c : conns_) {
      fds.push_back({c.sock.fd(), POLLIN, 0});
      wake = std::min(wake, c.deadline);
    }
    auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(waitMs, 0, 1000)));
    if (rc < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = std::string("poll failed: ") + strerror(errno);
      LOG_WARN("bootstrap rank %d: listener %s", rank_, fatal_.c_str());
      cv_.notify_all();
      break;
    }
    if (rc > 0) {
      if (fds[1].revents) break;  // destructor
      const size_t n = conns_.size();
      for (size_t i = 0; i < n; ++i)
        if (fds[i + 2].revents) readConn(conns_[i]);
      if (fds[0].revents) acceptAll();
    }
    now = Clock::now();
    for (Conn& c : conns_) {
      if (c.dead || now < c.deadline) continue;
      endConn(c, c.authed ? "stalled in the middle of a message" : "sent no header in time", true);
    }
    std::erase_if(conns_, [](const Conn& c) { return c.dead; });
  }
  conns_.clear();
}

}  // namespace ringcc
