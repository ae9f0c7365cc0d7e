#include "src/bootstrap/root.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/wire.h"

namespace ringcc {

namespace wire {
const char* rootStatusText(uint32_t status) {
  switch (status) {
    case kOk:
      return "ok";
    case kBadNranks:
      return "nranks out of range";
    case kNranksMismatch:
      return "nranks differs from the other ranks'";
    case kBadRank:
      return "rank out of range";
    case kDuplicateRank:
      return "another rank already connected with this rank number";
    case kBadAddress:
      return "malformed listen address";
    case kRootTimeout:
      return "the root gave up waiting for the other ranks";
    case kIdConsumed:
      return "this id's rendezvous already completed: an id of ncclCommGetUniqueId is "
             "single-use (call it again for the next grow)";
    default:
      return "unknown status";
  }
}
}  // namespace wire

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kIdleFactor = 10;  // no rank at all for 10 x BOOTSTRAP_TIMEOUT: give up

class RootServer {
 public:
  RootServer(Socket listener, uint64_t magic, bool singleUse)
      : listen_(std::move(listener)),
        magic_(magic),
        timeoutMs_(paramInt("BOOTSTRAP_TIMEOUT")),
        singleUse_(singleUse) {
    listen_.setLabel("root listener " + listen_.localAddress().toString());
  }

  ~RootServer() {
    stop();
    if (thread_.joinable()) thread_.join();
    if (wakeFd_ >= 0) ::close(wakeFd_);
  }

  ncclResult_t start() {
    wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeFd_ < 0)
      return fail(ncclSystemError, "bootstrap root", "eventfd failed: %s", strerror(errno));
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      return fail(ncclSystemError, "bootstrap root", "cannot start the root thread: %s", e.what());
    }
    return ncclSuccess;
  }

  void stop() {
    stop_.store(true, std::memory_order_release);
    if (wakeFd_ >= 0) {
      uint64_t one = 1;
      ssize_t rc = ::write(wakeFd_, &one, sizeof(one));
      (void)rc;
    }
  }

  bool done() const { return done_.load(std::memory_order_acquire); }

  // In a forked child the thread does not exist: close what the parent's root held and
  // never touch the thread object.
  void forgetInChild() {
    listen_.close();
    if (wakeFd_ >= 0) ::close(wakeFd_);
    wakeFd_ = -1;
  }

 private:
  struct Pending {
    Socket sock;
    wire::RootHello hello{};
    size_t got = 0;
    Clock::time_point deadline;
    bool dead = false;
  };

  void run();
  void readHello(Pending& p);
  void accept(Clock::time_point now);
  void reject(Socket& s, uint32_t status);
  void replyAll();
  void giveUp();
  void checkRegistered(int rank);

  Socket listen_;
  uint64_t magic_;
  int64_t timeoutMs_;
  const bool singleUse_;
  int wakeFd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;

  // Thread-only state.
  std::vector<Pending> pending_;
  std::vector<Socket> ranks_;  // by rank; valid once that rank said hello
  std::vector<WireAddress> table_;
  int nranks_ = 0;
  int arrived_ = 0;
  bool completed_ = false;  // a single-use root after its rendezvous: refuses every hello
  Clock::time_point giveUpAt_;
};

void RootServer::accept(Clock::time_point now) {
  for (;;) {
    Socket s;
    if (listen_.tryAccept(&s) != ncclSuccess) {
      // Out of descriptors or similar: the listener stays readable, so pause, not spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(kAbortPollMs));
      return;
    }
    if (!s.valid()) return;
    if (pending_.size() >= wire::kMaxPendingConnections) {
      // The oldest that has sent nothing yet: a rank sends its hello as soon as it connects,
      // so under a flood of silent connections its bytes are waiting, and it must not be
      // dropped before they are read (this loop can accept hundreds first). If every pending
      // one has sent something, the oldest.
      auto live = [](const Pending& p) { return !p.dead; };
      auto oldest = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
        return live(p) && !p.sock.hasBytesWaiting();
      });
      if (oldest == pending_.end()) oldest = std::find_if(pending_.begin(), pending_.end(), live);
      if (oldest != pending_.end()) {
        LOG_WARN("bootstrap root: too many connections without a hello; dropping %s",
                 oldest->sock.label().c_str());
        oldest->dead = true;
      }
    }
    Pending p;
    p.sock = std::move(s);
    p.deadline = now + std::chrono::milliseconds(timeoutMs_);
    pending_.push_back(std::move(p));
  }
}

void RootServer::reject(Socket& s, uint32_t status) {
  wire::RootReply r{magic_, status, nranks_, arrived_, 0};
  // The client has read nothing yet, so this fits in the socket buffer; a short limit keeps
  // a client that does not read from stalling the root.
  (void)s.sendAll(&r, sizeof(r), WaitLimit(100, &stop_));
  s.close();
}

