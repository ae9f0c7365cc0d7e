// The communicator: one rank's membership in a group of ranks.
//
// `struct ncclComm` is the object behind ncclComm_t. It owns its config, its bootstrap, the
// table of peers, its engine (channels, connectors and executor; src/exec) and its error
// state. Lifecycle:
//
//   create ──► initializing (InProgress) ──► ready ──► finalized ──► destroyed
//                      │                       │  └──► revoked ──┘
//                      └──────────── aborted ◄─┘
//
// Thread-safety: API calls on one communicator come from one thread at a time (as in NCCL),
// except ncclCommAbort/ncclCommRevoke/ncclCommGetAsyncError, which may come from any thread
// while another call is running. Every entry point holds a CallGuard; abort raises the abort
// flag and waits for running calls to leave before freeing anything.
//
// Errors: a thread working for a communicator (running its operations, initializing it)
// holds a CommScope, so that what fails meanwhile is noted as this communicator's cause and
// never another's, whichever thread raised it. When the work fails, recordError keeps that
// cause as the communicator's first error (for ncclGetLastError(comm) and the refusal of
// later calls) and sets the async error (ncclCommGetAsyncError). Only the first failure
// counts: later ones are its consequences.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/mem_kind.h"
#include "src/base/peer_info.h"
#include "src/core/comm_topo.h"
#include "src/core/config.h"
#include "src/core/user_ops.h"
#include "src/trace/call_state.h"
#include "src/trace/trace.h"
#include "transports/transport.h"

namespace ringcc {
class Bootstrap;
class CommEngine;
class CommRma;
}  // namespace ringcc

struct ncclComm {
  ncclComm();
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  // Identity, fixed once init has finished.
  int rank = -1;
  int nranks = 0;
  uint64_t commHash = 0;  // same on every rank; names the communicator in logs
  ringcc::CommConfig config;
  ringcc::MemoryKind memKind = ringcc::MemoryKind::Host;
  mutable ringcc::CheckedBuffers checkedBuffers;  // a cache of buffers checked against memKind
  int cudaDev = -1;
  std::vector<ringcc::PeerInfo> peers;  // indexed by rank
  ringcc::CommTopology topo;            // rings per channel and trees (src/core/comm_topo.h)

  std::unique_ptr<ringcc::Bootstrap> bootstrap;
  // Set by whoever watches this communicator for hang reports (src/monitor): called before the
  // bootstrap goes, so that core needs to know nothing of the watcher.
  void (*unwatch)(ncclComm* comm) = nullptr;
  std::unique_ptr<ringcc::CommEngine> engine;
  // One-sided windows and signals (src/rma/rma_comm.h), made by the first
  // ncclCommWindowRegister with the deleter of its layer; freed before the engine and the
  // bootstrap its message handler is registered with.
  std::unique_ptr<ringcc::CommRma, void (*)(ringcc::CommRma*)> rma{nullptr, nullptr};
  ringcc::UserOpTable userOps;             // ncclRedOpCreatePreMulSum handles
  ringcc::CallState calls;                 // the call it runs, for hang reports
  std::unique_ptr<ringcc::Tracer> tracer;  // RINGCC_TRACE; null (the default): off
  // Host workspace of operations built from several calls (Adasum's received halves), kept
  // between calls so a repeated call does not fault its pages in again. One call at a time
  // uses it: NCCL allows one thread to call on a communicator at once.
  std::vector<unsigned char> hostScratch;

  // State.
  std::atomic<bool> abortFlag{false};
  std::atomic<bool> revoked{false};
  std::atomic<bool> finalized{false};
  std::atomic<bool> suspended{false};  // ncclCommSuspend until ncclCommResume
  std::atomic<int> asyncError{ncclSuccess};  // ncclInProgress while a non-blocking init runs
  std::thread initThread;                    // the non-blocking init, joined before freeing

  // ncclCommGetUniqueId's id until a grow consumes it, and the last one consumed (so that
  // its reuse is named as such). Set and read by API calls, one thread at a time.
  struct GrowIds {
    bool pending = false;
    ncclUniqueId id{};
    bool consumedOne = false;
    ncclUniqueId consumed{};
  } growIds;

  // The work of this communicator failed with `code`: keeps the cause (the last error raised
  // in a CommScope for it) as the first error, unless one is kept already, and makes `code`
  // the async error. Without a noted cause (the failure was raised on a thread that held no
  // scope), the first error says so and names the communicator.
  void recordError(ncclResult_t code);
  // The first error; code ncclSuccess and empty texts if none.
  ringcc::ErrorCause firstError() const;
  // An error raised on a thread working for this communicator (CommScope).
  void noteWorkError(const ringcc::ErrorCause& cause);

  // Running API calls, so abort and destroy can wait for them to leave. Entering and leaving
  // are one atomic each, since they bracket every call; the leaving decrement is a call's last
  // touch of the communicator, so waitForCalls polls (every 100 us) instead of being woken:
  // a wake-up after the decrement could reach a communicator already freed.
  void enterCall() { activeCalls_.fetch_add(1); }
  void leaveCall() { activeCalls_.fetch_sub(1); }
  void waitForCalls();

 private:
  mutable std::mutex mu_;
  std::atomic<int> activeCalls_{0};
  ringcc::ErrorCause firstError_;
  ringcc::ErrorCause workError_;  // the latest noted, since errors come wrapped outward
};

namespace ringcc {

using Communicator = ::ncclComm;

// Holds a communicator "in use" for the lifetime of an API call.
class CallGuard {
 public:
  explicit CallGuard(Communicator* comm) : comm_(comm) { comm_->enterCall(); }
  ~CallGuard() { comm_->leaveCall(); }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  Communicator* comm_;
};

// Work for `comm` on this thread, for the scope's lifetime: log lines show its rank, and
// errors raised on this thread are noted as its cause (Communicator::noteWorkError). Open
// one wherever a failure of the work ends in comm->recordError, on whatever thread the work
// runs: the API thread, the non-blocking init thread, and the engine's own threads (the host
// engine's thread opens only a LogRankScope so far; recordError then names the communicator).
class CommScope final : public ErrorScope {
 public:
  explicit CommScope(Communicator* comm) : comm_(comm), rank_(comm->rank) {}
  void onError(const ErrorCause& cause) override { comm_->noteWorkError(cause); }

 private:
  Communicator* comm_;
  LogRankScope rank_;
};

}  // namespace ringcc
