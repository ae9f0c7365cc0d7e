// The CUDA engine (src/cuda/cuda_engine.h) end to end, on the emulated driver of
// tests/support/fake_cuda.h: only the driver is emulated; the engine, the p2p FIFOs "in device
// memory", uploads, launch packing and the batch kernel's block loop are the real code. Ranks
// are made by ncclCommInitAll with RINGCC_DEVICE=cuda (several on one device, or one per
// device), each with a stream of its own, and every result is checked bit for bit once the
// streams have drained.
#include <sys/mman.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/comm_api.h"
#include "bench/perf/driver.h"
#include "coll/coll_check.h"
#include "coll/cuda_ranks.h"
#include "nccl.h"
#include "src/base/cuda_driver.h"
#include "src/base/log.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

// Runs one case on every rank in one group, waits for the streams, and checks every buffer.
void runCase(FakeCudaScope& cuda, CudaRanks& ranks, const CollCase& c) {
  const CaseData data(c, ranks.size());
  std::vector<std::unique_ptr<CollRank>> runs;
  for (int r = 0; r < ranks.size(); ++r) {
    runs.push_back(std::make_unique<CollRank>(data, r, ranks.comms[r]));
    runs.back()->setStream(ranks.streams[r]);
  }
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (auto& run : runs) REQUIRE(run->issue() == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  cuda.synchronizeAll();
  for (int r = 0; r < ranks.size(); ++r) {
    INFO(c.describe(ranks.size()) << ", rank " << r);
    CHECK(runs[r]->check() == "");
    ncclResult_t async = ncclInternalError;
    CHECK(ncclCommGetAsyncError(ranks.comms[r], &async) == ncclSuccess);
    CHECK(async == ncclSuccess);
  }
}

}  // namespace

TEST_CASE("a loaded libcuda.so.1 is seen on every look, not only the first", "[cuda_engine]") {
  // cudaDriverIfLoaded's first look is racy if a look that found the driver is remembered as
  // "nothing new since": a second thread asking before the first stored its answer was told
  // there was no driver, and took CUDA buffers for pageable host memory (a rare cuda_grow
  // failure). Two looks in a row, nothing loaded in between, must agree.
  FakeCudaScope cuda;
  CHECK(libraryInProcess("libcuda.so.1"));
  CHECK(libraryInProcess("libcuda.so.1"));
}

TEST_CASE("CUDA communicators run every collective as kernels on their streams", "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  for (const std::vector<int>& devs :
       {std::vector<int>{0}, std::vector<int>{0, 0}, std::vector<int>{0, 1, 2, 3}}) {
    CudaRanks ranks(cuda, devs);
    uint64_t seed = 1;
    for (Coll coll : kAllColls) {
      for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {
        CollCase c;
        c.coll = coll;
        c.type = count == 1000 ? ncclBfloat16 : ncclFloat32;
        c.op = collReduces(coll) ? (count == 70001 ? Op::PreMulDevice : Op::Sum) : Op::Copy;
        c.count = count;
        c.root = ranks.size() - 1;
        c.inPlace = count == 1000;
        c.seed = seed++;
        runCase(cuda, ranks, c);
      }
    }
  }
  CHECK(cuda.kernelsRun() > 0);
  CHECK(cuda.liveDeviceAllocs() == 0);  // FIFOs, uploads and scratch freed with the ranks
}

TEST_CASE("CUDA communicators tune by the topology graph's links, host ones by host memory",
          "[cuda_engine]") {
  FakeCudaScope cuda;
  // An NVSwitch box: its ring search finds several channels, each adding bandwidth on GPUs.
  ScopedEnv topo("NCCL_TOPO_FILE", RINGCC_SOURCE_ROOT "/tests/topo/fixtures/dgx_h100.xml");
  ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "4");
  CollCase c;
  c.coll = Coll::AllReduce;
  c.type = ncclFloat32;
  c.op = Op::Sum;
  c.count = 4 << 20;  // 16 MiB
  c.seed = 5;
  for (const char* kind : {"cuda", "host"}) {
    ScopedEnv device("RINGCC_DEVICE", kind);
    CapturedLog log;
    ScopedEnv debug("NCCL_DEBUG", "INFO");
    ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "TUNING");
    resetLogging();
    if (std::string(kind) == "cuda") {
      CudaRanks ranks(cuda, {0, 1, 2, 3});
      runCase(cuda, ranks, c);  // exact on every rank, over 4 channels
    } else {
      std::vector<ncclComm_t> comms(4);
      REQUIRE(ncclCommInitAll(comms.data(), 4, nullptr) == ncclSuccess);
      const CaseData data(c, 4);
      std::vector<int> failures(4, 0);
      runThreads(4, [&](int r) {
        CollRank me(data, r, comms[r]);
        failures[r] = me.issue() != ncclSuccess || !me.check().empty();
      });
      for (int f : failures) CHECK(f == 0);
      for (ncclComm_t comm : comms) CHECK(ncclCommDestroy(comm) == ncclSuccess);
    }
    INFO(kind << " communicators");
    const std::string want = std::string(kind) == "cuda" ? "4 channels" : "1 channels";
    CHECK(log.contains("AllReduce: 4194304 x 4 bytes, 4 ranks: algorithm Ring"));
    CHECK(log.contains(want));
  }
  resetLogging();  // the settings of the scopes above are gone
}

