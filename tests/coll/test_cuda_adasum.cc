// ringccAllReduceAdasum on CUDA communicators, on the emulated driver (support/fake_cuda.h):
// the schedule queues its collectives as batch kernels and its local steps (products,
// coefficients, the combination) as ringccAdasumKernel launches on the caller's stream, and the
// fake runs both kernels' block code on host threads. Results are checked against the
// definition's reference (coll/adasum_case.h) once the streams have drained.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "coll/adasum_case.h"
#include "coll/cuda_ranks.h"
#include "nccl.h"
#include "ringcc.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

// Small connection buffers (slot boundaries inside the cases' sizes), a bounded timeout, and
// CUDA communicators.
struct CudaAdasumEnv {
  ScopedEnv device{"RINGCC_DEVICE", "cuda"};
  ScopedEnv buffsize{"NCCL_BUFFSIZE", "65536"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "20000"};
};

// Every case in one group per rank, one thread driving every rank, beside an all-reduce
// before them; waits for the streams and checks every rank's buffers and async error.
void runGroup(FakeCudaScope& cuda, CudaRanks& ranks, const std::vector<AdasumCase>& cases) {
  const int n = ranks.size();
  std::vector<std::vector<AdasumCase::Buffers>> bufs(cases.size());
  std::vector<std::vector<int>> sums(n, std::vector<int>(100));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 100; ++i) sums[r][i] = r + i;
    CHECK(ncclAllReduce(sums[r].data(), sums[r].data(), 100, ncclInt32, ncclSum, ranks.comms[r],
                        ranks.streams[r]) == ncclSuccess);
  }
  for (size_t c = 0; c < cases.size(); ++c)
    for (int r = 0; r < n; ++r) bufs[c].push_back(cases[c].buffers(r));
  for (size_t c = 0; c < cases.size(); ++c)
    for (int r = 0; r < n; ++r)
      CHECK(cases[c].call(ranks.comms[r], bufs[c][r], nullptr, ranks.streams[r]) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  cuda.synchronizeAll();  // (even after a failure: the buffers go when this returns)
  for (int r = 0; r < n; ++r) {
    INFO(n << " ranks, rank " << r);
    for (int i = 0; i < 100; ++i) CHECK(sums[r][i] == n * i + n * (n - 1) / 2);
    for (size_t c = 0; c < cases.size(); ++c) CHECK(cases[c].verify(r, bufs[c][r]) == "");
    ncclResult_t async = ncclInternalError;
    CHECK(ncclCommGetAsyncError(ranks.comms[r], &async) == ncclSuccess);
    CHECK(async == ncclSuccess);
  }
}

}  // namespace

TEST_CASE("Adasum on CUDA communicators: every type, segments and zero vectors, as kernels",
          "[cuda_adasum]") {
  FakeCudaScope cuda;
  CudaAdasumEnv env;
  // One rank (a copy), 2 and 4 (powers of two), 3 and 5 (extra ranks); a GPU each, and ranks
  // sharing GPUs (the prepare pass: docs/adasum.md, "CUDA").
  for (const std::vector<int>& devs :
       {std::vector<int>{0}, std::vector<int>{0, 1}, std::vector<int>{0, 1, 2},
        std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 0}, std::vector<int>{0, 1, 2, 3, 0}}) {
    const size_t adasumBefore = cuda.adasumKernelsRun();
    {
      CudaRanks ranks(cuda, devs);
      runGroup(cuda, ranks, adasumCases(ranks.size()));
    }
    INFO(devs.size() << " ranks");
    if (devs.size() > 1) CHECK(cuda.adasumKernelsRun() > adasumBefore);  // not the host path
    CHECK(cuda.liveDeviceAllocs() == 0);  // workspaces freed with the ranks
  }
}

