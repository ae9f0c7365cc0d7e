#include "bench/perf/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/perf/data_check.h"
#include "bench/perf/datatypes.h"
#include "bench/perf/perf_json.h"
#include "bench/perf/perf_setup.h"
#include "bench/perf/rank_data.h"
#include "bench/perf/report.h"

namespace ringcc::bench::perf {
namespace {

using Clock = std::chrono::steady_clock;

void setupSize(ThreadCtx& t, size_t bytes, ncclDataType_t type) {
  Run& run = *t.run;
  size_t elt = typeInfo(type).size;
  t.counts = collCounts(run.kind, bytes / elt, elt, run.nranks);
  t.sendBytes = t.counts.sendCount * elt;
  t.recvBytes = t.counts.recvCount * elt;
}

// Issues one operation on each of the thread's communicators.
bool runColl(ThreadCtx& t, ncclComm_t comm, int rank, const void* sendp, void* recvp,
             ncclDataType_t type, ncclRedOp_t op, int root, cudaStream_t stream) {
  Run& run = *t.run;
  const CommApi& api = *run.api;
  size_t count = t.counts.paramCount;
  switch (run.kind) {
    case CollKind::AllReduce:
      return ncclOk(run, api.allReduce(sendp, recvp, count, type, op, comm, stream),
                    "ncclAllReduce");
    case CollKind::AllGather:
      return ncclOk(run, api.allGather(sendp, recvp, count, type, comm, stream), "ncclAllGather");
    case CollKind::Broadcast:
      return ncclOk(run, api.broadcast(sendp, recvp, count, type, root, comm, stream),
                    "ncclBroadcast");
    case CollKind::Reduce:
      return ncclOk(run, api.reduce(sendp, recvp, count, type, op, root, comm, stream),
                    "ncclReduce");
    case CollKind::ReduceScatter:
      return ncclOk(run, api.reduceScatter(sendp, recvp, count, type, op, comm, stream),
                    "ncclReduceScatter");
    case CollKind::AlltoAll: {
      if (api.alltoAll)
        return ncclOk(run, api.alltoAll(sendp, recvp, count, type, comm, stream), "ncclAlltoAll");
      // Libraries without ncclAlltoAll: grouped send/recv to every peer, as nccl-tests does.
      size_t blk = count * typeInfo(type).size;
      if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
      bool ok = true;
      for (int r = 0; r < run.nranks && ok; ++r) {
        ok =
            ncclOk(
                run,
                api.send(static_cast<const char*>(sendp) + r * blk, count, type, r, comm, stream),
                "ncclSend") &&
            ncclOk(run, api.recv(static_cast<char*>(recvp) + r * blk, count, type, r, comm, stream),
                   "ncclRecv");
      }
      return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
    }
    case CollKind::SendRecv: {
      int n = run.nranks;
      if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
      bool ok =
          ncclOk(run, api.send(sendp, count, type, (rank + 1) % n, comm, stream), "ncclSend") &&
          ncclOk(run, api.recv(recvp, count, type, (rank - 1 + n) % n, comm, stream), "ncclRecv");
      return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
    }
  }
  return false;
}

// What stays the same over the operations of one placement (size, type, op, root, in or out
// of place), worked out once so that the timed loop does little besides the calls.
struct Placement {
  ThreadCtx* t;
  ncclDataType_t type;
  OpKind op;
  int root;
  size_t walk = 0;   // bytes the buffers move from one iteration to the next ...
  size_t steps = 1;  // ... over this many positions
  struct Call {
    ncclComm_t comm;
    int rank, idx;
    const char* send;  // at iteration 0
    char* recv;
    cudaStream_t stream;
  };
  std::vector<Call> calls;  // one per communicator of the thread
};

Placement placement(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace) {
  Run& run = *t.run;
  Placement p{&t, type, op, root, 0, 1, {}};
  const size_t elt = typeInfo(type).size;
  // Walk through the buffer from one iteration to the next, as nccl-tests does, so repeated
  // operations do not all hit the same cache lines.
  p.walk = std::max(t.sendBytes, t.recvBytes);
  p.steps = p.walk ? std::max<size_t>(1, run.maxBytes / p.walk) : 1;
  for (int i = 0; i < run.nGpus; ++i) {
    const int idx = t.thread * run.nGpus + i;
    const int rank = run.globalRank(t.thread, i);
    // Device buffers (nccl-tests' semantics) when the communicators are CUDA ones.
    char* recv =
        run.onDevice ? reinterpret_cast<char*>(run.devs.rank(idx).recv) : run.bufs[idx].recv;
    char* send =
        run.onDevice ? reinterpret_cast<char*>(run.devs.rank(idx).send) : run.bufs[idx].send;
    cudaStream_t stream =
        run.onDevice ? reinterpret_cast<cudaStream_t>(run.devs.rank(idx).stream) : nullptr;
    const char* sp = inPlace ? recv + t.counts.sendInplaceOffset * rank * elt : send;
    char* rp = inPlace ? recv + t.counts.recvInplaceOffset * rank * elt : recv;
    p.calls.push_back({run.comms[idx], rank, idx, sp, rp, stream});
  }
  return p;
}

bool startColl(const Placement& p, int iter) {
  ThreadCtx& t = *p.t;
  Run& run = *t.run;
  const CommApi& api = *run.api;
  const size_t shift = p.walk * (static_cast<size_t>(iter) % p.steps);
  const bool grouped = p.calls.size() > 1;
  if (grouped && !ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
  bool ok = true;
  for (const Placement::Call& c : p.calls) {
    if (run.onDevice && !deviceOk(run, run.devs.use(c.idx))) return false;
    ncclRedOp_t redop =
        static_cast<ncclRedOp_t>(p.op == OpKind::MulSum ? 0 : static_cast<int>(p.op));
    if (p.op == OpKind::MulSum) {
      alignas(16) char scalar[16] = {};
      encodeValue(p.type, premulScalar(c.rank), scalar);
      ok = ncclOk(run,
                  api.redOpCreatePreMulSum(&redop, scalar, p.type, ncclScalarHostImmediate, c.comm),
                  "ncclRedOpCreatePreMulSum");
      if (!ok) break;
    }
    ok =
        runColl(t, c.comm, c.rank, c.send + shift, c.recv + shift, p.type, redop, p.root, c.stream);
    if (p.op == OpKind::MulSum && ok)
      ok = ncclOk(run, api.redOpDestroy(redop, c.comm), "ncclRedOpDestroy");
    if (!ok) break;
  }
  if (grouped) ok = ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
  run.progress.fetch_add(1, std::memory_order_relaxed);
  // Host communicators complete inside the call; device ones are waited for where a result is
  // needed (syncThread). -z 1 adds nccl-tests' barrier after each operation.
  if (ok && run.opt.blocking == 1) ok = syncThread(t) && barrier(t);
  return ok;
}

// -c N: N checked operations after the timed ones (stopping at the first wrong one); *wrong:
// the wrong elements of the last, summed over every rank.
bool checkColl(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace,
               bool reportErrors, double* wrong) {
  ++t.rep;
  for (int c = 0; c < t.run->opt.check; ++c) {
    if (!initData(t, type, op, root, static_cast<uint64_t>(t.rep), inPlace)) return false;
    if (!startColl(placement(t, type, op, root, inPlace), 0)) return false;
    int64_t local = checkData(t, type, op, root, inPlace);
    if (local < 0) return false;
    if (reportErrors && local) t.errors++;
    *wrong = static_cast<double>(local);
    if (!sumOver(t, *wrong)) return false;
    if (*wrong != 0) break;
  }
  return true;
}

// One placement of one size: the timed iterations, the time combined over the ranks (-a),
// the checks, and the row's columns for it.
bool benchTime(ThreadCtx& t, ncclDataType_t type, OpKind op, int root, bool inPlace) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  const CommApi& api = *run.api;
  if (o.check && !initData(t, type, op, root, 99, inPlace)) return false;
  // Barrier first, then one untimed operation: the operation itself lines the ranks up to
  // within its own latency. The other way round (nccl-tests' order) the timer starts when
  // the barrier lets each process go, and ringcc-run's barrier, over the launcher's control
  // sockets, wakes its processes tens of microseconds apart: at 20 iterations that skew
  // doubled the time of an 8-byte all-reduce (docs/benchmarks.md, "Timing starts aligned").
  const Placement p = placement(t, type, op, root, inPlace);
  if (!barrier(t)) return false;
  if (!startColl(p, 0)) return false;  // sync
  if (!syncThread(t)) return false;

  auto start = Clock::now();
  for (int iter = 0; iter < o.iters; ++iter) {
    if (o.aggIters > 1 && !ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
    for (int a = 0; a < o.aggIters; ++a)
      if (!startColl(p, iter * o.aggIters + a)) return false;
    if (o.aggIters > 1 && !ncclOk(run, api.groupEnd(), "ncclGroupEnd")) return false;
  }
  double ops = static_cast<double>(o.iters) * o.aggIters;
  double cpuSec = std::chrono::duration<double>(Clock::now() - start).count() / ops;
  // Host communicators have finished every operation by now; device ones are waited for.
  if (!syncThread(t)) return false;
  double sec = std::chrono::duration<double>(Clock::now() - start).count() / ops;
  if (!aggregate(t, sec, o.average)) return false;
  Bandwidth bw = bandwidth(run.kind, t.counts.paramCount, typeInfo(type).size, sec, run.nranks);
  if (!barrier(t)) return false;

  bool reportErrors = o.check > 0 && checksPlacement(run.kind, inPlace);
  double wrong = 0;
  if (!checkColl(t, type, op, root, inPlace, reportErrors, &wrong)) return false;

  double timeUs = (o.reportCpuTime ? cpuSec : sec) * 1.0e6;
  if (t.thread == 0) {
    print(run, rowResult(timeUs, bw.algBw, bw.busBw, reportErrors, static_cast<int64_t>(wrong)));
    if (run.json) writeJsonResult(run, inPlace, timeUs, bw, reportErrors, wrong);
  }
  t.bwSum += bw.busBw;
  t.bwCount++;
  return true;
}

// Every size of one (type, op, root), after warming every size class up: a row each.
bool timeTest(ThreadCtx& t, ncclDataType_t type, OpKind op, const char* opLabel, int root) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  if (!barrier(t)) return false;
  // Warm up every size class (powers of two from minBytes), as current nccl-tests does.
  for (size_t size : sizeSweep(o.minBytes, run.maxBytes, 0, 2)) {
    setupSize(t, size, type);
    const Placement p = placement(t, type, op, root, /*inPlace=*/false);
    for (int w = 0; w < o.warmupIters; ++w)
      if (!startColl(p, w)) return false;
  }
  if (!syncThread(t)) return false;
  std::vector<size_t> sizes = sizeSweep(o.minBytes, run.maxBytes, o.stepBytes, o.stepFactor);
  const char* typeName = typeInfo(type).name;
  for (long cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle) {
    for (size_t size : sizes) {
      setupSize(t, size, type);
      size_t shown = std::max(t.sendBytes, t.recvBytes);
      if (t.thread == 0) {
        print(run, rowPreamble(shown, t.counts.paramCount, typeName, opLabel, root));
        if (run.json) writeJsonRowStart(run, shown, t.counts.paramCount, typeName, opLabel, root);
      }
      if (!benchTime(t, type, op, root, false)) return false;
      if (!benchTime(t, type, op, root, true)) return false;
      if (t.thread == 0) {
        print(run, "\n");
        if (run.json) writeJsonRowEnd(run);
      }
    }
  }
  return true;
}

}  // namespace

void threadMain(ThreadCtx& t) {
  Run& run = *t.run;
  const PerfOptions& o = run.opt;
  if (o.parallelInit && !initThreadComms(run, t.thread)) return;
  if (o.parallelInit && !barrier(t)) return;
  std::vector<ncclDataType_t> types = o.types;
  if (types.empty()) types.push_back(ncclFloat32);
  std::vector<int> ops = o.ops;
  if (!run.spec->hasOp || ops.empty()) ops = {static_cast<int>(OpKind::Sum)};
  std::vector<int> roots;
  if (!run.spec->hasRoot) {
    roots.push_back(-1);
  } else if (o.root == -1) {
    for (int r = 0; r < run.nranks; ++r) roots.push_back(r);
  } else {
    roots.push_back(o.root);
  }
  for (ncclDataType_t type : types)
    for (int opv : ops)
      for (int root : roots) {
        OpKind op = static_cast<OpKind>(opv);
        const char* label = run.spec->hasOp ? opName(op) : "none";
        if (!timeTest(t, type, op, label, root)) return;
      }
}

}  // namespace ringcc::bench::perf