TEST_CASE("CUDA ranks on GPUs without peer access share FIFOs in pinned host memory",
          "[cuda_engine]") {
  FakeCudaScope cuda;
  cuda.disablePeerAccess();
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  CapturedLog log;
  ScopedEnv debug("NCCL_DEBUG", "INFO");
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "P2P");
  resetLogging();
  {
    CudaRanks ranks(cuda, {0, 1, 2});
    uint64_t seed = 40;
    for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::AlltoAll}) {
      CollCase c;
      c.coll = coll;
      c.type = ncclFloat32;
      c.op = collReduces(coll) ? Op::Sum : Op::Copy;
      c.count = 70001;
      c.root = 1;
      c.seed = seed++;
      runCase(cuda, ranks, c);  // exact on every rank
    }
    CHECK(cuda.liveHostAllocs() > 0);  // the FIFOs, while the communicators live
  }
  CHECK(log.contains("pinned host (no peer access between the GPUs)"));
  CHECK(cuda.peerAccessCalls() == 0);  // nobody asked for what the GPUs cannot do
  CHECK(cuda.liveHostAllocs() == 0);   // freed with the connections
  CHECK(cuda.liveDeviceAllocs() == 0);
  resetLogging();  // (reopening the log file empties it: after the checks)
}

namespace {

// Issues `c` on every rank in one group, on the given streams (the ranks' own if empty).
ncclResult_t issueGroup(CudaRanks& ranks, const CaseData& data,
                        std::vector<std::unique_ptr<CollRank>>* runs,
                        const std::vector<CuStream>& streams = {}) {
  runs->clear();
  for (int r = 0; r < ranks.size(); ++r) {
    runs->push_back(std::make_unique<CollRank>(data, r, ranks.comms[r]));
    runs->back()->setStream(streams.empty() ? ranks.streams[r]
                                            : reinterpret_cast<cudaStream_t>(streams[r]));
  }
  if (ncclGroupStart() != ncclSuccess) return ncclInternalError;
  for (auto& run : *runs)
    if (run->issue() != ncclSuccess) return ncclInternalError;
  return ncclGroupEnd();
}

// Every rank of a group that failed holds the failure as its error, naming `text`.
void checkFailedEverywhere(CudaRanks& ranks, ncclResult_t code, const char* text) {
  for (ncclComm_t comm : ranks.comms) {
    ncclResult_t async = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess);
    CHECK(async == code);
    CHECK(std::string(ncclGetLastError(comm)).find(text) != std::string::npos);
  }
}

// CUDA ranks on `devs` that ran one all-reduce of `count` floats together (the ring's
// connections exist, its tables are uploaded); a kernel left waiting stops by itself after 4 s.
struct WarmRanks {
  WarmRanks(std::vector<int> devs, size_t count) : ranks(cuda, std::move(devs)) {
    c.count = count;
    runCase(cuda, ranks, c);
  }
  FakeCudaScope cuda;
  ScopedEnv device{"RINGCC_DEVICE", "cuda"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "4000"};
  CudaRanks ranks;
  CollCase c;
};
struct WarmPair : WarmRanks {
  WarmPair() : WarmRanks({0, 1}, 3000) {}
};
struct WarmOne : WarmRanks {
  WarmOne() : WarmRanks({0}, 5000) {}
};

// Failed communicators take no more calls: aborted, not destroyed.
void abortAll(CudaRanks& ranks) {
  for (ncclComm_t& comm : ranks.comms) {
    if (comm != nullptr) CHECK(ncclCommAbort(comm) == ncclSuccess);
    comm = nullptr;
  }
}

}  // namespace

TEST_CASE("a repeated call uploads nothing and a graph capture finds its tables", "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  CudaRanks ranks(cuda, {0});
  CollCase c;
  c.count = 4096;
  runCase(cuda, ranks, c);
  const size_t allocs = cuda.liveDeviceAllocs();
  c.seed = 2;  // new buffers and data, the same shape
  runCase(cuda, ranks, c);
  CHECK(cuda.liveDeviceAllocs() == allocs);
  // Captured on the same stream: the same shape is captured, and runs when the graph does.
  const CuStream s = reinterpret_cast<CuStream>(ranks.streams[0]);
  cuda.beginCapture(s);
  c.seed = 3;
  {
    const CaseData data(c, 1);
    CollRank run(data, 0, ranks.comms[0]);
    run.setStream(ranks.streams[0]);
    REQUIRE(run.issue() == ncclSuccess);
    FakeGraph graph;
    REQUIRE(cuda.endCapture(s, &graph) == kCuSuccess);
    cuda.synchronizeAll();
    CHECK(run.check() != "");  // captured, not run
    cuda.launchGraph(graph, s);
    cuda.synchronizeAll();
    CHECK(run.check() == "");
  }
  // A new shape would have to upload, which a capture forbids.
  cuda.beginCapture(s);
  c.coll = Coll::AllGather;  // another Program, not on the device yet
  const CaseData data(c, 1);
  CollRank run(data, 0, ranks.comms[0]);
  run.setStream(ranks.streams[0]);
  CHECK(run.issue() == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(ranks.comms[0])).find("before capturing") !=
        std::string::npos);
  FakeGraph graph;
  CHECK(cuda.endCapture(s, &graph) == kCuSuccess);  // refused before it touched the capture
  CHECK(cuda.captureErrors() == 0);
  CHECK(ncclCommAbort(ranks.comms[0]) == ncclSuccess);  // failed: it takes no more calls
  ranks.comms[0] = nullptr;
}

uint64_t memStat(ncclComm_t comm, ncclCommMemStat_t which) {
  uint64_t v = ~uint64_t{0};
  return ncclCommMemStats(comm, which, &v) == ncclSuccess ? v : ~uint64_t{0};
}

