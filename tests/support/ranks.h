// Running one function per rank: as threads of this process, or as forked processes. The one
// place that knows how a test's ranks are started.
//
// Forked ranks and threads: a child of fork() holds only the thread that forked, with every
// lock another thread held at that moment still held (a bootstrap root's, a proxy's, or the
// allocator lock of AddressSanitizer's runtime, which its GCC 12 version does not take around
// fork). Such a child blocks forever on its first malloc. So ranks are forked only from a
// process that runs no other thread: runProcesses checks /proc/self/task and fails the test,
// naming the threads, otherwise; and newUniqueId keeps its bootstrap root out of this process
// (in a helper process, exec'ed), so that making an id does not start a thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nccl.h"

namespace ringcc::test {

// Runs body(rank) on nranks threads and joins them. Catch2 assertions are not thread-safe:
// bodies return a failure count or use CHECK only after joining.
void runThreads(int nranks, const std::function<void(int rank)>& body);

// Forks nranks children, runs body(rank) in each and _exits with its return value. Returns
// the number of children that failed (non-zero status, signal, or not done within
// timeoutSec, in which case the stragglers are killed). Fails the test (Catch2's FAIL) when
// this process runs another thread (see the top of this file).
int runProcesses(int nranks, const std::function<int(int rank)>& body, int timeoutSec = 60);

// As runProcesses, for scenarios where a child is meant to die: returns each child's waitpid
// status, or -1 for a child that was still running after timeoutSec (it is killed and reaped).
std::vector<int> runProcessesStatus(int nranks, const std::function<int(int rank)>& body,
                                    int timeoutSec = 60);

// A fresh unique id. Its bootstrap root runs in a helper process (this test program exec'ed
// in a mode that only serves the root), which ends when the root has served its ranks or given
// up, or when this process is gone. This process starts no thread for it.
ncclUniqueId newUniqueId();

// The names of this process's threads other than the caller ("" when it is the only one).
std::string otherThreads();

// otherThreads() once threads on their way out (a root that served its ranks, a detached
// thread ending) are gone: waits up to ~2 s for the list to empty.
std::string otherThreadsAfterSettling();

// Polls a non-blocking communicator until its state leaves ncclInProgress (at most ~20 s);
// returns that state.
ncclResult_t waitCommReady(ncclComm_t comm);

}  // namespace ringcc::test
