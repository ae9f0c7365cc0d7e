#include "transports/ucx/ucx_rma.h"

#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "transports/proxy/proxy.h"
#include "transports/ucx/ucx_ep_info.h"
#include "transports/ucx/ucx_link.h"  // ucx_worker.h holds UcxLinks: clang needs the type
#include "transports/ucx/ucx_worker.h"

namespace ringcc {

struct UcxRma::Memory {
  ucp_mem_h memh = nullptr;
};

struct UcxRma::RemoteKey {
  ucp_rkey_h rkey = nullptr;  // null once its endpoint was stopped (the key went with it)
  int peer = -1;
};

namespace {

using Clock = std::chrono::steady_clock;

// How long a teardown step (unmap, release, the endpoints' close) waits for the proxy, and how
// long a caller that gave up (NCCL_TIMEOUT, abort) waits for UCX to let go of its buffer.
constexpr auto kCloseWait = std::chrono::seconds(2);
constexpr auto kLetGoWait = std::chrono::seconds(2);
// A waiting caller looks at the abort flag this often.
constexpr auto kAbortLook = std::chrono::milliseconds(10);

// The requests one step of a job posted.
class Requests {
 public:
  // What an _nbx call returned: null (completed at once), an error, or a request.
  void add(ucs_status_ptr_t r) {
    if (r == nullptr) return;
    if (UCS_PTR_IS_ERR(r)) {
      if (failed_ == UCS_OK) failed_ = UCS_PTR_STATUS(r);
      return;
    }
    reqs_.push_back(r);
  }
  bool empty() const { return reqs_.empty() && failed_ == UCS_OK; }
  bool done() const {
    return std::none_of(reqs_.begin(), reqs_.end(),
                        [](void* r) { return ucp_request_check_status(r) == UCS_INPROGRESS; });
  }
  // Once done(): frees them and returns the first failure (UCS_OK if none).
  ucs_status_t finish() {
    for (void* r : reqs_) {
      const ucs_status_t st = ucp_request_check_status(r);
      if (failed_ == UCS_OK && st != UCS_OK) failed_ = st;
      ucp_request_free(r);
    }
    reqs_.clear();
    return std::exchange(failed_, UCS_OK);
  }

 private:
  std::vector<void*> reqs_;
  ucs_status_t failed_ = UCS_OK;
};

// Our endpoint to one peer.
struct PeerEp {
  ucp_ep_h ep = nullptr;             // proxy thread
  std::atomic<int> failure{0};       // the ucs_status_t UCX's error handler reported; 0: none
  std::atomic<bool> stopped{false};  // closed here after a caller gave up on an operation
};

class UcxRmaImpl;

// Work a caller hands to the proxy thread and waits for. Shared by both: a caller that gives
// up leaves it to the proxy, which finishes it.
class Job {
 public:
  explicit Job(const char* what) : what(what) {}
  virtual ~Job() = default;
  // Proxy thread: moves on; true once finished (status then says how). *moved: something
  // was posted or completed.
  virtual bool advance(UcxRmaImpl& rma, bool* moved) = 0;
  // Proxy thread, once, after the caller gave up: make UCX let go of what it holds.
  virtual void stop(UcxRmaImpl&) {}

  ucs_status_t status = UCS_OK;
  const char* what;                  // the step running (or that failed), for messages
  bool finished = false;             // under UcxRmaImpl::mu_
  std::atomic<bool> givenUp{false};  // set by the caller
  bool stopped = false;              // proxy thread
};

// A job done in one call on the proxy thread.
class CallJob final : public Job {
 public:
  CallJob(const char* what, std::function<ucs_status_t()> call)
      : Job(what), call_(std::move(call)) {}
  bool advance(UcxRmaImpl&, bool* moved) override {
    status = call_();
    *moved = true;
    return true;
  }

 private:
  std::function<ucs_status_t()> call_;
};

class UcxRmaImpl final : public UcxRma, public WakeSource {
 public:
  UcxRmaImpl(UcxWorker* worker, int nranks, const std::atomic<bool>* abort, int efd)
      : worker_(worker), abort_(abort), efd_(efd) {
    for (int r = 0; r < nranks; ++r) peers_.push_back(std::make_unique<PeerEp>());
  }
  ~UcxRmaImpl() override;

