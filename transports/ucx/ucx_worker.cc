#include "transports/ucx/ucx_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/base/process_local.h"
#include "transports/ucx/ucx_link.h"

namespace ringcc {
namespace {

// UCX's InfiniBand transports, for NCCL_IB_DISABLE=1 (UCX_TLS's "^" excludes a list).
constexpr const char* kNoIbTls = "^rc,ud,dc,rc_v,rc_x,ud_v,ud_x,dc_x";
// Progress calls per poll() at most, so one busy link cannot starve the others' sweep.
constexpr int kMaxProgressPerPoll = 64;

ProcessLocal<UcxWorker> gWorker;

std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

}  // namespace

ncclResult_t UcxWorker::get(UcxWorker** out) {
  // A forked child cannot use its parent's worker (its proxy thread and sockets are the
  // parent's): it makes its own (src/base/process_local.h).
  ncclResult_t rc = ncclSuccess;
  *out = gWorker.get([&rc]() -> UcxWorker* {
    auto* w = new UcxWorker();
    rc = w->init();
    if (rc != ncclSuccess) {
      delete w;
      return nullptr;
    }
    Proxy::get().addSource(w);
    return w;  // lives for the process
  });
  return rc;
}

ncclResult_t UcxWorker::init() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    return fail(ncclSystemError, "ucx", "reading the UCX configuration failed: %s",
                ucs_status_string(st));
  // We register each connection's slots once and never unmap them while registered, so UCX's
  // registration cache (which hooks mmap through libucm) buys nothing; and its hook install
  // deadlocked in forked children here (ucm_mmap_install in ucp_init). Off unless the user
  // asks for it.
  if (std::getenv("UCX_RCACHE_ENABLE") == nullptr) ucp_config_modify(config, "RCACHE_ENABLE", "n");
  const bool noIb = paramInt("IB_DISABLE") != 0;
  std::string tls = envOr("UCX_TLS", "");
  if (noIb && tls.empty()) {
    ucp_config_modify(config, "TLS", kNoIbTls);
    tls = kNoIbTls;
  } else if (noIb) {
    LOG_INFO(kLogNet | kLogInit, "ucx: NCCL_IB_DISABLE=1 but UCX_TLS=%s is set; UCX_TLS wins",
             tls.c_str());
  }
  const std::string devices = envOr("UCX_NET_DEVICES", "all");
  const std::string tried = "UCX_TLS=" + (tls.empty() ? std::string("all") : tls) +
                            " UCX_NET_DEVICES=" + devices + (noIb ? " (NCCL_IB_DISABLE=1)" : "");

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // RMA and AMO64: one-sided calls to peers on other hosts (ucx_rma.h). Where no transport
  // has them (TCP) UCX emulates both with active messages, which the target's proxy handles.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    context_ = nullptr;
    return fail(ncclSystemError, "ucx", "ucp_init failed: %s (%s)", ucs_status_string(st),
                tried.c_str());
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the proxy thread uses it (see header)
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    worker_ = nullptr;
    ucp_cleanup(context_);
    context_ = nullptr;
    return fail(ncclSystemError, "ucx", "creating a UCX worker failed: %s (%s)",
                ucs_status_string(st), tried.c_str());
  }
  if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;  // the proxy naps instead
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(worker_, &addr, &len);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    worker_ = nullptr;
    context_ = nullptr;
    return fail(ncclSystemError, "ucx", "getting the UCX worker address failed: %s (%s)",
                ucs_status_string(st), tried.c_str());
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(addr);
  address_.assign(bytes, bytes + len);
  ucp_worker_release_address(worker_, addr);
  allowed_ = tried;
  LOG_INFO(kLogNet | kLogInit, "ucx: worker ready (%s), address %zu bytes, event fd %d",
           tried.c_str(), len, efd_);
  return ncclSuccess;
}

ucs_status_t UcxWorker::createEndpoint(std::span<const uint8_t> address,
                                       ucp_err_handler_cb_t onError, void* arg, ucp_ep_h* out) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = onError;
  ep.err_handler.arg = arg;
  const ucs_status_t st = ucp_ep_create(worker_, &ep, out);
  if (st != UCS_OK) *out = nullptr;
  return st;
}

uint32_t UcxWorker::newLinkId() {
  uint32_t id = nextId_.fetch_add(1, std::memory_order_relaxed) & 0x3fffffffu;
  return id != 0 ? id : nextId_.fetch_add(1, std::memory_order_relaxed) & 0x3fffffffu;
}

void UcxWorker::retire(std::unique_ptr<UcxLink> link) {
  {
    std::lock_guard<std::mutex> lock(retireMu_);
    toRetire_.push_back(std::move(link));
    closing_.fetch_add(1, std::memory_order_acq_rel);
  }
  Proxy::get().wake();
}

bool UcxWorker::finishRetired() {
  {
    std::lock_guard<std::mutex> lock(retireMu_);
    for (auto& l : toRetire_) retiring_.push_back(std::move(l));
    toRetire_.clear();
  }
  if (retiring_.empty()) return false;
  const auto now = std::chrono::steady_clock::now();
  int released = 0;
  for (size_t i = 0; i < retiring_.size();) {
    if (retiring_[i]->release(now)) {
      retiring_.erase(retiring_.begin() + static_cast<std::ptrdiff_t>(i));
      ++released;
    } else {
      ++i;
    }
  }
  // Counted as closing before the links stop counting, so closing() never reads 0 between.
  if (released > 0 && retiring_.empty()) startFlush();
  closing_.fetch_sub(released, std::memory_order_acq_rel);
  // Links still closing keep the proxy awake (they wait on time, not on events).
  return released > 0 || !retiring_.empty();
}

// A force-closed endpoint is not gone when its close request completes: UCX goes on
// discarding its transport endpoints and frees it when the last one is flushed, during later
// progress. A worker flush completes only after every such discard (they count as the
// worker's flush operations), so closing() stays true until then: a process that exits right
// after ncclCommDestroy keeps its proxy until UCX has freed the endpoints.
void UcxWorker::startFlush() {
  if (flushReq_ != nullptr) {
    // Posted before these endpoints were closed, it may complete before their discards do:
    // another flush follows it (finishFlush).
    reflush_ = true;
    return;
  }
  ucp_request_param_t p{};
  void* r = ucp_worker_flush_nbx(worker_, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) return;  // done at once, or nothing more to wait for
  flushReq_ = r;
  closing_.fetch_add(1, std::memory_order_acq_rel);
}

bool UcxWorker::finishFlush() {
  if (flushReq_ == nullptr || ucp_request_check_status(flushReq_) == UCS_INPROGRESS) return false;
  ucp_request_free(flushReq_);
  flushReq_ = nullptr;
  if (reflush_) {
    reflush_ = false;
    startFlush();  // counts as closing before this one stops counting
  }
  closing_.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

bool UcxWorker::poll() {
  bool moved = false;
  for (int i = 0; i < kMaxProgressPerPoll && ucp_worker_progress(worker_) != 0; ++i) moved = true;
  moved |= finishRetired();
  moved |= finishFlush();
  return moved;
}

bool UcxWorker::arm() {
  if (efd_ < 0) return true;  // no fd: the proxy naps briefly and polls again
  return ucp_worker_arm(worker_) == UCS_OK;
}

}  // namespace ringcc
