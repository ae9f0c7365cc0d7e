// One benchmark thread's data check: fills its ranks' inputs and expected results before a
// checked operation, and counts the wrong elements after (data_check.h holds the pure
// functions that say what each element must be). Apart from the timing loop (timing.h), which
// calls these only around the operations it checks, never inside the timed ones.
#pragma once

#include <cstdint>

#include "bench/perf/datatypes.h"
#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// Fills the inputs and the expected results (on device: in the host mirrors, then copied up).
bool initData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, uint64_t seed, bool inPlace);

// Wrong elements in the thread's results; -1 if a device result could not be read back.
int64_t checkData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace);

}  // namespace ringcc::bench::perf
