// A stand-in for libnccl inside one process, for testing the perf driver end to end before the
// real collectives exist: communicators of one "world" meet per call (every rank's call with
// the same sequence number forms one collective), the last rank to arrive computes every
// rank's output from everyone's inputs, and the others wait. Groups batch calls per thread
// like NCCL's, so one thread can drive several communicators.
//
// Knobs make it misbehave on purpose: corrupt one rank's output, never return from one rank's
// call (until abort), report CUDA memory, or lack ncclAllReduce.
#pragma once

#include "bench/perf/comm_api.h"

namespace ringcc::test {

struct FakeCommKnobs {
  int corruptRank = -1;      // after each collective, add 1 to this rank's first output element
  int hangRank = -1;         // this rank's calls block until its communicator is aborted
  bool cudaMemory = false;   // ringccCommMemoryKind says ringccMemCuda
  bool noAllReduce = false;  // the table lacks ncclAllReduce
  bool noAlltoAll = false;   // the table lacks ncclAlltoAll (send/recv fallback)
};

// The fake's table; knobs apply to calls made after this.
bench::CommApi fakeCommApi(const FakeCommKnobs& knobs = {});

// Communicators created and not yet destroyed or aborted (leak check).
int fakeLiveComms();

}  // namespace ringcc::test
