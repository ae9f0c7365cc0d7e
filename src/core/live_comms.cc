// The live set of communicators and ApiGuard (live_comms.h).
#include "src/core/live_comms.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "src/base/error.h"

namespace ringcc {
namespace {

// Guards the live set. Every API call holds it for a binary search and an increment, so it is
// a spin lock (an exchange to take, a store to give back: a few instructions, where a mutex
// costs ~55); a waiter yields its core after a few tries, so a holder preempted on a host with
// more threads than cores gets to finish.
class LiveLock {
 public:
  void lock() {
    int tries = 0;
    while (held_.exchange(true, std::memory_order_acquire)) {
      while (held_.load(std::memory_order_relaxed))
        if (++tries > 64) sched_yield();
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// The live communicators, sorted by address: every API call looks its handle up here, and a
// binary search of a few pointers costs less than hashing (no division, no bucket walk).
// Built in static storage and never destroyed, so that a communicator destroyed during exit
// still finds it. Not on the heap either: a copy of the library that is dlopened and closed
// again would otherwise leave the vector behind, unreachable, for LeakSanitizer to report.
LiveLock gLiveMu;
using LiveList = std::vector<const Communicator*>;
alignas(LiveList) unsigned char gLiveStorage[sizeof(LiveList)];
LiveList& gLive = *new (gLiveStorage) LiveList();

// The communicator the last lookup found (under gLiveMu): a program calls on the same one
// over and over, and one compare answers it without the search. Cleared when it goes.
const Communicator* gLastFound = nullptr;

bool liveLocked(const Communicator* comm) {
  if (comm == gLastFound) return true;
  if (!std::binary_search(gLive.begin(), gLive.end(), comm, std::less<>())) return false;
  gLastFound = comm;
  return true;
}

}  // namespace

void registerComm(Communicator* comm) {
  std::lock_guard<LiveLock> lock(gLiveMu);
  auto at = std::lower_bound(gLive.begin(), gLive.end(), comm, std::less<>());
  if (at == gLive.end() || *at != comm) gLive.insert(at, comm);
}

void unregisterComm(Communicator* comm) {
  std::lock_guard<LiveLock> lock(gLiveMu);
  auto at = std::lower_bound(gLive.begin(), gLive.end(), comm, std::less<>());
  if (at != gLive.end() && *at == comm) gLive.erase(at);
  if (gLastFound == comm) gLastFound = nullptr;
}

bool isLiveComm(const Communicator* comm) {
  std::lock_guard<LiveLock> lock(gLiveMu);
  return liveLocked(comm);
}

ncclResult_t checkComm(const Communicator* comm, const char* where) {
  if (comm == nullptr) return fail(ncclInvalidArgument, where, "comm is NULL");
  if (!isLiveComm(comm))
    return fail(ncclInvalidArgument, where,
                "comm %p is not a live communicator (destroyed, aborted or never created)",
                static_cast<const void*>(comm));
  return ncclSuccess;
}

ApiGuard::~ApiGuard() {
  if (comm_) comm_->leaveCall();
}

ncclResult_t ApiGuard::enter(Communicator* comm, const char* where) {
  if (comm == nullptr) return fail(ncclInvalidArgument, where, "comm is NULL");
  {
    std::lock_guard<LiveLock> lock(gLiveMu);
    if (liveLocked(comm)) {
      comm->enterCall();
      comm_ = comm;
      return ncclSuccess;
    }
  }
  return fail(ncclInvalidArgument, where,
              "comm %p is not a live communicator (destroyed, aborted or never created)",
              static_cast<const void*>(comm));
}

bool ApiGuard::tryEnter(Communicator* comm) {
  std::lock_guard<LiveLock> lock(gLiveMu);
  if (comm == nullptr || !liveLocked(comm)) return false;
  comm->enterCall();
  comm_ = comm;
  return true;
}

ncclResult_t ApiGuard::enterReady(Communicator* comm, const char* where, bool suspendedOk) {
  RINGCC_CHECK(enter(comm, where));
  int state = comm->asyncError.load();
  if (state == ncclInProgress)
    return fail(ncclInvalidUsage, where, "communicator is still initializing");
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, where, "communicator was aborted");
  if (comm->revoked.load()) return fail(ncclInvalidUsage, where, "communicator was revoked");
  if (comm->finalized.load()) return fail(ncclInvalidUsage, where, "communicator was finalized");
  if (!suspendedOk && comm->suspended.load())
    return fail(ncclInvalidUsage, where,
                "communicator is suspended (ncclCommSuspend): call ncclCommResume first");
  if (state != ncclSuccess)
    return fail(static_cast<ncclResult_t>(state), where,
                "communicator has an error from earlier: %s", comm->firstError().message.c_str());
  return ncclSuccess;
}

}  // namespace ringcc
