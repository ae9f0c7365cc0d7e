// The hang watcher: one thread per process that answers SIGUSR1 and NCCL_TIMEOUT with a report
// of every rank's call state, gathered over each watched communicator's bootstrap (the report's
// format and findings: src/trace/hang_report.h; docs/debugging.md).
#pragma once

struct ncclComm;

namespace ringcc {

// A communicator takes part in hang reports from now on (its bootstrap and hash exist). Sets
// comm->unwatch, which the communicator calls before its bootstrap goes away.
void watchComm(ncclComm* comm);

// NCCL_TIMEOUT: reports on `comm` from every rank and returns once this rank logged the report,
// or after kTimeoutWaitMs. Called by the engine, inside the operation.
void reportHangNow(ncclComm* comm);

}  // namespace ringcc