void RootServer::readHello(Pending& p) {
  auto* bytes = reinterpret_cast<char*>(&p.hello);
  size_t got = 0;
  switch (p.sock.recvSome(bytes + p.got, sizeof(p.hello) - p.got, &got)) {
    case IoStatus::kWouldBlock:
      return;
    case IoStatus::kClosed:
    case IoStatus::kError:
      LOG_WARN("bootstrap root: %s closed before a complete hello (%zu of %zu bytes); dropped",
               p.sock.label().c_str(), p.got, sizeof(p.hello));
      p.dead = true;
      return;
    case IoStatus::kProgress:
      p.got += got;
      break;
  }
  if (p.got >= sizeof(uint64_t) && p.hello.magic != magic_) {
    LOG_WARN("bootstrap root: %s sent a wrong magic; dropped", p.sock.label().c_str());
    p.dead = true;
    return;
  }
  if (p.got < sizeof(p.hello)) return;
  p.dead = true;  // from here on the socket is either registered or rejected
  const wire::RootHello& h = p.hello;
  SocketAddress addr;
  if (h.kind != wire::kHello) {
    LOG_WARN("bootstrap root: %s sent kind 0x%x instead of a hello; dropped",
             p.sock.label().c_str(), h.kind);
    return;
  }
  uint32_t status = wire::kOk;
  if (completed_)
    status = wire::kIdConsumed;
  else if (h.nranks < 1 || h.nranks > wire::kMaxRanks)
    status = wire::kBadNranks;
  else if (nranks_ != 0 && h.nranks != nranks_)
    status = wire::kNranksMismatch;
  else if (h.rank < 0 || h.rank >= h.nranks)
    status = wire::kBadRank;
  else if (nranks_ != 0 && ranks_[h.rank].valid())
    status = wire::kDuplicateRank;
  else if (!SocketAddress::fromWire(h.listen, &addr))
    status = wire::kBadAddress;
  if (status != wire::kOk) {
    LOG_WARN("bootstrap root: rejected %s (rank %d, nranks %d): %s", p.sock.label().c_str(), h.rank,
             h.nranks, wire::rootStatusText(status));
    reject(p.sock, status);
    return;
  }
  if (nranks_ == 0) {
    nranks_ = h.nranks;
    ranks_.resize(nranks_);
    table_.resize(nranks_);
  }
  p.sock.setLabel("rank " + std::to_string(h.rank) + " at " + p.sock.peerAddress().toString());
  ranks_[h.rank] = std::move(p.sock);
  table_[h.rank] = h.listen;
  ++arrived_;
  giveUpAt_ = Clock::now() + std::chrono::milliseconds(timeoutMs_);
  LOG_TRACE(kLogBootstrap, "bootstrap root: rank %d of %d arrived (%d so far)", h.rank, nranks_,
            arrived_);
}

// A registered rank must stay silent until it has its table: readable means it closed (it
// gave up or died) or it broke the protocol; either way its slot is free again.
void RootServer::checkRegistered(int rank) {
  char byte;
  size_t got = 0;
  IoStatus st = ranks_[rank].recvSome(&byte, 1, &got);
  if (st == IoStatus::kWouldBlock) return;
  LOG_WARN("bootstrap root: %s %s before the rendezvous completed; waiting for it again",
           ranks_[rank].label().c_str(),
           st == IoStatus::kProgress ? "sent unexpected bytes" : "closed its connection");
  ranks_[rank].close();
  --arrived_;
}

void RootServer::replyAll() {
  wire::RootReply r{magic_, wire::kOk, nranks_, arrived_, 0};
  for (int i = 0; i < nranks_; ++i) {
    WaitLimit limit(timeoutMs_, &stop_);
    if (ranks_[i].sendAll(&r, sizeof(r), limit) != ncclSuccess ||
        ranks_[i].sendAll(table_.data(), table_.size() * sizeof(WireAddress), limit) != ncclSuccess)
      LOG_WARN("bootstrap root: could not send the address table to rank %d", i);
    ranks_[i].close();
  }
  LOG_INFO(kLogBootstrap, "bootstrap root %s: rendezvous of %d ranks complete",
           listen_.localAddress().toString().c_str(), nranks_);
}

void RootServer::giveUp() {
  if (completed_) {
    LOG_INFO(kLogBootstrap, "bootstrap root %s: single-use rendezvous done; closing",
             listen_.localAddress().toString().c_str());
    return;
  }
  if (nranks_ == 0) {
    LOG_INFO(kLogBootstrap, "bootstrap root %s: no rank came within %lld ms; closing",
             listen_.localAddress().toString().c_str(),
             static_cast<long long>(kIdleFactor * timeoutMs_));
    return;
  }
  std::string missing;
  int shown = 0;
  for (int i = 0; i < nranks_ && shown < 8; ++i)
    if (!ranks_[i].valid()) missing += (shown++ ? "," : "") + std::to_string(i);
  if (nranks_ - arrived_ > shown) missing += ",...";
  fail(ncclRemoteError, "bootstrap root",
       "gave up after %lld ms without a new rank: %d of %d ranks arrived (missing %s)",
       static_cast<long long>(timeoutMs_), arrived_, nranks_, missing.c_str());
  for (Socket& s : ranks_)
    if (s.valid()) reject(s, wire::kRootTimeout);
}

