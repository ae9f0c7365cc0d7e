// One perf tool: the collective comes from RINGCC_PERF_COLL (all_reduce_perf is built with
// -DRINGCC_PERF_COLL=AllReduce, and so on).
#include "bench/perf/comm_api.h"
#include "bench/perf/driver.h"

int main(int argc, char** argv) {
  using namespace ringcc::bench;
  return runPerf(CollKind::RINGCC_PERF_COLL, argc, argv, ncclCommApi());
}
