#include "src/core/comm.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "src/base/error.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/engine.h"

ncclComm::ncclComm() = default;

ncclComm::~ncclComm() {
  if (initThread.joinable()) initThread.join();
  rma.reset();     // windows and signals: their message handler is the bootstrap's
  engine.reset();  // connectors before the bootstrap they were set up with
  if (bootstrap && unwatch) unwatch(this);
  bootstrap.reset();
  tracer.reset();  // writes the records left
  // A peer that died while connecting may have left shared memory only we can name.
  if (rank >= 0 && rank < static_cast<int>(peers.size()))
    ringcc::cleanUpAfterPeers(peers[rank], peers);
}

void ncclComm::recordError(ncclResult_t code) {
  if (code == ncclSuccess || code == ncclInProgress) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (firstError_.code == ncclSuccess) {
    if (workError_.code != ncclSuccess) {
      firstError_ = workError_;
    } else {
      // Raised on a thread without a CommScope for us: its WARN line has the details.
      char what[256];
      snprintf(what, sizeof(what),
               "rank %d of %d (commHash %016llx) failed with \"%s\"; the cause was raised on "
               "a thread not known to work for this communicator: see the WARN log",
               rank, nranks, static_cast<unsigned long long>(commHash), ringcc::errorString(code));
      firstError_.where = "communicator";
      firstError_.what = what;
      firstError_.message = firstError_.where + ": " + what;
    }
    firstError_.code = code;
  }
  int expected = ncclSuccess;
  asyncError.compare_exchange_strong(expected, code);
  expected = ncclInProgress;
  asyncError.compare_exchange_strong(expected, code);
}

ringcc::ErrorCause ncclComm::firstError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return firstError_;
}

void ncclComm::noteWorkError(const ringcc::ErrorCause& cause) {
  std::lock_guard<std::mutex> lock(mu_);
  workError_ = cause;
}

void ncclComm::waitForCalls() {
  while (activeCalls_.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
}
