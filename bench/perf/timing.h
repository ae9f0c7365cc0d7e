// The timing loop: what each benchmark thread runs once the communicators and buffers are
// set up (perf_setup.h). Per (type, op, root) it warms every size class up, then per size
// times -n iterations out of place and in place, checks them (-c) and prints the row's
// columns; rank 0's first thread prints.
//
// The operations it issues are the ones bench/callgrind_per_call counts the instructions
// of: anything added around an operation here adds to every measurement.
#pragma once

#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// One benchmark thread, from its parallel init (-p) to its last row; returns when done or
// when the run failed (run.failed).
void threadMain(ThreadCtx& t);

}  // namespace ringcc::bench::perf