  std::span<const uint8_t> address() const override { return worker_->address(); }
  ncclResult_t map(void* base, size_t bytes, Memory** out, std::vector<uint8_t>* packed) override;
  void unmap(Memory* memory) override;
  ncclResult_t connect(int peer, std::span<const uint8_t> address, UcxReach* reach,
                       std::string* why) override;
  ncclResult_t unpack(int peer, std::span<const uint8_t> packed, RemoteKey** out) override;
  void release(RemoteKey* key) override;
  ncclResult_t putSignal(int peer, const void* src, size_t bytes, uint64_t to,
                         const RemoteKey* toKey, uint64_t counter, const RemoteKey* counterKey,
                         const char* where) override;
  std::string peerError(int peer) const override;

  // WakeSource (proxy thread).
  bool poll() override;
  int eventFd() override { return efd_; }
  bool arm() override;

  // For jobs (proxy thread).
  UcxWorker& worker() { return *worker_; }
  PeerEp& peer(int r) { return *peers_[static_cast<size_t>(r)]; }
  bool validPeer(int r) const { return r >= 0 && r < static_cast<int>(peers_.size()); }
  // Force-closes the endpoint to r (a caller gave up on it): UCX cancels what is posted on it.
  void stopPeer(int r);
  // The teardown: keys, registrations and endpoints; closingDone() once UCX has let go.
  void closeAll();
  bool closingDone() const { return closing_.done(); }
  static void onEpError(void* arg, ucp_ep_h, ucs_status_t status);

 private:
  enum class Wait { kCall, kTeardown };
  // Queues job and waits until the proxy finished it: a call waits up to NCCL_TIMEOUT and
  // stops at the abort flag; a teardown step (unmap, release, close: they run after an abort
  // too) waits kCloseWait. ncclSuccess if it finished with UCS_OK; else the failure (a WARN,
  // naming the peer if peer >= 0; a teardown step's: ncclSystemError, not logged).
  ncclResult_t run(const std::shared_ptr<Job>& job, int peer, const char* where, Wait wait);
  void ring();  // wakes the proxy for the queue
  void destroyKey(RemoteKey* key);

  UcxWorker* const worker_;
  const std::atomic<bool>* const abort_;
  const int efd_;
  std::vector<std::unique_ptr<PeerEp>> peers_;  // by rank; the objects never move

  std::mutex mu_;
  std::condition_variable done_;
  std::vector<std::shared_ptr<Job>> queued_;  // under mu_

  // Proxy thread only.
  std::vector<std::shared_ptr<Job>> active_;
  std::vector<std::unique_ptr<Memory>> memories_;
  std::vector<std::unique_ptr<RemoteKey>> keys_;
  Requests closing_;  // endpoint closes in flight
};

// ucp_ep_create, then a flush: it completes once the endpoint's wireup with the peer's worker
// is done, so a peer that cannot be reached is found here, and from then on a peer that dies
// closes a connection our worker watches (the error handler: peerError()).
class ConnectJob final : public Job {
 public:
  ConnectJob(int peer, std::span<const uint8_t> address)
      : Job("creating the endpoint"), peer_(peer), address_(address.begin(), address.end()) {}
  bool advance(UcxRmaImpl& rma, bool* moved) override {
    PeerEp& p = rma.peer(peer_);
    if (!posted_) {
      posted_ = true;
      *moved = true;
      if (p.ep != nullptr || p.stopped.load()) {
        status = UCS_ERR_ALREADY_EXISTS;
        return true;
      }
      status = rma.worker().createEndpoint(address_, &UcxRmaImpl::onEpError, &p, &p.ep);
      if (status != UCS_OK) return true;
      what = "the endpoint's wireup (a flush)";
      ucp_request_param_t prm{};
      reqs_.add(ucp_ep_flush_nbx(p.ep, &prm));
    }
    if (!reqs_.done()) return false;
    status = reqs_.finish();
    *moved = true;
    if (status == UCS_OK && p.ep != nullptr) {
      // Wired up: the lanes are the endpoint's final ones now.
      const std::string info = endpointInfo(p.ep);
      reach.rma = lanesServe(info, "rma");
      reach.amo = lanesServe(info, "amo");
      reach.lanes = laneTransports(info);
    }
    return true;
  }
  void stop(UcxRmaImpl& rma) override { rma.stopPeer(peer_); }