TEST_CASE("a suspended CUDA communicator frees its FIFOs and uploads; after resume it runs again",
          "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  {
    CudaRanks ranks(cuda, {0, 1});
    CollCase c;
    c.coll = Coll::AllReduce;
    c.type = ncclFloat32;
    c.op = Op::Sum;
    c.count = 70001;
    c.seed = 11;
    for (int cycle = 0; cycle < 2; ++cycle) {
      INFO("cycle " << cycle);
      runCase(cuda, ranks, c);
      const size_t running = cuda.liveDeviceAllocs();
      for (ncclComm_t comm : ranks.comms) {
        CHECK(memStat(comm, ncclStatGpuMemSuspend) > 0);  // FIFOs in GPU memory, uploads
        CHECK(memStat(comm, ncclStatGpuMemPersist) > 0);  // the channels' scratch
        CHECK(memStat(comm, ncclStatGpuMemTotal) ==
              memStat(comm, ncclStatGpuMemSuspend) + memStat(comm, ncclStatGpuMemPersist));
        CHECK(memStat(comm, ncclStatGpuMemSuspended) == 0);
      }
      // Collective: each rank on a thread of its own (the barrier), its kernels still queued.
      std::vector<ncclResult_t> rc(2, ncclInternalError);
      runThreads(2, [&](int r) { rc[r] = ncclCommSuspend(ranks.comms[r], NCCL_SUSPEND_MEM); });
      CHECK(rc[0] == ncclSuccess);
      CHECK(rc[1] == ncclSuccess);
      // Only each rank's channel scratch is left on the GPUs.
      CHECK(cuda.liveDeviceAllocs() == 2);
      CHECK(cuda.liveDeviceAllocs() < running);
      for (ncclComm_t comm : ranks.comms) {
        CHECK(memStat(comm, ncclStatGpuMemSuspend) == 0);
        CHECK(memStat(comm, ncclStatGpuMemSuspended) == 1);
        float x = 1;
        CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr) == ncclInvalidUsage);
      }
      for (ncclComm_t comm : ranks.comms) REQUIRE(ncclCommResume(comm) == ncclSuccess);
      c.seed += 10;  // new buffers and data: exact on connections and uploads made anew
      runCase(cuda, ranks, c);
      CHECK(memStat(ranks.comms[0], ncclStatGpuMemSuspend) > 0);
    }
  }
  CHECK(cuda.liveDeviceAllocs() == 0);
}

TEST_CASE("a CUDA communicator captured into a graph keeps its memory", "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  CudaRanks ranks(cuda, {0});
  CollCase c;
  c.count = 4096;
  runCase(cuda, ranks, c);  // uploads its tables: the capture below finds them
  const CuStream s = reinterpret_cast<CuStream>(ranks.streams[0]);
  cuda.beginCapture(s);
  c.seed = 2;
  const CaseData data(c, 1);
  CollRank run(data, 0, ranks.comms[0]);
  run.setStream(ranks.streams[0]);
  REQUIRE(run.issue() == ncclSuccess);
  FakeGraph graph;
  REQUIRE(cuda.endCapture(s, &graph) == kCuSuccess);
  CapturedLog log;
  const size_t allocs = cuda.liveDeviceAllocs();
  CHECK(ncclCommSuspend(ranks.comms[0], NCCL_SUSPEND_MEM) == ncclInvalidUsage);
  CHECK(log.contains("captured into a CUDA graph"));
  CHECK(cuda.liveDeviceAllocs() == allocs);
  CHECK(memStat(ranks.comms[0], ncclStatGpuMemSuspended) == 0);
  cuda.launchGraph(graph, s);  // still runs on what it captured
  cuda.synchronizeAll();
  CHECK(run.check() == "");
}

// Issue 28's hazards: each of these failed before two-phase group launch and capture-safe
// ordering (the emulated driver's strict rules make them fail here as they may on a GPU).

TEST_CASE("a group prepares every communicator's batch before it queues any kernel",
          "[cuda_engine][cuda_hazards]") {
  FakeCudaScope cuda;
  cuda.setIdleWaitLimit(2000);
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  ScopedEnv timeout("NCCL_TIMEOUT", "4000");  // a kernel left waiting stops by itself
  CudaRanks ranks(cuda, {0, 0, 0});
  // Every collective's first call makes connections and uploads its tables: allocations and
  // copies that wait until no kernel runs on the device. A peer's kernel queued before they
  // are done waits for this rank's, which never comes.
  uint64_t seed = 60;
  for (int round = 0; round < 2; ++round) {
    for (Coll coll : kAllColls) {
      CollCase c;
      c.coll = coll;
      c.type = ncclFloat32;
      c.op = collReduces(coll) ? Op::Sum : Op::Copy;
      c.count = 1000 + 7 * static_cast<size_t>(seed);  // a new shape each time
      c.root = 1;
      c.seed = seed++;
      INFO(c.describe(ranks.size()));
      const CaseData data(c, ranks.size());
      std::vector<std::unique_ptr<CollRank>> runs;
      const ncclResult_t r = issueGroup(ranks, data, &runs);
      CHECK(r == ncclSuccess);
      CHECK(cuda.stalls() == 0);
      if (r != ncclSuccess) {
        abortAll(ranks);
        return;
      }
      cuda.synchronizeAll();
      for (int k = 0; k < ranks.size(); ++k) CHECK(runs[k]->check() == "");
    }
  }
}

TEST_CASE("grouped sends to self on a CUDA communicator are exact", "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  CudaRanks ranks(cuda, {0});
  // Each pair pushes two counts; the Program reads one (launch_plan packs the Program's).
  constexpr int kOps = 5;
  std::vector<float> in(kOps * 10), out(kOps * 10, 0.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) + 0.5f;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < kOps; ++i) {
    REQUIRE(ncclSend(&in[i * 10], 10, ncclFloat, 0, ranks.comms[0], ranks.streams[0]) ==
            ncclSuccess);
    REQUIRE(ncclRecv(&out[i * 10], 10, ncclFloat, 0, ranks.comms[0], ranks.streams[0]) ==
            ncclSuccess);
  }
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  cuda.synchronizeAll();
  CHECK(out == in);
}

