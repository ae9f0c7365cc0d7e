// The impure half of the hang report (hang_report.h): the process's watcher thread, the
// SIGUSR1 handler and the messages between ranks.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "src/base/log.h"
#include "src/base/process_local.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "src/core/live_comms.h"
#include "src/monitor/hang_watcher.h"
#include "src/trace/hang_report.h"

namespace ringcc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagHangReport = kBootstrapReservedTag - 2;  // -1: sub-groups
constexpr uint32_t kHangMagic = 0x48414e47;                // "HANG"

enum class Reason : uint32_t { Signal = 1, Timeout = 2 };

const char* reasonText(Reason r) { return r == Reason::Timeout ? "NCCL_TIMEOUT" : "SIGUSR1"; }

// What ranks tell each other: the request it answers and the sender's state.
struct HangMsg {
  uint32_t magic;
  uint32_t reason;
  uint64_t commHash;
  uint64_t request;  // numbered by the origin
  int32_t origin;    // the rank that asked
  int32_t rank;      // the sender
  uint64_t firstSeq, lastSeq;
  OpSig sig;
  uint32_t inCall;
  uint32_t pad;
};
static_assert(std::is_trivially_copyable_v<HangMsg>);

// The byte the signal handler writes (any other byte: a message is queued).
constexpr char kSignalByte = 's';
std::atomic<int> gSignalFd{-1};

void onSigusr1(int) {
  const int fd = gSignalFd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const int saved = errno;
    ssize_t rc = ::write(fd, &kSignalByte, 1);
    (void)rc;
    errno = saved;
  }
}

struct Item {
  ncclComm* comm;
  HangMsg msg;
  bool local;                               // asked on this rank (signal or timeout)
  std::shared_ptr<std::atomic<bool>> done;  // set once this rank logged the report
  bool forget = false;                      // the communicator goes away: conclude its reports
};

// A report this rank takes part in, until every rank answered or the window closed.
struct Pending {
  uint64_t commHash;
  int rank, nranks, origin;
  Reason reason;
  bool abandoned = false;  // the communicator went away before every rank answered
  std::vector<RankCall> ranks;
  Clock::time_point deadline;
  std::vector<std::shared_ptr<std::atomic<bool>>> done;
};

class Watcher {
 public:
  // The process's watcher, started on first use (and again in a forked child:
  // src/base/process_local.h).
  static Watcher& get() {
    static ProcessLocal<Watcher> current;
    return *current.get([] { return new Watcher(); });  // never freed
  }

