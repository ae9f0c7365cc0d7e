// Running one function per rank: as threads of this process, or as forked processes.
#pragma once

#include <functional>
#include <vector>

#include "nccl.h"

namespace ringcc::test {

// Runs body(rank) on nranks threads and joins them. Catch2 assertions are not thread-safe:
// bodies return a failure count or use CHECK only after joining.
void runThreads(int nranks, const std::function<void(int rank)>& body);

// Forks nranks children, runs body(rank) in each and _exits with its return value. Returns
// the number of children that failed (non-zero status, signal, or not done within
// timeoutSec, in which case the stragglers are killed).
int runProcesses(int nranks, const std::function<int(int rank)>& body, int timeoutSec = 60);

// As runProcesses, for scenarios where a child is meant to die: returns each child's waitpid
// status, or -1 for a child that was still running after timeoutSec (it is killed and reaped).
std::vector<int> runProcessesStatus(int nranks, const std::function<int(int rank)>& body,
                                    int timeoutSec = 60);

// A fresh unique id (starts a bootstrap root in this process).
ncclUniqueId newUniqueId();

// Polls a non-blocking communicator until its state leaves ncclInProgress (at most ~20 s);
// returns that state.
ncclResult_t waitCommReady(ncclComm_t comm);

}  // namespace ringcc::test