TEST_CASE("Adasum on CUDA communicators: calls outside a group, one thread per rank, each "
          "call's workspace allocated while earlier calls are queued",
          "[cuda_adasum]") {
  // Each rank's thread (one GPU each, as NCCL's users run) calls on its own: a small case,
  // then one that needs a larger workspace (the first call's kernels may still be queued or
  // waiting for a peer when the second allocates), then a small one again, all queued on the
  // rank's stream before anything is waited for. With a GPU each, the later calls'
  // connections are made while the earlier calls' kernels run (each rank's allocations wait
  // only for its own GPU); ranks sharing GPUs prepare every batch first.
  FakeCudaScope cuda;
  CudaAdasumEnv env;
  for (const std::vector<int>& devs :
       {std::vector<int>{0, 1}, std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 0},
        std::vector<int>{0, 0, 1, 1}}) {
    CudaRanks ranks(cuda, devs);
    const int n = ranks.size();
    const std::vector<AdasumCase> cases = {
        AdasumCase(ncclFloat32, n, {1000}, false, 11),
        AdasumCase(ncclFloat64, n, {70000, 3, 29999}, true, 12),
        AdasumCase(ncclBfloat16, n, {513}, true, 13)};
    std::vector<std::vector<AdasumCase::Buffers>> bufs(cases.size());
    for (size_t c = 0; c < cases.size(); ++c)
      for (int r = 0; r < n; ++r) bufs[c].push_back(cases[c].buffers(r));
    std::vector<int> failed(n, 0);
    runThreads(n, [&](int r) {
      for (size_t c = 0; c < cases.size(); ++c)
        failed[r] += cases[c].call(ranks.comms[r], bufs[c][r], nullptr, ranks.streams[r]) !=
                     ncclSuccess;
    });
    cuda.synchronizeAll();
    for (int r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      CHECK(failed[r] == 0);
      for (size_t c = 0; c < cases.size(); ++c) CHECK(cases[c].verify(r, bufs[c][r]) == "");
    }
  }
  CHECK(cuda.liveDeviceAllocs() == 0);
}

TEST_CASE("Adasum's workspace on CUDA communicators lives for one call; suspend and resume "
          "around it",
          "[cuda_adasum]") {
  FakeCudaScope cuda;
  CudaAdasumEnv env;
  {
    CudaRanks ranks(cuda, {0, 1});
    runGroup(cuda, ranks, {AdasumCase(ncclFloat32, 2, {1000}, false, 20)});  // connected
    const size_t held = cuda.liveDeviceAllocs();
    runGroup(cuda, ranks, {AdasumCase(ncclFloat32, 2, {1 << 18}, false, 21)});
    // Allocated in stream order and freed once the streams got past the call.
    CHECK(cuda.liveDeviceAllocs() == held);
    std::vector<ncclResult_t> rc(2, ncclInternalError);
    runThreads(2, [&](int r) { rc[r] = ncclCommSuspend(ranks.comms[r], NCCL_SUSPEND_MEM); });
    CHECK(rc == std::vector<ncclResult_t>(2, ncclSuccess));
    CHECK(cuda.liveDeviceAllocs() == 2);  // only each rank's channel scratch
    for (ncclComm_t comm : ranks.comms) REQUIRE(ncclCommResume(comm) == ncclSuccess);
    runGroup(cuda, ranks, {AdasumCase(ncclFloat16, 2, {1 << 17, 5}, true, 22)});
  }
  CHECK(cuda.liveDeviceAllocs() == 0);
}

TEST_CASE("Adasum inside a CUDA graph capture is refused by the emulated driver, cleanly",
          "[cuda_adasum]") {
  // A real driver records the workspace as memory nodes of the graph; this emulation has none,
  // so cuMemAllocAsync fails: the call must fail with a CUDA error, not crash or hang, and the
  // communicator must keep working after the capture.
  FakeCudaScope cuda;
  CudaAdasumEnv env;
  CudaRanks ranks(cuda, {0, 1});
  const AdasumCase c(ncclFloat32, 2, {4096}, false, 30);
  std::vector<AdasumCase::Buffers> bufs = {c.buffers(0), c.buffers(1)};
  for (int r = 0; r < 2; ++r) cuda.beginCapture(reinterpret_cast<CuStream>(ranks.streams[r]));
  CapturedLog log;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 2; ++r) c.call(ranks.comms[r], bufs[r], nullptr, ranks.streams[r]);
  CHECK(ncclGroupEnd() == ncclUnhandledCudaError);
  CHECK(log.contains("cuMemAllocAsync"));
  for (int r = 0; r < 2; ++r) {
    FakeGraph graph;
    cuda.endCapture(reinterpret_cast<CuStream>(ranks.streams[r]), &graph);
  }
}
