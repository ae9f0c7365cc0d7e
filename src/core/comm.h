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
#include "src/core/config.h"
#include "src/core/user_ops.h"
#include "transports/transport.h"

namespace ringcc {
class Bootstrap;
class CommEngine;
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
  int cudaDev = -1;
  std::vector<ringcc::PeerInfo> peers;  // indexed by rank

  std::unique_ptr<ringcc::Bootstrap> bootstrap;
  std::unique_ptr<ringcc::CommEngine> engine;
  ringcc::UserOpTable userOps;  // ncclRedOpCreatePreMulSum handles

  // State.
  std::atomic<bool> abortFlag{false};
  std::atomic<bool> revoked{false};
  std::atomic<bool> finalized{false};
  std::atomic<int> asyncError{ncclSuccess};  // ncclInProgress while a non-blocking init runs
  std::thread initThread;                    // the non-blocking init, joined before freeing

  // Records the first error (kept for ncclGetLastError) and makes it the async error.
  void recordError(ncclResult_t code);
  std::string lastError() const;

  // Running API calls, so abort and destroy can wait for them to leave.
  void enterCall();
  void leaveCall();
  void waitForCalls();

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int activeCalls_ = 0;
  std::string lastError_;
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

}  // namespace ringcc