void RootServer::run() {
  giveUpAt_ = Clock::now() + std::chrono::milliseconds(kIdleFactor * timeoutMs_);
  std::vector<pollfd> fds;
  while (!stop_.load(std::memory_order_acquire)) {
    Clock::time_point now = Clock::now();
    if (now >= giveUpAt_) {
      giveUp();
      break;
    }
    Clock::time_point wake = giveUpAt_;
    fds.clear();
    fds.push_back({listen_.fd(), POLLIN, 0});
    fds.push_back({wakeFd_, POLLIN, 0});
    for (const Pending& p : pending_) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    for (const Socket& s : ranks_)
      if (s.valid()) fds.push_back({s.fd(), POLLIN, 0});
    auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(waitMs, 0, 1000)));
    if (rc < 0 && errno != EINTR) {
      fail(ncclSystemError, "bootstrap root", "poll failed: %s", strerror(errno));
      break;
    }
    if (rc > 0) {
      if (fds[1].revents) break;  // stop() was called
      size_t k = 2;
      const size_t npending = pending_.size();
      for (size_t i = 0; i < npending; ++i, ++k)
        if (fds[k].revents) readHello(pending_[i]);
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        // Ranks registered in this round were not polled: they have no entry.
        if (k < fds.size() && ranks_[r].valid() && fds[k].fd == ranks_[r].fd()) {
          if (fds[k].revents) checkRegistered(r);
          ++k;
        }
      }
      if (fds[0].revents) accept(Clock::now());
    }
    now = Clock::now();
    for (Pending& p : pending_) {
      if (!p.dead && now >= p.deadline) {
        LOG_WARN("bootstrap root: %s sent no complete hello within %lld ms; dropped",
                 p.sock.label().c_str(), static_cast<long long>(timeoutMs_));
        p.dead = true;
      }
    }
    std::erase_if(pending_, [](const Pending& p) { return p.dead; });
    if (!completed_ && nranks_ > 0 && arrived_ == nranks_) {
      replyAll();
      if (!singleUse_) break;
      // Stay to refuse the id's second use (a late or repeated grow) with a clear status.
      completed_ = true;
      ranks_.clear();
      giveUpAt_ = Clock::now() + std::chrono::milliseconds(kIdleFactor * timeoutMs_);
    }
  }
  pending_.clear();
  ranks_.clear();
  listen_.close();
  done_.store(true, std::memory_order_release);
}

// ---- registry ----------------------------------------------------------------------------

class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }

  ~Registry() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : servers_) s->stop();
    servers_.clear();  // joins
  }

  ncclResult_t add(std::unique_ptr<RootServer> server) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(servers_, [](const std::unique_ptr<RootServer>& s) { return s->done(); });
    RINGCC_CHECK(server->start());
    servers_.push_back(std::move(server));
    return ncclSuccess;
  }

  size_t running() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(servers_.begin(), servers_.end(),
                         [](const std::unique_ptr<RootServer>& s) { return !s->done(); });
  }

 private:
  Registry() { pthread_atfork(&prepare, &parent, &child); }

  static void prepare() { get().mu_.lock(); }
  static void parent() { get().mu_.unlock(); }
  static void child() {
    Registry& r = get();
    for (auto& s : r.servers_) {
      s->forgetInChild();
      (void)s.release();  // its thread is the parent's: never join or destroy it here
    }
    r.servers_.clear();
    r.mu_.unlock();
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<RootServer>> servers_;
};

}  // namespace

ncclResult_t startRoot(Socket listener, uint64_t magic, bool singleUse) {
  LOG_INFO(kLogBootstrap, "bootstrap: %sroot listening on %s", singleUse ? "single-use " : "",
           listener.localAddress().toString().c_str());
  return Registry::get().add(std::make_unique<RootServer>(std::move(listener), magic, singleUse));
}

ncclResult_t startRootAt(const SocketAddress& addr, uint64_t magic) {
  WaitLimit limit(paramInt("BOOTSTRAP_TIMEOUT"));
  Socket listener;
  for (;;) {
    int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return fail(ncclSystemError, "bootstrap", "socket() for the root failed: %s",
                  strerror(errno));
    Socket s(fd);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, addr.sockaddrPtr(), addr.length()) == 0) {
      if (::listen(fd, SOMAXCONN) != 0)
        return fail(ncclSystemError, "bootstrap", "listen() on NCCL_COMM_ID %s failed: %s",
                    addr.toString().c_str(), strerror(errno));
      listener = std::move(s);
      break;
    }
    int err = errno;
    if (err != EADDRINUSE || limit.expired())
      return fail(ncclSystemError, "bootstrap", "cannot bind the root to NCCL_COMM_ID %s: %s",
                  addr.toString().c_str(), strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(limit.pollMs()));
  }
  return startRoot(std::move(listener), magic);
}

size_t runningRoots() { return Registry::get().running(); }

}  // namespace ringcc
