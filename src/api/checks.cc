#include <mutex>
#include <unordered_set>

#include "src/api/api.h"

namespace ringcc {
namespace {

std::mutex gLiveMu;
std::unordered_set<const Communicator*>& liveComms() {
  static std::unordered_set<const Communicator*> set;
  return set;
}

}  // namespace

void registerComm(Communicator* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveComms().insert(comm);
}

void unregisterComm(Communicator* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveComms().erase(comm);
}

bool isLiveComm(const Communicator* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  return liveComms().count(comm) != 0;
}

ncclResult_t checkComm(const Communicator* comm, const char* where) {
  if (comm == nullptr) return fail(ncclInvalidArgument, where, "comm is NULL");
  if (!isLiveComm(comm))
    return fail(ncclInvalidArgument, where,
                "comm %p is not a live communicator (destroyed, aborted or never created)",
                static_cast<const void*>(comm));
  return ncclSuccess;
}

ncclResult_t checkNotNull(const void* ptr, const char* what, const char* where) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, where, "%s is NULL", what);
  return ncclSuccess;
}

ApiGuard::~ApiGuard() {
  if (comm_) comm_->leaveCall();
}

ncclResult_t ApiGuard::enter(Communicator* comm, const char* where) {
  if (comm == nullptr) return fail(ncclInvalidArgument, where, "comm is NULL");
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    if (liveComms().count(comm)) {
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
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (comm == nullptr || !liveComms().count(comm)) return false;
  comm->enterCall();
  comm_ = comm;
  return true;
}

ncclResult_t ApiGuard::enterReady(Communicator* comm, const char* where) {
  RINGCC_CHECK(enter(comm, where));
  int state = comm->asyncError.load();
  if (state == ncclInProgress)
    return fail(ncclInvalidUsage, where, "communicator is still initializing");
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, where, "communicator was aborted");
  if (comm->revoked.load()) return fail(ncclInvalidUsage, where, "communicator was revoked");
  if (comm->finalized.load()) return fail(ncclInvalidUsage, where, "communicator was finalized");
  if (state != ncclSuccess)
    return fail(static_cast<ncclResult_t>(state), where,
                "communicator has an error from earlier: %s", comm->firstError().message.c_str());
  return ncclSuccess;
}

}  // namespace ringcc