TEST_CASE_METHOD(WarmPair, "a group in which one batch cannot be packed queues no kernel anywhere",
                 "[cuda_engine][cuda_hazards]") {
  // Rank 0 sends to itself so many times that its batch needs more argument words than a
  // launch carries (refused while packing); rank 1's all-reduce is fine on its own, and its
  // kernel, once queued, would wait for rank 0's.
  constexpr int kOps = 100;
  std::vector<float> in(kOps, 1.0f), out(kOps, 0.0f), x(c.count, 1.0f);
  const size_t queued = cuda.kernelsQueued();
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < kOps; ++i) {
    REQUIRE(ncclSend(&in[i], 1, ncclFloat, 0, ranks.comms[0], ranks.streams[0]) == ncclSuccess);
    REQUIRE(ncclRecv(&out[i], 1, ncclFloat, 0, ranks.comms[0], ranks.streams[0]) == ncclSuccess);
  }
  REQUIRE(ncclAllReduce(x.data(), x.data(), c.count, ncclFloat, ncclSum, ranks.comms[1],
                        ranks.streams[1]) == ncclSuccess);
  const ncclResult_t r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage);
  CHECK(cuda.kernelsQueued() == queued);  // rank 1's kernel was not queued either
  checkFailedEverywhere(ranks, r, "argument words");
  abortAll(ranks);
}

TEST_CASE_METHOD(WarmPair,
                 "a group with one captured stream that cannot upload queues no kernel anywhere",
                 "[cuda_engine][cuda_hazards]") {
  // Rank 0's stream is captured and its call has a new shape: it cannot upload. Rank 1's
  // stream is ordinary, and its kernel would wait for rank 0's for good. Its upload must not
  // allocate: in the default (global) capture mode, cuMemAlloc on any thread while a capture
  // is active fails and invalidates the capture.
  const CuStream s0 = reinterpret_cast<CuStream>(ranks.streams[0]);
  cuda.beginCapture(s0);
  c.coll = Coll::AllGather;
  const CaseData data(c, ranks.size());
  std::vector<std::unique_ptr<CollRank>> runs;
  const size_t queued = cuda.kernelsQueued();
  CHECK(issueGroup(ranks, data, &runs) == ncclInvalidUsage);
  CHECK(cuda.kernelsQueued() == queued);
  checkFailedEverywhere(ranks, ncclInvalidUsage, "before capturing");  // both, each
  FakeGraph graph;
  CHECK(cuda.endCapture(s0, &graph) == kCuSuccess);
  abortAll(ranks);
}

TEST_CASE_METHOD(WarmOne, "a capture on another stream waits on no event from outside it",
                 "[cuda_engine][cuda_hazards]") {
  // The warm-up ran on the rank's stream: tables uploaded, the ordinary event recorded there.
  // vLLM-style: the capture runs on a side stream.
  const CuStream side = cuda.newStream();
  cuda.beginCapture(side);
  c.seed = 7;
  const CaseData data(c, 1);
  std::vector<std::unique_ptr<CollRank>> runs;
  CHECK(issueGroup(ranks, data, &runs, {side}) == ncclSuccess);
  FakeGraph graph;
  CHECK(cuda.endCapture(side, &graph) == kCuSuccess);  // not invalidated
  CHECK(cuda.captureErrors() == 0);
  if (graph != nullptr) {
    cuda.launchGraph(graph, side);
    cuda.launchGraph(graph, side);  // replayed
    cuda.synchronizeAll();
    CHECK(runs[0]->check() == "");
  }
}

TEST_CASE_METHOD(WarmOne, "after a capture, ordinary calls on other streams keep working",
                 "[cuda_engine][cuda_hazards]") {
  // Captured on the rank's own stream (no wait across streams), then replayed.
  const CuStream s = reinterpret_cast<CuStream>(ranks.streams[0]);
  cuda.beginCapture(s);
  c.seed = 8;
  {
    const CaseData data(c, 1);
    std::vector<std::unique_ptr<CollRank>> runs;
    REQUIRE(issueGroup(ranks, data, &runs) == ncclSuccess);
    FakeGraph graph;
    REQUIRE(cuda.endCapture(s, &graph) == kCuSuccess);
    cuda.launchGraph(graph, s);
    cuda.synchronizeAll();
    CHECK(runs[0]->check() == "");
  }
  // Ordinary calls on two other streams: neither may wait on an event recorded in the capture.
  for (int call = 0; call < 2; ++call) {
    const CuStream other = cuda.newStream();
    c.seed = 9 + call;
    const CaseData data(c, 1);
    std::vector<std::unique_ptr<CollRank>> runs;
    CHECK(issueGroup(ranks, data, &runs, {other}) == ncclSuccess);
    cuda.synchronizeAll();
    CHECK(runs[0]->check() == "");
  }
  CHECK(cuda.captureErrors() == 0);
}

TEST_CASE_METHOD(WarmPair,
                 "a captured call that needs a new connection is refused before it allocates",
                 "[cuda_engine][cuda_hazards]") {
  std::vector<CuStream> streams;
  for (cudaStream_t s : ranks.streams) {
    streams.push_back(reinterpret_cast<CuStream>(s));
    cuda.beginCapture(streams.back());
  }
  c.coll = Coll::AlltoAll;  // connections to every peer, made on first use
  const CaseData data(c, ranks.size());
  std::vector<std::unique_ptr<CollRank>> runs;
  CHECK(issueGroup(ranks, data, &runs) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(ranks.comms[0])).find("before capturing") !=
        std::string::npos);
  CHECK(cuda.captureErrors() == 0);  // nothing the capture forbids was called
  for (CuStream s : streams) {
    FakeGraph graph;
    CHECK(cuda.endCapture(s, &graph) == kCuSuccess);
  }
  abortAll(ranks);
}