  UcxReach reach;  // once finished

 private:
  int peer_;
  std::vector<uint8_t> address_;
  bool posted_ = false;
  Requests reqs_;
};

// The data (ucp_put_nbx) and a flush; then the add (ucp_atomic_op_nbx) and a flush.
class PutJob final : public Job {
 public:
  PutJob(int peer, const void* src, size_t bytes, uint64_t to, ucp_rkey_h toKey, uint64_t counter,
         ucp_rkey_h counterKey)
      : Job("the put"),
        peer_(peer),
        src_(src),
        bytes_(bytes),
        to_(to),
        toKey_(toKey),
        counter_(counter),
        counterKey_(counterKey),
        phase_(bytes > 0 ? 0 : 1) {}
  bool advance(UcxRmaImpl& rma, bool* moved) override {
    for (;;) {
      if (!reqs_.done()) return false;
      if ((status = reqs_.finish()) != UCS_OK) return true;
      if (phase_ == 2) return true;
      ucp_ep_h ep = rma.peer(peer_).ep;
      if (ep == nullptr) {
        status = UCS_ERR_NOT_CONNECTED;  // stopped after an earlier operation was given up
        return true;
      }
      *moved = true;
      ucp_request_param_t prm{};
      if (phase_ == 0) {
        what = "the put of the data and its flush";
        reqs_.add(ucp_put_nbx(ep, src_, bytes_, to_, toKey_, &prm));
      } else {
        what = "the signal's atomic add and its flush";
        ucp_request_param_t amo{};
        amo.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        amo.datatype = ucp_dt_make_contig(sizeof(uint64_t));
        reqs_.add(ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one_, 1, counter_, counterKey_, &amo));
      }
      // Completes once what was posted before it is complete at the peer.
      reqs_.add(ucp_ep_flush_nbx(ep, &prm));
      ++phase_;
    }
  }
  void stop(UcxRmaImpl& rma) override { rma.stopPeer(peer_); }

 private:
  int peer_;
  const void* src_;
  size_t bytes_;
  uint64_t to_;
  ucp_rkey_h toKey_;
  uint64_t counter_;
  ucp_rkey_h counterKey_;
  const uint64_t one_ = 1;  // the atomic's operand, read by UCX until it completes
  int phase_;               // 0: the data next; 1: the add next; 2: waiting for the last flush
  Requests reqs_;
};

// The teardown's: everything closed, then waiting until UCX has finished the closes.
class CloseJob final : public Job {
 public:
  CloseJob() : Job("closing the endpoints") {}
  bool advance(UcxRmaImpl& rma, bool* moved) override {
    if (!closed_) {
      closed_ = true;
      *moved = true;
      rma.closeAll();
    }
    return rma.closingDone();
  }

