#include "src/core/comm.h"

#include "src/bootstrap/bootstrap.h"
#include "src/core/error.h"
#include "src/exec/engine.h"

ncclComm::ncclComm() = default;

ncclComm::~ncclComm() {
  if (initThread.joinable()) initThread.join();
  engine.reset();  // connectors before the bootstrap they were set up with
  bootstrap.reset();
  // A peer that died while connecting may have left shared memory only we can name.
  if (rank >= 0 && rank < static_cast<int>(peers.size()))
    ringcc::cleanUpAfterPeers(peers[rank], peers);
}

void ncclComm::recordError(ncclResult_t code) {
  if (code == ncclSuccess || code == ncclInProgress) return;
  std::string cause = ringcc::lastErrorMessage();
  std::lock_guard<std::mutex> lock(mu_);
  if (lastError_.empty()) lastError_ = cause;
  int expected = ncclSuccess;
  asyncError.compare_exchange_strong(expected, code);
  expected = ncclInProgress;
  asyncError.compare_exchange_strong(expected, code);
}

std::string ncclComm::lastError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastError_;
}

void ncclComm::enterCall() {
  std::lock_guard<std::mutex> lock(mu_);
  ++activeCalls_;
}

void ncclComm::leaveCall() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--activeCalls_ == 0) idle_.notify_all();
}

void ncclComm::waitForCalls() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return activeCalls_ == 0; });
}