namespace {

// Polls ncclCommGetAsyncError until it is not ncclSuccess, for at most 10 s.
ncclResult_t awaitAsyncError(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < 10000 && async == ncclSuccess; ++i) {
    REQUIRE(ncclCommGetAsyncError(comm, &async) == ncclSuccess);
    if (async == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return async;
}

}  // namespace

TEST_CASE("mismatched calls stop the kernels and become the communicators' async errors",
          "[cuda_faults]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  std::vector<ncclComm_t> comms(2);
  int devs[2] = {0, 0};
  REQUIRE(ncclCommInitAll(comms.data(), 2, devs) == ncclSuccess);
  std::vector<float> a(200, 1.0f), b(200, 1.0f);
  const cudaStream_t s0 = reinterpret_cast<cudaStream_t>(cuda.newStream());
  const cudaStream_t s1 = reinterpret_cast<cudaStream_t>(cuda.newStream());
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(a.data(), a.data(), 100, ncclFloat, ncclSum, comms[0], s0) == ncclSuccess);
  REQUIRE(ncclAllReduce(b.data(), b.data(), 200, ncclFloat, ncclSum, comms[1], s1) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);  // queued: the kernels find the mismatch
  // The rank that finds it stops and marks the connections failed; the other stops on that.
  for (ncclComm_t comm : comms) {
    CHECK(awaitAsyncError(comm) == ncclInvalidUsage);
    CHECK(std::string(ncclGetLastError(comm)).find("calls differ") != std::string::npos);
  }
  for (ncclComm_t comm : comms) CHECK(ncclCommAbort(comm) == ncclSuccess);
  cuda.synchronizeAll();
  CHECK(cuda.liveDeviceAllocs() == 0);
}

namespace {

// Two CUDA ranks on devices 0 and 1, a stream each, that ran one all-reduce together (so their
// connections exist).
struct ConnectedPair {
  // Large enough that no rank can finish its part from what the other sent before it blocked.
  static constexpr size_t kCount = size_t{1} << 20;
  explicit ConnectedPair(FakeCudaScope& cuda)
      : comms(2),
        stream(cuda.newStream()),
        other(cuda.newStream()),
        x(kCount, 1.0f),
        y(kCount, 1.0f) {
    int devs[2] = {0, 1};
    REQUIRE(ncclCommInitAll(comms.data(), 2, devs) == ncclSuccess);
    REQUIRE(ncclGroupStart() == ncclSuccess);
    REQUIRE(ncclAllReduce(x.data(), x.data(), kCount, ncclFloat, ncclSum, comms[0],
                          reinterpret_cast<cudaStream_t>(stream)) == ncclSuccess);
    REQUIRE(ncclAllReduce(y.data(), y.data(), kCount, ncclFloat, ncclSum, comms[1],
                          reinterpret_cast<cudaStream_t>(other)) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    cuda.synchronizeAll();
    CHECK(x[0] == 2.0f);
  }
  std::vector<ncclComm_t> comms;
  CuStream stream, other;
  std::vector<float> x, y;
};

}  // namespace

TEST_CASE("ncclCommAbort frees a kernel that waits for a peer that never calls", "[cuda_faults]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  ConnectedPair p(cuda);
  std::vector<ncclComm_t>& comms = p.comms;
  const CuStream stream = p.stream, other = p.other;
  const size_t n = ConnectedPair::kCount;
  std::vector<float>&x = p.x, &y = p.y;
  // Only rank 0 calls: its kernel is queued and waits on rank 1 for good.
  REQUIRE(ncclAllReduce(x.data(), x.data(), n, ncclFloat, ncclSum, comms[0],
                        reinterpret_cast<cudaStream_t>(stream)) == ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(cuda.driver().cuStreamQuery(stream) == kCuErrorNotReady);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(comms[0], &async) == ncclSuccess);
  CHECK(async == ncclSuccess);  // still running: not an error
  CHECK(ncclCommAbort(comms[0]) == ncclSuccess);
  CHECK(cuda.driver().cuStreamSynchronize(stream) == kCuSuccess);  // returns: the kernel stopped
  // Rank 1, whose next kernel would wait on the aborted rank, learns of it from the
  // connection: its call's kernel stops with an error instead of waiting for good.
  REQUIRE(ncclAllReduce(y.data(), y.data(), n, ncclFloat, ncclSum, comms[1],
                        reinterpret_cast<cudaStream_t>(other)) == ncclSuccess);
  CHECK(awaitAsyncError(comms[1]) == ncclRemoteError);
  CHECK(ncclCommAbort(comms[1]) == ncclSuccess);
  CHECK(cuda.liveDeviceAllocs() == 0);
}

TEST_CASE("a kernel that waits longer than NCCL_TIMEOUT stops, and its peer's next one too",
          "[cuda_faults]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  ScopedEnv timeout("NCCL_TIMEOUT", "300");  // read when the communicators are made
  ConnectedPair p(cuda);                     // (a wait shorter than the timeout is fine)
  std::vector<ncclComm_t>& comms = p.comms;
  const CuStream stream = p.stream, other = p.other;
  const size_t n = ConnectedPair::kCount;
  std::vector<float>&x = p.x, &y = p.y;
  // Only rank 0 calls.
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(ncclAllReduce(x.data(), x.data(), n, ncclFloat, ncclSum, comms[0],
                        reinterpret_cast<cudaStream_t>(stream)) == ncclSuccess);
  // The kernel ends by itself: nobody aborts it.
  CHECK(cuda.driver().cuStreamSynchronize(stream) == kCuSuccess);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(awaitAsyncError(comms[0]) == ncclRemoteError);
  const std::string why = ncclGetLastError(comms[0]);
  CHECK(why.find("NCCL_TIMEOUT") != std::string::npos);
  CHECK(why.find("300 ms") != std::string::npos);
  // Rank 1's next kernel finds the connections marked failed and stops too.
  REQUIRE(ncclAllReduce(y.data(), y.data(), n, ncclFloat, ncclSum, comms[1],
                        reinterpret_cast<cudaStream_t>(other)) == ncclSuccess);
  CHECK(awaitAsyncError(comms[1]) == ncclRemoteError);
  for (ncclComm_t c : comms) CHECK(ncclCommAbort(c) == ncclSuccess);
  CHECK(cuda.liveDeviceAllocs() == 0);
}

namespace {

// The library's entry points, as this test program links them.
bench::CommApi linkedCommApi() {
  bench::CommApi a;
  a.getVersion = ncclGetVersion;
  a.getUniqueId = ncclGetUniqueId;
  a.commInitRank = ncclCommInitRank;
  a.commInitAll = ncclCommInitAll;
  a.commDestroy = ncclCommDestroy;
  a.commAbort = ncclCommAbort;
  a.commCount = ncclCommCount;
  a.commUserRank = ncclCommUserRank;
  a.groupStart = ncclGroupStart;
  a.groupEnd = ncclGroupEnd;
  a.allReduce = ncclAllReduce;
  a.allGather = ncclAllGather;
  a.reduceScatter = ncclReduceScatter;
  a.broadcast = ncclBroadcast;
  a.reduce = ncclReduce;
  a.alltoAll = ncclAlltoAll;
  a.send = ncclSend;
  a.recv = ncclRecv;
  a.redOpCreatePreMulSum = ncclRedOpCreatePreMulSum;
  a.redOpDestroy = ncclRedOpDestroy;
  a.getErrorString = ncclGetErrorString;
  a.getLastError = ncclGetLastError;
  a.commMemoryKind = ringccCommMemoryKind;
  return a;
}

// Runs a perf tool in this process; its output and exit code.
struct PerfRun {
  int code = -1;
  std::string out, err;
};
PerfRun runPerfTool(bench::CollKind kind, std::vector<std::string> args, const CudaDriver* cuda) {
  args.insert(args.begin(), "perf_tool");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  const bench::CommApi api = linkedCommApi();
  PerfRun r;
  r.code = bench::runPerf(kind, static_cast<int>(args.size()), argv.data(), api,
                          bench::PerfIo{out, err, cuda});
  for (auto [f, text] : {std::pair{out, &r.out}, std::pair{err, &r.err}}) {
    std::rewind(f);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text->append(buf, n);
    std::fclose(f);
  }
  return r;
}

}  // namespace

TEST_CASE("the perf tools run CUDA communicators on device buffers, checked", "[cuda_engine]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  for (auto [kind, threads] :
       {std::pair{bench::CollKind::AllReduce, "1"}, std::pair{bench::CollKind::AllGather, "2"},
        std::pair{bench::CollKind::Broadcast, "1"}}) {
    // 2 ranks per thread on devices 0, 1 (and 2, 3): a group per thread, data checked.
    const PerfRun r = runPerfTool(kind,
                                  {"-t", threads, "-g", "2", "-b", "8", "-e", "256K", "-f", "8",
                                   "-n", "2", "-w", "1", "-c", "1"},
                                  &cuda.driver());
    INFO(r.out << r.err);
    if (std::getenv("SHOW_PERF")) std::fprintf(stderr, "%s%s", r.out.c_str(), r.err.c_str());
    CHECK(r.code == 0);
    CHECK(r.out.find("device  1 [cuda] CUDA device memory") != std::string::npos);
    CHECK(r.out.find("# Out of bounds values : 0 OK") != std::string::npos);
    CHECK(r.out.find("262144") != std::string::npos);  // the last size ran
  }
  CHECK(cuda.kernelsRun() > 0);
  CHECK(cuda.liveDeviceAllocs() == 0);  // the tool's buffers and the communicators' memory
}