 private:
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<UcxRma> UcxRma::create(int nranks, const std::atomic<bool>* abort,
                                       std::string* why) {
  UcxWorker* worker = nullptr;
  if (UcxWorker::get(&worker) != ncclSuccess) {
    *why = "UCX could not start (its WARN says why)";
    return nullptr;
  }
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) {
    *why = std::string("eventfd failed: ") + strerror(errno);
    return nullptr;
  }
  auto rma = std::make_unique<UcxRmaImpl>(worker, nranks, abort, efd);
  Proxy::get().addSource(rma.get());
  return rma;
}

namespace {

UcxRmaImpl::~UcxRmaImpl() {
  const bool closed =
      run(std::make_shared<CloseJob>(), -1, "ucx rma", Wait::kTeardown) == ncclSuccess;
  Proxy::get().removeSource(this);  // poll() is not running now, and never runs again
  if (!closed) {
    // UCX may still call an endpoint's error handler, whose argument is its PeerEp: keep them.
    LOG_WARN(
        "ucx rma: the proxy did not close this communicator's endpoints within %lld ms; "
        "leaving them to UCX",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(kCloseWait).count()));
    for (auto& p : peers_) (void)p.release();
  }
  close(efd_);
}

void UcxRmaImpl::ring() {
  const uint64_t one = 1;
  const ssize_t n = write(efd_, &one, sizeof(one));
  (void)n;
}

ncclResult_t UcxRmaImpl::run(const std::shared_ptr<Job>& job, int peer, const char* where,
                             Wait wait) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(job);
  }
  ring();
  const int64_t timeoutMs = paramInt("TIMEOUT");
  const auto limit = wait == Wait::kTeardown
                         ? std::chrono::duration_cast<Clock::duration>(kCloseWait)
                         : std::chrono::duration_cast<Clock::duration>(
                               std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)));
  const auto deadline = Clock::now() + limit;
  std::unique_lock<std::mutex> lock(mu_);
  const char* gaveUp = nullptr;
  while (!job->finished) {
    if (wait == Wait::kCall && abort_ && abort_->load(std::memory_order_relaxed)) {
      gaveUp = "the communicator was aborted";
      break;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      gaveUp = "timed out";
      break;
    }
    done_.wait_until(lock, std::min(deadline, now + kAbortLook));
  }
  if (gaveUp) {
    job->givenUp.store(true);
    lock.unlock();
    ring();
    lock.lock();
    // Until UCX lets go of the caller's buffer: the stop closes the endpoint, which cancels.
    if (!done_.wait_for(lock, kLetGoWait, [&] { return job->finished; }))
      LOG_WARN("ucx rma: %s to rank %d is still held by UCX %lld ms after it was given up",
               job->what, peer,
               static_cast<long long>(
                   std::chrono::duration_cast<std::chrono::milliseconds>(kLetGoWait).count()));
  }
  const ucs_status_t st = job->status;
  const char* what = job->what;
  lock.unlock();
  if (wait == Wait::kTeardown) return gaveUp || st != UCS_OK ? ncclSystemError : ncclSuccess;
  const bool timedOut = gaveUp && std::strcmp(gaveUp, "timed out") == 0;
  if (peer < 0 && gaveUp)
    return fail(timedOut ? ncclSystemError : ncclInvalidUsage, where,
                "UCX did not complete %s: %s (NCCL_TIMEOUT %lld ms)", what, gaveUp,
                static_cast<long long>(timeoutMs));
  if (timedOut)
    return failPeer(ncclRemoteError, peer, where,
                    "UCX did not complete %s to rank %d within NCCL_TIMEOUT (%lld ms); the "
                    "endpoint to it is closed, later one-sided calls to it fail",
                    what, peer, static_cast<long long>(timeoutMs));
  if (gaveUp)
    return failPeer(ncclInvalidUsage, peer, where, "stopped %s to rank %d: %s", what, peer, gaveUp);
  if (st == UCS_OK) return ncclSuccess;
  if (peer < 0)
    return fail(ncclSystemError, where, "UCX failed %s: %s", what, ucs_status_string(st));
  const std::string ended = peerError(peer);
  return failPeer(ncclRemoteError, peer, where, "UCX failed %s to rank %d: %s%s%s", what, peer,
                  ucs_status_string(st), ended.empty() ? "" : "; ", ended.c_str());
}

ncclResult_t UcxRmaImpl::map(void* base, size_t bytes, Memory** out, std::vector<uint8_t>* packed) {
  // The job owns what it makes: a caller that gave up leaves it to the teardown.
  struct Made {
    Memory* memory = nullptr;
    std::vector<uint8_t> packed;
  };
  auto made = std::make_shared<Made>();
  auto job = std::make_shared<CallJob>("registering memory", [this, base, bytes, made] {
    auto m = std::make_unique<Memory>();
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = base;
    mp.length = bytes;
    ucs_status_t st = ucp_mem_map(worker_->context(), &mp, &m->memh);
    if (st != UCS_OK) return st;
    void* key = nullptr;
    size_t keyBytes = 0;
    st = ucp_rkey_pack(worker_->context(), m->memh, &key, &keyBytes);
    if (st != UCS_OK) {
      ucp_mem_unmap(worker_->context(), m->memh);
      return st;
    }
    const auto* k = static_cast<const uint8_t*>(key);
    made->packed.assign(k, k + keyBytes);
    ucp_rkey_buffer_release(key);
    made->memory = m.get();
    memories_.push_back(std::move(m));
    return UCS_OK;
  });
  RINGCC_CHECK(run(job, -1, "ucx rma", Wait::kCall));
  *out = made->memory;
  *packed = std::move(made->packed);
  return ncclSuccess;
}

