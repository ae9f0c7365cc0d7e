// One-sided writes over UCX for one communicator: the engine of src/rma's kUcx path (puts and
// signals to peers reached by the network).
//
// What it promises:
//   - putSignal() writes the bytes into the peer's registered memory (ucp_put_nbx), flushes the
//     endpoint (the bytes are then in the peer's memory: remote completion), adds one to the
//     peer's 64-bit counter (ucp_atomic_op_nbx, UCP_ATOMIC_OP_ADD) and flushes again. It returns
//     once all of that completed, so the source may be reused, the data is in place before the
//     count can be seen, and the count is in place when the call returns (a peer that destroys
//     its communicator after its last wait never gets a late add). A flush, not
//     ucp_worker_fence, orders data and count: a fence does not order operations across lanes
//     in UCX 1.13 (its RMA and AMO lanes may differ), a completed flush always does.
//   - Every wait is bounded: by NCCL_TIMEOUT (read at each call) and the communicator's abort
//     flag. An operation still in flight then is stopped: the endpoint to that peer is closed
//     (force), which ends UCX's hold on the source buffer, and the peer counts as failed.
//   - Failures come back as ncclRemoteError with a WARN naming the peer and what UCX said.
//     peerError() says whether UCX reported the endpoint to a peer failed (its process died,
//     or the network path is down): the wait side's fast check for peers on other hosts.
//
// Threads: the process's worker is UCS_THREAD_MODE_SINGLE and only the proxy thread may touch
// it (transports/ucx/ucx_worker.h), nor is the context made for concurrent use (ucp_mem_map).
// So every call here queues a job that the proxy thread runs in poll() (this object is a
// WakeSource of the proxy, with an eventfd that the queue rings), and waits for it. One thread
// calls at a time (the communicator's rule). Over TCP UCX emulates RMA and atomics with active
// messages that the target's worker handles: the target's proxy thread, woken by the worker's
// event fd, does that whatever its other threads are doing.
//
// Without UCX in the build (ucx_disabled.cc), create() says so and returns null: callers keep
// their other path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nccl.h"

namespace ringcc {

// What an endpoint offers (transports/ucx/ucx_ep_info.h): whether UCX does puts and atomics
// on lanes of their own (InfiniBand, RoCE, shared memory) or emulates them with active
// messages on its am lane (TCP), and the lanes' transports, for logs.
struct UcxReach {
  bool rma = false;
  bool amo = false;
  std::string lanes;
};

class UcxRma {
 public:
  struct Memory;     // a buffer of ours registered for peers' writes
  struct RemoteKey;  // a peer's registered buffer, as our endpoint to it writes it

  // Peers are ranks in [0, nranks). `abort` (may be null) is read while waiting. Null, with
  // *why set, when UCX cannot start here (no UCX in the build, ucp_init failed: logged).
  static std::unique_ptr<UcxRma> create(int nranks, const std::atomic<bool>* abort,
                                        std::string* why);
  virtual ~UcxRma() = default;  // closes the endpoints, frees keys and registrations left

  // The process's worker address, for peers' connect().
  virtual std::span<const uint8_t> address() const = 0;

  // Registers [base, base + bytes) for peers' puts and atomics; *packed is its key for them.
  virtual ncclResult_t map(void* base, size_t bytes, Memory** out,
                           std::vector<uint8_t>* packed) = 0;
  virtual void unmap(Memory* memory) = 0;  // null: nothing

  // An endpoint to peer's worker, wired up before it returns; *reach says what its lanes
  // offer. ncclRemoteError (*why says what UCX said, nothing logged) when the peer cannot be
  // reached: the caller falls back.
  virtual ncclResult_t connect(int peer, std::span<const uint8_t> address, UcxReach* reach,
                               std::string* why) = 0;
  // A key of peer's memory (packed by its map()), for this endpoint.
  virtual ncclResult_t unpack(int peer, std::span<const uint8_t> packed, RemoteKey** out) = 0;
  virtual void release(RemoteKey* key) = 0;  // null: nothing

  // bytes (0: none) from src to `to` of toKey, then one added to the uint64 at `counter` of
  // counterKey (addresses in the peer's memory); see the top of this file. `where` names the
  // call in errors.
  virtual ncclResult_t putSignal(int peer, const void* src, size_t bytes, uint64_t to,
                                 const RemoteKey* toKey, uint64_t counter,
                                 const RemoteKey* counterKey, const char* where) = 0;

  // "" while the endpoint to peer is fine; else what ended it ("UCX reported: Endpoint
  // timeout", "closed here after an operation timed out"). Any thread.
  virtual std::string peerError(int peer) const = 0;
};

}  // namespace ringcc