namespace {

// How the ranks of cudaRankProcess sit.
struct ProcLayout {
  bool oneGpu = false;        // every rank on device 0 (else rank % 4)
  bool noPeerAccess = false;  // the emulated GPUs cannot write into each other's memory
  bool ipc = false;           // expected: senders write into slots in their peers' GPUs
  bool suspend = false;       // suspend (NCCL_SUSPEND_MEM) and resume halfway through the cases
};

// ncclCommSuspend(NCCL_SUSPEND_MEM) on a rank of cudaRankProcess: its connections' host memory
// is unregistered, its peers' GPU blocks closed, nothing suspendable counted; then resumed.
// The number of failures (printed).
int suspendAndResume(FakeCudaScope& cuda, ncclComm_t comm, int rank) {
  int bad = 0;
  auto no = [&](const char* what) {
    std::fprintf(stderr, "[cuda procs] rank %d: %s\n", rank, what);
    ++bad;
  };
  uint64_t held = 0, after = ~uint64_t{0}, suspended = 0;
  ncclCommMemStats(comm, ncclStatGpuMemSuspend, &held);
  if (held == 0) no("nothing suspendable counted before the suspend");
  if (ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclSuccess) {
    no("ncclCommSuspend failed");
    return bad;
  }
  ncclCommMemStats(comm, ncclStatGpuMemSuspend, &after);
  ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended);
  if (after != 0 || suspended != 1) no("memory still counted, or not suspended");
  if (cuda.liveHostRegistrations() != 0) no("host memory still registered while suspended");
  if (cuda.liveIpcImports() != 0) no("peers' GPU blocks still open while suspended");
  if (ncclCommResume(comm) != ncclSuccess) no("ncclCommResume failed");
  return bad;
}