void UcxRmaImpl::unmap(Memory* memory) {
  if (memory == nullptr) return;
  auto job = std::make_shared<CallJob>("unregistering memory", [this, memory] {
    auto it = std::find_if(memories_.begin(), memories_.end(),
                           [&](const auto& m) { return m.get() == memory; });
    if (it == memories_.end()) return UCS_ERR_INVALID_PARAM;
    const ucs_status_t st = ucp_mem_unmap(worker_->context(), memory->memh);
    memories_.erase(it);
    return st;
  });
  // A teardown step: it runs after an abort too, bounded by kCloseWait.
  if (run(job, -1, "ucx rma", Wait::kTeardown) != ncclSuccess)
    LOG_WARN("ucx rma: unregistering memory did not complete; UCX may keep it registered");
}

ncclResult_t UcxRmaImpl::connect(int peer, std::span<const uint8_t> address, UcxReach* reach,
                                 std::string* why) {
  if (!validPeer(peer) || address.empty()) {
    *why = "no such peer, or no worker address";
    return ncclInvalidArgument;
  }
  auto job = std::make_shared<ConnectJob>(peer, address);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(job);
  }
  ring();
  // Bounded as a call is, but quiet: a peer UCX cannot reach is reached by message instead.
  const auto deadline = Clock::now() + std::chrono::milliseconds(paramInt("TIMEOUT"));
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_.wait_until(lock, deadline, [&] { return job->finished; })) {
    job->givenUp.store(true);
    lock.unlock();
    ring();
    *why = std::string(job->what) + " did not complete within NCCL_TIMEOUT";
    return ncclRemoteError;
  }
  if (job->status == UCS_OK) {
    *reach = job->reach;
    return ncclSuccess;
  }
  *why = std::string(job->what) + " failed: " + ucs_status_string(job->status) + " (" +
         worker_->allowed() + ")";
  return ncclRemoteError;
}

ncclResult_t UcxRmaImpl::unpack(int peer, std::span<const uint8_t> packed, RemoteKey** out) {
  if (!validPeer(peer) || packed.empty())
    return fail(ncclInvalidArgument, "ucx rma", "no key to unpack for rank %d", peer);
  struct Made {
    RemoteKey* key = nullptr;
  };
  auto made = std::make_shared<Made>();
  std::vector<uint8_t> bytes(packed.begin(), packed.end());
  auto job = std::make_shared<CallJob>(
      "unpacking a memory key", [this, peer, made, bytes = std::move(bytes)] {
        ucp_ep_h ep = peers_[static_cast<size_t>(peer)]->ep;
        if (ep == nullptr) return UCS_ERR_NOT_CONNECTED;
        auto k = std::make_unique<RemoteKey>();
        k->peer = peer;
        const ucs_status_t st = ucp_ep_rkey_unpack(ep, bytes.data(), &k->rkey);
        if (st != UCS_OK) return st;
        made->key = k.get();
        keys_.push_back(std::move(k));
        return UCS_OK;
      });
  RINGCC_CHECK(run(job, peer, "ucx rma", Wait::kCall));
  *out = made->key;
  return ncclSuccess;
}

void UcxRmaImpl::destroyKey(RemoteKey* key) {
  if (key->rkey) ucp_rkey_destroy(key->rkey);
  key->rkey = nullptr;
}

