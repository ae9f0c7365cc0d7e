// The process's UCX context and worker (transports/ucx), shared by all its UCX connections.
//
// Created on the first UCX connection's setup (a forked child makes its own) and kept for the
// life of the process. After creation only the proxy thread (transports/proxy) touches the worker:
// it calls poll() (ucp_worker_progress, and finishing the close of retired links) and sleeps
// on eventFd() once arm() succeeded. So the worker runs in UCS_THREAD_MODE_SINGLE, without
// UCX's locks, and every request of every link is posted and completed on that one thread.
//
// Configuration: UCX reads its own UCX_* variables (UCX_TLS, UCX_NET_DEVICES, ...).
// NCCL_IB_DISABLE=1 removes UCX's InfiniBand transports (rc, ud, dc and their variants) unless
// UCX_TLS is set, in which case UCX_TLS wins (logged).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "nccl.h"
#include "transports/proxy/proxy.h"

namespace ringcc {

class UcxLink;

class UcxWorker final : public WakeSource {
 public:
  // This process's worker, made on first use. ncclSystemError (logged: what UCX said, and the
  // UCX_TLS / UCX_NET_DEVICES / NCCL_IB_DISABLE in force) if UCX cannot start.
  static ncclResult_t get(UcxWorker** out);

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  const std::vector<uint8_t>& address() const { return address_; }
  // "UCX_TLS=... UCX_NET_DEVICES=... (NCCL_IB_DISABLE=1)": what UCX was allowed, for messages.
  const std::string& allowed() const { return allowed_; }

  // A process-unique number for a link's tags (30 bits; wraps after a billion links).
  uint32_t newLinkId();

  // An endpoint to the worker at `address` (peer error handling: onError(arg, ep, status) when
  // the peer goes or the path fails). Proxy thread only; *out is null on failure.
  ucs_status_t createEndpoint(std::span<const uint8_t> address, ucp_err_handler_cb_t onError,
                              void* arg, ucp_ep_h* out);

  // Hands over a connected link whose Connector is gone: the proxy tells the peer, cancels
  // what is posted, closes the endpoint and frees the memory once UCX is done with it.
  void retire(std::unique_ptr<UcxLink> link);

  // WakeSource (proxy thread only).
  bool poll() override;
  int eventFd() override { return efd_; }
  bool arm() override;
  // Links handed to retire() and not yet released, or UCX still destroying their endpoints
  // (any thread).
  bool closing() const override { return closing_.load(std::memory_order_acquire) > 0; }

 private:
  UcxWorker() = default;
  ncclResult_t init();
  bool finishRetired();  // proxy thread
  void startFlush();     // proxy thread
  bool finishFlush();    // proxy thread

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<uint8_t> address_;
  std::string allowed_;
  std::atomic<uint32_t> nextId_{1};
  std::mutex retireMu_;
  std::vector<std::unique_ptr<UcxLink>> toRetire_;  // under retireMu_
  std::vector<std::unique_ptr<UcxLink>> retiring_;  // proxy thread only
  void* flushReq_ = nullptr;                        // proxy thread only: see startFlush()
  bool reflush_ = false;  // endpoints closed while flushReq_ was pending: flush again after it
  // Links retired and not yet released, plus one while flushReq_ is pending.
  std::atomic<int> closing_{0};
};

}  // namespace ringcc