// One CUDA rank in a forked process (its own emulated driver), running `cases` on a stream of
// its own; returns how many failed (printed). While the communicator lives its connections'
// host memory is registered for the "GPU" (shm segments' control blocks or whole FIFOs, UCX
// FIFOs), and, with layout.ipc, its sends opened its peers' GPU memory (CUDA IPC) and nothing
// else did; destroying it unregisters every range and closes every import.
int cudaRankProcess(int rank, int nranks, const ncclUniqueId& id,
                    const std::vector<CollCase>& cases, const ProcLayout& layout = {}) {
  FakeCudaScope cuda;
  if (layout.noPeerAccess) cuda.disablePeerAccess();
  setenv("RINGCC_DEVICE", "cuda", 1);
  CuContext ctx = nullptr;
  if (cuda.driver().cuDevicePrimaryCtxRetain(&ctx, layout.oneGpu ? 0 : rank % 4) != kCuSuccess ||
      cuda.driver().cuCtxSetCurrent(ctx) != kCuSuccess)
    return 100;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 10;
  const auto stream = reinterpret_cast<cudaStream_t>(cuda.newStream());
  int bad = 0;
  for (const CollCase& c : cases) {
    if (layout.suspend && &c == &cases[cases.size() / 2] && suspendAndResume(cuda, comm, rank)) {
      ++bad;
      break;
    }
    const CaseData data(c, nranks);
    CollRank me(data, rank, comm);
    me.setStream(stream);
    const ncclResult_t r = me.issue();
    cuda.synchronizeAll();
    ncclResult_t async = ncclInternalError;
    ncclCommGetAsyncError(comm, &async);
    std::string why = r != ncclSuccess       ? std::string("returned ") + ncclGetErrorString(r)
                      : async != ncclSuccess ? std::string("async ") + ncclGetErrorString(async)
                                             : me.check();
    if (!why.empty()) {
      std::fprintf(stderr, "[cuda procs] %s rank %d: %s\n", c.describe(nranks).c_str(), rank,
                   why.c_str());
      ++bad;
      break;  // the others may now wait for this rank
    }
  }
  if (cuda.liveHostRegistrations() == 0) {
    std::fprintf(stderr, "[cuda procs] rank %d: no host memory was registered\n", rank);
    ++bad;
  }
  if (layout.ipc ? cuda.liveIpcImports() == 0 : cuda.ipcOpens() != 0) {
    std::fprintf(stderr, "[cuda procs] rank %d: %zu peer GPU blocks opened, %s\n", rank,
                 cuda.ipcOpens(), layout.ipc ? "expected some" : "expected none");
    ++bad;
  }
  if (ncclCommDestroy(comm) != ncclSuccess) ++bad;
  if (cuda.liveHostRegistrations() != 0 || cuda.liveDeviceAllocs() != 0 ||
      cuda.liveIpcImports() != 0) {
    std::fprintf(
        stderr, "[cuda procs] rank %d: %zu registrations, %zu device blocks, %zu imports left\n",
        rank, cuda.liveHostRegistrations(), cuda.liveDeviceAllocs(), cuda.liveIpcImports());
    ++bad;
  }
  return bad;
}

std::vector<CollCase> everyCollective(int root, uint64_t seed) {
  std::vector<CollCase> cases;
  for (Coll coll : kAllColls)
    for (size_t count : {size_t{1}, size_t{70001}}) {
      CollCase c;
      c.coll = coll;
      c.type = count == 1 ? ncclBfloat16 : ncclFloat32;
      c.op = collReduces(coll) ? Op::Sum : Op::Copy;
      c.count = count;
      c.root = root;
      c.inPlace = count == 1;
      c.seed = seed++;
      cases.push_back(c);
    }
  return cases;
}

}  // namespace

// Forked ranks: this group's process starts no thread before it forks (tests/support/ranks.h).
TEST_CASE("CUDA ranks in different processes write into each other's GPUs (CUDA IPC)",
          "[cuda_procs]") {
  const int n = 3;
  const std::vector<CollCase> cases = everyCollective(n - 1, 70);
  const ncclUniqueId id = newUniqueId();
  ProcLayout layout;
  layout.ipc = true;
  layout.suspend = true;  // the imports close, and the cases after the resume open them anew
  CHECK(runProcesses(n, [&](int rank) { return cudaRankProcess(rank, n, id, cases, layout); }) ==
        0);
}

TEST_CASE("CUDA ranks in processes sharing one GPU meet in its memory", "[cuda_procs]") {
  const int n = 2;
  const std::vector<CollCase> cases = everyCollective(0, 110);
  const ncclUniqueId id = newUniqueId();
  ProcLayout layout;
  layout.oneGpu = true;
  layout.ipc = true;
  CHECK(runProcesses(n, [&](int rank) { return cudaRankProcess(rank, n, id, cases, layout); }) ==
        0);
}

TEST_CASE("CUDA ranks of processes whose GPUs cannot reach each other stage through shm",
          "[cuda_procs]") {
  const int n = 3;
  const std::vector<CollCase> cases = everyCollective(1, 130);
  ProcLayout layout;
  layout.noPeerAccess = true;
  layout.suspend = true;
  {
    const ncclUniqueId id = newUniqueId();
    CHECK(runProcesses(n, [&](int rank) { return cudaRankProcess(rank, n, id, cases, layout); }) ==
          0);
  }
  // NCCL_P2P_DISABLE=1 asks for the same where the GPUs could.
  ScopedEnv off("NCCL_P2P_DISABLE", "1");
  const ncclUniqueId id = newUniqueId();
  CHECK(runProcesses(n, [&](int rank) { return cudaRankProcess(rank, n, id, cases, {}); }) == 0);
}