void UcxRmaImpl::release(RemoteKey* key) {
  if (key == nullptr) return;
  const int peer = key->peer;  // the job deletes the record
  auto job = std::make_shared<CallJob>("releasing a memory key", [this, key] {
    auto it =
        std::find_if(keys_.begin(), keys_.end(), [&](const auto& k) { return k.get() == key; });
    if (it == keys_.end()) return UCS_ERR_INVALID_PARAM;
    destroyKey(key);
    keys_.erase(it);
    return UCS_OK;
  });
  if (run(job, -1, "ucx rma", Wait::kTeardown) != ncclSuccess)
    LOG_WARN("ucx rma: releasing a key of rank %d's memory did not complete", peer);
}

ncclResult_t UcxRmaImpl::putSignal(int peer, const void* src, size_t bytes, uint64_t to,
                                   const RemoteKey* toKey, uint64_t counter,
                                   const RemoteKey* counterKey, const char* where) {
  if (!validPeer(peer) || counterKey == nullptr || (bytes > 0 && (toKey == nullptr || !src)))
    return fail(ncclInvalidArgument, where, "ucx rma: a put to rank %d without its keys", peer);
  if (peers_[static_cast<size_t>(peer)]->stopped.load())
    return failPeer(ncclRemoteError, peer, where,
                    "the UCX endpoint to rank %d was closed after an earlier one-sided call to "
                    "it was given up",
                    peer);
  // The keys are read on the proxy thread, which alone destroys them (after the caller's
  // release: not while this call runs).
  auto job = std::make_shared<PutJob>(peer, src, bytes, to, bytes > 0 ? toKey->rkey : nullptr,
                                      counter, counterKey->rkey);
  return run(job, peer, where, Wait::kCall);
}

std::string UcxRmaImpl::peerError(int peer) const {
  if (!validPeer(peer)) return "";
  const int st = peers_[static_cast<size_t>(peer)]->failure.load(std::memory_order_acquire);
  if (st == 0) return "";
  return std::string("UCX reported the endpoint failed: ") +
         ucs_status_string(static_cast<ucs_status_t>(st));
}

void UcxRmaImpl::onEpError(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<PeerEp*>(arg)->failure.store(static_cast<int>(status), std::memory_order_release);
}

void UcxRmaImpl::stopPeer(int r) {
  PeerEp& p = peer(r);
  p.stopped.store(true);
  if (p.ep == nullptr) return;
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  prm.flags = UCP_EP_CLOSE_FLAG_FORCE;  // cancels what is posted: UCX lets go of the buffers
  closing_.add(ucp_ep_close_nbx(p.ep, &prm));
  p.ep = nullptr;
  // Its keys go with it (UCX: a key is destroyed before its endpoint is; the records stay
  // for the caller's release()).
  for (auto& k : keys_)
    if (k->peer == r) destroyKey(k.get());
}

void UcxRmaImpl::closeAll() {
  // Keys before the endpoints they were unpacked on; nothing of ours is in flight (the caller
  // is the one thread, and it is here).
  for (auto& k : keys_) destroyKey(k.get());
  keys_.clear();
  for (auto& m : memories_) ucp_mem_unmap(worker_->context(), m->memh);
  memories_.clear();
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
  for (auto& p : peers_) {
    if (p->ep == nullptr) continue;
    closing_.add(ucp_ep_close_nbx(p->ep, &prm));
    p->ep = nullptr;
  }
}

bool UcxRmaImpl::poll() {
  bool moved = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& job : queued_) active_.push_back(std::move(job));
    queued_.clear();
  }
  for (size_t i = 0; i < active_.size();) {
    Job& job = *active_[i];
    if (job.givenUp.load() && !job.stopped) {
      job.stopped = true;
      job.stop(*this);
      moved = true;
    }
    if (!job.advance(*this, &moved)) {
      ++i;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job.finished = true;
    }
    done_.notify_all();
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (!closing_.empty() && closing_.done()) {
    (void)closing_.finish();  // a forced close's status says nothing we act on
    moved = true;
  }
  return moved;
}

bool UcxRmaImpl::arm() {
  uint64_t rung = 0;
  const ssize_t n = read(efd_, &rung, sizeof(rung));  // non-blocking: clears the ring
  (void)n;
  // Jobs in flight wait on UCX, whose events wake the proxy through the worker's fd.
  std::lock_guard<std::mutex> lock(mu_);
  return queued_.empty();
}

}  // namespace

}  // namespace ringcc
