#include "bench/perf/rank_data.h"

#include <cstring>

#include "bench/perf/data_check.h"
#include "bench/perf/datatypes.h"

namespace ringcc::bench::perf {

bool initData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, uint64_t seed, bool inPlace) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  for (int i = 0; i < run.nGpus; ++i) {
    int idx = t.thread * run.nGpus + i;
    int rank = run.globalRank(t.thread, i);
    RankBuffers& b = run.bufs[idx];
    std::memset(b.recv, 0, t.recvBytes);
    CheckSetup s{run.kind, type, op, root, run.nranks, rank, seed, t.counts};
    char* input = inPlace ? b.recv + t.counts.sendInplaceOffset * rank * elt : b.send;
    fillInput(s, input);
    const char* region = inPlace ? b.recv + t.counts.recvInplaceOffset * rank * elt : b.recv;
    fillExpected(s, b.expected, region);
    if (run.onDevice && !(deviceOk(run, run.devs.upload(idx, false, b.send, t.sendBytes)) &&
                          deviceOk(run, run.devs.upload(idx, true, b.recv, t.recvBytes))))
      return false;
  }
  return true;
}

int64_t checkData(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  int64_t wrong = 0;
  if (!syncThread(t)) return -1;
  for (int i = 0; i < run.nGpus; ++i) {
    int idx = t.thread * run.nGpus + i;
    int rank = run.globalRank(t.thread, i);
    const RankBuffers& b = run.bufs[idx];
    if (run.onDevice && !deviceOk(run, run.devs.download(idx, b.recv, t.recvBytes))) return -1;
    CheckSetup s{run.kind, type, op, root, run.nranks, rank, 0, t.counts};
    const char* region = inPlace ? b.recv + t.counts.recvInplaceOffset * rank * elt : b.recv;
    wrong += countWrong(type, region, b.expected, t.counts.recvCount, checkTolerance(s));
  }
  return wrong;
}

}  // namespace ringcc::bench::perf