  void watch(ncclComm* comm) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(comm);
  }
  void unwatch(ncclComm* comm) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
    }
    // Answers to its reports can no longer arrive (its listener goes with it): log them now.
    Item item{comm, HangMsg{}, true, nullptr};
    item.forget = true;
    post(std::move(item));
  }
  void post(Item item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(item));
    }
    const char byte = 'm';
    ssize_t rc = ::write(pipe_[1], &byte, 1);
    (void)rc;
  }

 private:
  Watcher() {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      LOG_WARN("hang report: cannot make the watcher's pipe: %s; no hang reports", strerror(errno));
      pipe_[0] = pipe_[1] = -1;
      return;
    }
    struct sigaction old {};
    sigaction(SIGUSR1, nullptr, &old);
    // Ours already when a forked child starts its own watcher: point it at the new pipe.
    if (!(old.sa_flags & SA_SIGINFO) &&
        (old.sa_handler == SIG_DFL || old.sa_handler == onSigusr1)) {
      gSignalFd.store(pipe_[1]);
      struct sigaction sa {};
      sa.sa_handler = onSigusr1;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      sigaction(SIGUSR1, &sa, nullptr);
    } else {
      LOG_INFO(kLogInit, "hang report: SIGUSR1 has a handler already; reports on signal are off");
    }
    std::thread([this] { run(); }).detach();
  }

  void run() {
    while (true) {
      int timeoutMs = -1;
      if (!pending_.empty()) {
        auto next = Clock::time_point::max();
        for (auto& [key, p] : pending_) next = std::min(next, p.deadline);
        timeoutMs = static_cast<int>(std::clamp<int64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1,
            0, kAnswerWindowMs));
      }
      pollfd pfd{pipe_[0], POLLIN, 0};
      ::poll(&pfd, 1, timeoutMs);
      bool signalled = false;
      char buf[64];
      ssize_t got;
      while ((got = ::read(pipe_[0], buf, sizeof(buf))) > 0)
        signalled |= std::find(buf, buf + got, kSignalByte) != buf + got;
      if (signalled) askAll();
      std::deque<Item> items;
      {
        std::lock_guard<std::mutex> lock(mu_);
        items.swap(queue_);
      }
      for (Item& item : items) handle(item);
      expire();
    }
  }

  // SIGUSR1: a new report on every communicator of this process.
  void askAll() {
    std::vector<ncclComm*> comms;
    {
      std::lock_guard<std::mutex> lock(mu_);
      comms = comms_;
    }
    for (ncclComm* comm : comms) handle(localItem(comm, Reason::Signal, nullptr));
  }

 public:
  Item localItem(ncclComm* comm, Reason reason, std::shared_ptr<std::atomic<bool>> done) {
    Item item{comm, HangMsg{}, true, std::move(done)};
    item.msg.reason = static_cast<uint32_t>(reason);
    item.msg.request = ++requests_;
    return item;
  }

 private:
  using Key = std::tuple<const ncclComm*, int, uint64_t>;  // (comm, origin, request)

  void handle(const Item& item) {
    if (item.forget) {
      for (auto it = pending_.begin(); it != pending_.end();) {
        auto next = std::next(it);
        if (std::get<0>(it->first) == item.comm) {
          it->second.abandoned = true;
          finish(it);
        }
        it = next;
      }
      return;
    }
    ApiGuard guard;  // the communicator stays alive while we use it
    if (!guard.tryEnter(item.comm)) return;
    ncclComm* comm = item.comm;
    if (comm->bootstrap == nullptr || comm->nranks < 1) return;
    HangMsg m = item.msg;
    if (item.local) {
      m.origin = comm->rank;
      m.rank = comm->rank;
      m.commHash = comm->commHash;
    } else if (m.magic != kHangMagic || m.commHash != comm->commHash || m.rank < 0 ||
               m.rank >= comm->nranks || m.origin < 0 || m.origin >= comm->nranks) {
      return;  // not for this communicator (a freed one's address reused), or garbled
    }
    if (item.local && static_cast<Reason>(m.reason) == Reason::Timeout && joinTimeout(item)) return;
    const Key key{comm, m.origin, m.request};
    if (std::find(finished_.begin(), finished_.end(), key) != finished_.end()) return;
    auto it = pending_.find(key);
    if (it == pending_.end()) it = join(comm, key, m);
    Pending& p = it->second;
    if (item.done) p.done.push_back(item.done);
    if (!item.local) {
      RankCall& r = p.ranks[m.rank];
      r.answered = true;
      r.call.inCall = m.inCall != 0;
      r.call.firstSeq = m.firstSeq;
      r.call.lastSeq = m.lastSeq;
      r.call.sig = m.sig;
    }
    if (std::all_of(p.ranks.begin(), p.ranks.end(), [](const RankCall& r) { return r.answered; }))
      finish(it);
  }

  // Ranks that time out in one call do so within moments of each other: a timeout in a call
  // that a report (another rank's timeout) covers already waits for that report instead of
  // starting one more. True if it did.
  bool joinTimeout(const Item& item) {
    const uint64_t seq = item.comm->calls.snapshot().lastSeq;
    for (auto& [key, p] : pending_) {
      if (std::get<0>(key) == item.comm && p.reason == Reason::Timeout &&
          p.ranks[p.rank].call.lastSeq == seq) {
        if (item.done) p.done.push_back(item.done);
        return true;
      }
    }
    for (const auto& [comm, doneSeq] : timeoutsLogged_) {
      if (comm == item.comm && doneSeq == seq) {
        if (item.done) item.done->store(true);
        return true;
      }
    }
    return false;
  }

  // This rank's part of a report it hears of first: its state to every other rank, its
  // engine's lanes into the log.
  std::map<Key, Pending>::iterator join(ncclComm* comm, const Key& key, const HangMsg& asked) {
    Pending p;
    p.commHash = comm->commHash;
    p.rank = comm->rank;
    p.nranks = comm->nranks;
    p.origin = asked.origin;
    p.reason = static_cast<Reason>(asked.reason);
    p.ranks.resize(comm->nranks);
    p.deadline = Clock::now() + std::chrono::milliseconds(kAnswerWindowMs);
    const CallSnapshot mine = comm->calls.snapshot();
    p.ranks[comm->rank] = RankCall{true, mine};
    LogRankScope scope(comm->rank);
    LOG_REPORT("hang report %016llx.%d (%s on rank %d): rank %d is %s",
               static_cast<unsigned long long>(p.commHash), p.origin, reasonText(p.reason),
               p.origin, p.rank, describeRankCall(p.ranks[p.rank]).c_str());
    if (mine.inCall) comm->calls.askLanes();
    HangMsg m{};
    m.magic = kHangMagic;
    m.reason = asked.reason;
    m.commHash = comm->commHash;
    m.request = asked.request;
    m.origin = asked.origin;
    m.rank = comm->rank;
    m.firstSeq = mine.firstSeq;
    m.lastSeq = mine.lastSeq;
    m.sig = mine.sig;
    m.inCall = mine.inCall ? 1 : 0;
    for (int r = 0; r < comm->nranks; ++r) {
      if (r == comm->rank) continue;
      if (comm->bootstrap->send(r, kTagHangReport, &m, sizeof(m)) != ncclSuccess)
        LOG_REPORT("hang report: cannot reach rank %d", r);
    }
    return pending_.emplace(key, std::move(p)).first;
  }

  void finish(std::map<Key, Pending>::iterator it) {
    const Pending& p = it->second;
    LogRankScope scope(p.rank);
    const unsigned long long hash = p.commHash;
    LOG_REPORT("hang report %016llx.%d (%s on rank %d), as rank %d of %d sees it:", hash, p.origin,
               reasonText(p.reason), p.origin, p.rank, p.nranks);
    for (int r = 0; r < p.nranks; ++r)
      LOG_REPORT("hang report:   rank %d: %s", r, describeRankCall(p.ranks[r]).c_str());
    const std::vector<std::string> findings = hangFindings(p.ranks);
    for (const std::string& f : findings) LOG_REPORT("hang report: => %s", f.c_str());
    if (findings.empty()) LOG_REPORT("hang report: => the ranks agree; none is waiting");
    if (p.abandoned)
      LOG_REPORT(
          "hang report: (concluded when this rank's communicator was destroyed or "
          "aborted: later answers could not arrive)");
    for (auto& d : p.done) d->store(true);
    finished_.push_back(it->first);
    if (finished_.size() > 256) finished_.erase(finished_.begin());
    if (p.reason == Reason::Timeout) {
      timeoutsLogged_.emplace_back(std::get<0>(it->first), p.ranks[p.rank].call.lastSeq);
      if (timeoutsLogged_.size() > 64) timeoutsLogged_.erase(timeoutsLogged_.begin());
    }
    pending_.erase(it);
  }

  void expire() {
    const auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->second.deadline <= now) finish(it);
      it = next;
    }
  }

  int pipe_[2] = {-1, -1};
  std::mutex mu_;                 // guards comms_ and queue_
  std::vector<ncclComm*> comms_;  // watched: the ones a signal reports on
  std::deque<Item> queue_;
  // The watcher thread's own.
  std::map<Key, Pending> pending_;
  std::vector<Key> finished_;  // reports logged: late answers to them are dropped
  std::vector<std::pair<const ncclComm*, uint64_t>> timeoutsLogged_;  // (comm, call) reported
  std::atomic<uint64_t> requests_{0};
};

}  // namespace

namespace {

// No longer watched (before its bootstrap goes away); its reports still waiting for answers
// are logged with the answers they have.
void unwatchComm(ncclComm* comm) { Watcher::get().unwatch(comm); }

}  // namespace

void watchComm(ncclComm* comm) {
  Watcher& w = Watcher::get();
  comm->bootstrap->onMessage(kTagHangReport, [comm, &w](int from, const std::vector<char>& data) {
    if (data.size() != sizeof(HangMsg)) return;
    Item item{comm, HangMsg{}, false, nullptr};
    std::memcpy(&item.msg, data.data(), sizeof(HangMsg));
    if (item.msg.rank != from) return;
    w.post(std::move(item));
  });
  w.watch(comm);
  comm->unwatch = &unwatchComm;
}

void reportHangNow(ncclComm* comm) {
  Watcher& w = Watcher::get();
  auto done = std::make_shared<std::atomic<bool>>(false);
  w.post(w.localItem(comm, Reason::Timeout, done));
  const auto until = Clock::now() + std::chrono::milliseconds(kTimeoutWaitMs);
  while (!done->load() && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace ringcc
