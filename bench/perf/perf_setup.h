// A perf run's set-up, the stages runPerf (driver.cc) goes through before its threads time
// anything, in that order: what the library must provide, the buffer size the memory allows,
// the unique id, the GPUs, the communicators, their memory kind, the buffers.
//
// Each stage is a function of its own so that runPerf reads as the list of stages; the ones
// returning int give kPerfSuccess to go on, else the run's exit code, having said why.
#pragma once

#include <string>

#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// The library has every entry point the run calls, and -r names a rank.
int checkRequest(Run& run);
// Lowers run.maxBytes (and -b) so that every local rank's buffers fit in three quarters of the
// memory available now, saying so.
void limitToMemory(Run& run);
// The communicators' unique id: from the launcher, broadcast by MPI from process 0, or ours.
int shareUniqueId(Run& run);
// The ranks' GPUs, where the CUDA driver has any and RINGCC_DEVICE is not "host"; *noCuda
// says why there are none otherwise (for chooseMemory's error).
int openDevices(Run& run, std::string* noCuda);
// Makes every communicator of the process (ncclCommInitAll, or ncclCommInitRank in a group);
// false (the run failed) on an error.
bool initComms(Run& run);
// -p: makes one thread's communicators from that thread.
bool initThreadComms(Run& run, int thread);
// run.onDevice: device buffers exactly when the communicators are CUDA ones.
int chooseMemory(Run& run, const std::string& noCuda);
// Every local rank's send, receive and expected buffers for run.maxBytes (and their device
// copies); false if any allocation failed (*deviceErr: the driver's reason, if it was its).
bool allocBuffers(Run& run, std::string* deviceErr);
void freeBuffers(Run& run);

}  // namespace ringcc::bench::perf