TEST_CASE("CUDA ranks across a network stage through host memory that the proxy moves",
          "[cuda_procs]") {
  ScopedEnv net("NCCL_NET", "ucx");  // every connection over UCX, on loopback
  ScopedEnv devices("UCX_NET_DEVICES", "lo");
  const int n = 2;
  const std::vector<CollCase> cases = everyCollective(1, 90);
  const ncclUniqueId id = newUniqueId();
  ProcLayout layout;
  layout.suspend = true;  // UCX endpoints and staging FIFOs closed, then made anew
  CHECK(runProcesses(n, [&](int rank) { return cudaRankProcess(rank, n, id, cases, layout); }) ==
        0);
}

namespace {

// What a survivor of peerLeaves() saw: exit status 0 (ncclRemoteError, another message) or
// kSawDeath (ncclRemoteError naming the dead rank); anything else is a failure.
constexpr int kSawDeath = 20;

// n CUDA ranks in forked processes run an all-reduce together; then rank `leaver` leaves
// (exits without destroying its communicator if `dies`, else aborts it and exits) and the
// others run the same all-reduce again. Their kernels must stop with ncclRemoteError, long
// before NCCL_TIMEOUT (two minutes here), their last error containing `expect` (or, for a
// death, that a process died, or kSawDeath's message). In a ring of 4 one survivor is not
// the leaver's neighbour: it stops because a neighbour's kernel stopped and passed the reason on
// (or, once that neighbour aborted on seeing it, because the neighbour's other blocks stopped).
// Returns each rank's exit status (runProcessesStatus).
std::vector<int> peerLeaves(int n, int leaver, bool dies, const char* expect) {
  ScopedEnv timeout("NCCL_TIMEOUT", "120000");
  const ncclUniqueId id = newUniqueId();
  // How many ranks have checked their first result, shared by the forked processes: the
  // leaver waits for all of them, since over UCX its last sends may still be in flight when
  // its own kernel is done, and a process that exits then cuts them off.
  void* shared =
      mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  auto* firstDone = static_cast<int*>(shared);
  *firstDone = 0;
  std::vector<int> statuses = runProcessesStatus(n, [&](int rank) {
    FakeCudaScope cuda;
    setenv("RINGCC_DEVICE", "cuda", 1);
    CuContext ctx = nullptr;
    if (cuda.driver().cuDevicePrimaryCtxRetain(&ctx, rank) != kCuSuccess ||
        cuda.driver().cuCtxSetCurrent(ctx) != kCuSuccess)
      return 100;
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 10;
    const auto stream = reinterpret_cast<cudaStream_t>(cuda.newStream());
    // The first all-reduce makes the connections.
    CollCase c;
    c.count = 1024;
    const CaseData data(c, n);
    {
      CollRank first(data, rank, comm);
      first.setStream(stream);
      if (first.issue() != ncclSuccess) return 11;
      cuda.synchronizeAll();
      if (!first.check().empty()) return 12;
    }
    __atomic_add_fetch(firstDone, 1, __ATOMIC_ACQ_REL);
    if (rank == leaver) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (__atomic_load_n(firstDone, __ATOMIC_ACQUIRE) < n &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return dies || ncclCommAbort(comm) == ncclSuccess ? 0 : 14;
    }
    CollRank me(data, rank, comm);
    me.setStream(stream);
    if (me.issue() != ncclSuccess) return 13;
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t async = ncclSuccess;
    while (async == ncclSuccess &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ncclCommGetAsyncError(comm, &async);
    }
    const std::string last = ncclGetLastError(comm);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[cuda procs] rank %d: %s after %.2f s: %s\n", rank,
                 ncclGetErrorString(async), s, last.c_str());
    const std::string death = "rank " + std::to_string(leaver) + "'s process died";
    const bool sawDeath = dies && last.find(death) != std::string::npos;
    int bad = 0;
    if (async != ncclRemoteError) ++bad;
    // (A survivor that saw the error first and aborted may itself look dead to a slower one.)
    const bool heardOfDeath = dies && last.find("process died") != std::string::npos;
    if (!sawDeath && !heardOfDeath && last.find(expect) == std::string::npos) ++bad;
    if (ncclCommAbort(comm) != ncclSuccess) ++bad;
    return bad > 0 ? 1 : sawDeath ? kSawDeath : 0;
  });
  munmap(shared, sizeof(int));
  return statuses;
}

// Exit codes of runProcessesStatus's children (-1 for one that did not end in time).
std::vector<int> exitCodes(const std::vector<int>& statuses) {
  std::vector<int> codes;
  for (int st : statuses) codes.push_back(st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return codes;
}

}  // namespace

TEST_CASE("a CUDA rank's kernel stops when a peer's process dies, long before NCCL_TIMEOUT",
          "[cuda_procs]") {
  const std::vector<int> codes =
      exitCodes(peerLeaves(4, 2, /*dies=*/true, "a peer's kernel stopped"));
  int sawDeath = 0;
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ", exit code " << codes[r]);
    if (r == 2) continue;  // the one that died (its exit status is its own)
    CHECK((codes[r] == 0 || codes[r] == kSawDeath));
    sawDeath += codes[r] == kSawDeath;
  }
  CHECK(sawDeath >= 1);  // a neighbour of the dead rank names it
}

TEST_CASE("a CUDA rank's kernel stops when a peer in another process aborts", "[cuda_procs]") {
  for (int code : exitCodes(peerLeaves(4, 1, /*dies=*/false, "a peer's kernel stopped")))
    CHECK(code == 0);
}

TEST_CASE("a CUDA rank's kernel stops when a peer across the network dies", "[cuda_procs]") {
  ScopedEnv net("NCCL_NET", "ucx");  // every connection over UCX, on loopback
  ScopedEnv devices("UCX_NET_DEVICES", "lo");
  const std::vector<int> codes =
      exitCodes(peerLeaves(3, 2, /*dies=*/true, "a peer's kernel stopped"));
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ", exit code " << codes[r]);
    CHECK((codes[r] == 0 || codes[r] == kSawDeath));
  }
}
