// One-sided calls on CUDA communicators (src/rma/rma_device.h), on the emulated driver
// (support/fake_cuda.h): windows of GPU memory, puts as stream-ordered copies plus the signal
// kernel, waits as the wait kernel on the caller's stream (ringccRmaKernel, whose block body
// the fake runs on a host thread). Ranks in one process (threads, a GPU each or sharing one)
// and in forked processes (the window opened by CUDA IPC).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "coll/cuda_ranks.h"
#include "nccl.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

struct CudaRmaEnv {
  ScopedEnv device{"RINGCC_DEVICE", "cuda"};
  ScopedEnv timeout{"NCCL_TIMEOUT", "20000"};
};

// cuMemAlloc'd memory of device `dev`, zeroed; freed with the object. The fake's device memory
// is host memory, so the test reads and writes it directly.
class DeviceMemory {
 public:
  DeviceMemory(FakeCudaScope& cuda, int dev, size_t bytes) : cuda_(cuda) {
    const CudaDriver& cu = cuda.driver();
    CuContext ctx = nullptr;
    REQUIRE(cu.cuDevicePrimaryCtxRetain(&ctx, dev) == kCuSuccess);
    REQUIRE(cu.cuCtxSetCurrent(ctx) == kCuSuccess);
    REQUIRE(cu.cuMemAlloc(&ptr_, bytes) == kCuSuccess);
    std::memset(data(), 0, bytes);
  }
  ~DeviceMemory() { cuda_.driver().cuMemFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  int32_t* data() const { return reinterpret_cast<int32_t*>(ptr_); }
  CuDevicePtr address() const { return ptr_; }

 private:
  FakeCudaScope& cuda_;
  CuDevicePtr ptr_ = 0;
};

constexpr size_t kCount = 1000;  // int32 elements of one put

int32_t valueOf(int rank, size_t i) { return rank * 100000 + static_cast<int32_t>(i) + 1; }

// Every rank registers a window of n * kCount ints (one thread drives all: a group).
std::vector<ncclWindow_t> registerWindows(CudaRanks& ranks,
                                          const std::vector<std::unique_ptr<DeviceMemory>>& w) {
  std::vector<ncclWindow_t> wins(ranks.size(), nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < ranks.size(); ++r)
    CHECK(ncclCommWindowRegister(ranks.comms[r], w[r]->data(), ranks.size() * kCount * 4, &wins[r],
                                 0) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (ncclWindow_t win : wins) REQUIRE(win != nullptr);
  return wins;
}

// (CHECK only: PutRing's destructor calls it.)
void deregisterWindows(CudaRanks& ranks, const std::vector<ncclWindow_t>& wins) {
  CHECK(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < ranks.size(); ++r)
    CHECK(ncclCommWindowDeregister(ranks.comms[r], wins[r]) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
}

ncclWaitSignalDesc_t desc(int peer, int sigIdx, int opCnt) {
  ncclWaitSignalDesc_t d{};
  d.opCnt = opCnt;
  d.peer = peer;
  d.sigIdx = sigIdx;
  d.ctx = 0;
  return d;
}

void checkNoAsyncError(const CudaRanks& ranks) {
  for (int r = 0; r < ranks.size(); ++r) {
    ncclResult_t async = ncclInternalError;
    CHECK(ncclCommGetAsyncError(ranks.comms[r], &async) == ncclSuccess);
    INFO("rank " << r << ": " << ncclGetLastError(ranks.comms[r]));
    CHECK(async == ncclSuccess);
  }
}

// A ring of puts: rank r puts `count` ints into rank r + 1's window at offset r * count; each
// rank first queues, on its stream, a wait for rank r - 1's put and a copy of what that put
// writes (`seen`), which must not run before the signal came. The puts go on streams of their
// own: behind its own wait a rank's put would never start.
class PutRing {
 public:
  PutRing(FakeCudaScope& cuda, CudaRanks& ranks, const std::vector<int>& devs, size_t count)
      : cuda_(cuda), ranks_(ranks), count_(count) {
    const int n = ranks.size();
    for (int r = 0; r < n; ++r) {
      window_.push_back(std::make_unique<DeviceMemory>(cuda, devs[r], n * count * 4));
      src_.push_back(std::make_unique<DeviceMemory>(cuda, devs[r], count * 4));
      seen_.push_back(std::make_unique<DeviceMemory>(cuda, devs[r], count * 4));
      for (size_t i = 0; i < count; ++i) src_[r]->data()[i] = valueOf(r, i);
    }
    REQUIRE(ncclGroupStart() == ncclSuccess);
    wins_.assign(n, nullptr);
    for (int r = 0; r < n; ++r)
      CHECK(ncclCommWindowRegister(ranks.comms[r], window_[r]->data(), n * count * 4, &wins_[r],
                                   0) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
  }
  ~PutRing() { deregisterWindows(ranks_, wins_); }

  void queueWaits() {
    for (int r = 0; r < ranks_.size(); ++r) {
      const int left = (r + ranks_.size() - 1) % ranks_.size();
      ncclWaitSignalDesc_t d = desc(left, 0, 1);
      REQUIRE(ncclWaitSignal(1, &d, ranks_.comms[r], ranks_.streams[r]) == ncclSuccess);
      REQUIRE(cuda_.driver().cuMemcpyDtoDAsync(
                  seen_[r]->address(), window_[r]->address() + left * count_ * 4, count_ * 4,
                  reinterpret_cast<CuStream>(ranks_.streams[r])) == kCuSuccess);
    }
  }
  // Whether any copy after a wait ran yet.
  bool anySeen() const {
    for (const auto& s : seen_)
      if (s->data()[0] != 0) return true;
    return false;
  }
  void queuePuts() {
    for (int r = 0; r < ranks_.size(); ++r)
      REQUIRE(ncclPutSignal(src_[r]->data(), count_, ncclInt32, (r + 1) % ranks_.size(), wins_[r],
                            r * count_ * 4, 0, 0, 0, ranks_.comms[r],
                            reinterpret_cast<cudaStream_t>(cuda_.newStream())) == ncclSuccess);
  }
  // After the streams drained: every rank saw its left neighbour's put through the copy, and
  // its window holds that put and nothing else.
  void checkExact() const {
    const int n = ranks_.size();
    for (int r = 0; r < n; ++r) {
      const int left = (r + n - 1) % n;
      INFO("rank " << r);
      bool exact = true;
      for (size_t i = 0; i < count_; ++i) {
        exact = exact && seen_[r]->data()[i] == valueOf(left, i);
        for (int p = 0; p < n; ++p)
          exact = exact && window_[r]->data()[p * count_ + i] == (p == left ? valueOf(left, i) : 0);
      }
      CHECK(exact);
    }
  }

 private:
  FakeCudaScope& cuda_;
  CudaRanks& ranks_;
  size_t count_;
  std::vector<std::unique_ptr<DeviceMemory>> window_, src_, seen_;
  std::vector<ncclWindow_t> wins_;
};

}  // namespace

TEST_CASE("CUDA one-sided calls: a wait holds the stream until the put's signal, data first",
          "[cuda_rma]") {
  FakeCudaScope cuda;
  CudaRmaEnv env;
  for (const std::vector<int>& devs : {std::vector<int>{0, 1}, std::vector<int>{0, 1, 2},
                                       std::vector<int>{0, 0}, std::vector<int>{0, 1, 2, 3, 0}}) {
    CudaRanks ranks(cuda, devs);
    const int n = ranks.size();
    INFO(n << " ranks, devices[0] " << devs[0] << " devices[1] " << devs[1]);
    PutRing ring(cuda, ranks, devs, kCount);
    const size_t kernelsBefore = cuda.rmaKernelsRun();
    ring.queueWaits();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(!ring.anySeen());  // the waits hold the streams
    ring.queuePuts();
    cuda.synchronizeAll();
    ring.checkExact();
    // Signals without data, in a group (queued at ncclGroupEnd): every rank signals every rank
    // (itself too) twice on sigIdx 1 and waits for them with each peer named twice (a
    // descriptor named twice counts twice).
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (int k = 0; k < 2; ++k)
          REQUIRE(ncclSignal(p, 1, 0, 0, ranks.comms[r], ranks.streams[r]) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    for (int r = 0; r < n; ++r) {
      std::vector<ncclWaitSignalDesc_t> descs;
      for (int p = 0; p < n; ++p) descs.insert(descs.end(), 2, desc(p, 1, 1));
      REQUIRE(ncclWaitSignal(static_cast<int>(descs.size()), descs.data(), ranks.comms[r],
                             ranks.streams[r]) == ncclSuccess);
    }
    cuda.synchronizeAll();
    checkNoAsyncError(ranks);
    // Puts and waits ran as kernels, none on the host: per rank a wait, a put's signal, 2n
    // signals and one wait for them all.
    CHECK(cuda.rmaKernelsRun() - kernelsBefore == static_cast<size_t>(n * (3 + 2 * n)));
  }
}

TEST_CASE("CUDA one-sided calls: a wait for a signal that never comes stops at NCCL_TIMEOUT",
          "[cuda_rma]") {
  FakeCudaScope cuda;
  CudaRmaEnv env;
  ScopedEnv timeout("NCCL_TIMEOUT", "300");  // read when the communicator is made
  CudaRanks ranks(cuda, {0, 1});
  std::vector<std::unique_ptr<DeviceMemory>> window;
  for (int r = 0; r < 2; ++r)
    window.push_back(std::make_unique<DeviceMemory>(cuda, r, 2 * kCount * 4));
  const std::vector<ncclWindow_t> wins = registerWindows(ranks, window);
  // Rank 1 signals once; rank 0 waits for two.
  REQUIRE(ncclSignal(0, 0, 0, 0, ranks.comms[1], ranks.streams[1]) == ncclSuccess);
  ncclWaitSignalDesc_t d = desc(1, 0, 2);
  REQUIRE(ncclWaitSignal(1, &d, ranks.comms[0], ranks.streams[0]) == ncclSuccess);
  cuda.synchronizeAll();  // the wait kernel stops by itself
  ncclResult_t async = ncclSuccess;
  CHECK(ncclCommGetAsyncError(ranks.comms[0], &async) == ncclSuccess);
  CHECK(async == ncclRemoteError);
  const std::string why = ncclGetLastError(ranks.comms[0]);
  INFO(why);
  CHECK(why.find("from peer 1") != std::string::npos);
  CHECK(why.find("NCCL_TIMEOUT") != std::string::npos);
  CHECK(why.find("at 1 of 2") != std::string::npos);
  // The communicator is failed: the next one-sided call says so.
  CHECK(ncclSignal(1, 0, 0, 0, ranks.comms[0], ranks.streams[0]) == ncclRemoteError);
  deregisterWindows(ranks, wins);
}

TEST_CASE("CUDA one-sided calls: ncclCommAbort frees a waiting kernel", "[cuda_rma]") {
  FakeCudaScope cuda;
  CudaRmaEnv env;
  ScopedEnv timeout("NCCL_TIMEOUT", "60000");
  CudaRanks ranks(cuda, {0, 1});
  std::vector<std::unique_ptr<DeviceMemory>> window;
  for (int r = 0; r < 2; ++r)
    window.push_back(std::make_unique<DeviceMemory>(cuda, r, 2 * kCount * 4));
  registerWindows(ranks, window);
  ncclWaitSignalDesc_t d = desc(1, 0, 1);
  REQUIRE(ncclWaitSignal(1, &d, ranks.comms[0], ranks.streams[0]) == ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  CHECK(ncclCommAbort(ranks.comms[0]) == ncclSuccess);
  ranks.comms[0] = nullptr;
  cuda.synchronizeAll();
  // Freed by the abort, not by NCCL_TIMEOUT (a minute).
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("CUDA one-sided calls: refused on a capturing stream", "[cuda_rma]") {
  FakeCudaScope cuda;
  CudaRmaEnv env;
  CudaRanks ranks(cuda, {0, 1});
  std::vector<std::unique_ptr<DeviceMemory>> window;
  for (int r = 0; r < 2; ++r)
    window.push_back(std::make_unique<DeviceMemory>(cuda, r, 2 * kCount * 4));
  const std::vector<ncclWindow_t> wins = registerWindows(ranks, window);
  const auto s = reinterpret_cast<CuStream>(ranks.streams[0]);
  cuda.beginCapture(s);
  CHECK(ncclSignal(1, 0, 0, 0, ranks.comms[0], ranks.streams[0]) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(ranks.comms[0])).find("captured") != std::string::npos);
  ncclWaitSignalDesc_t d = desc(1, 0, 1);
  CHECK(ncclWaitSignal(1, &d, ranks.comms[0], ranks.streams[0]) == ncclInvalidUsage);
  FakeGraph graph;
  CHECK(cuda.endCapture(s, &graph) == kCuSuccess);
  // A put beyond the peer's window: ncclInvalidArgument, the communicator unharmed.
  CHECK(ncclPutSignal(window[0]->data(), kCount, ncclInt32, 1, wins[0], 2 * kCount * 4, 0, 0, 0,
                      ranks.comms[0], ranks.streams[0]) == ncclInvalidArgument);
  checkNoAsyncError(ranks);
  deregisterWindows(ranks, wins);
}

TEST_CASE("CUDA one-sided calls by message (NCCL_NET=ucx): staged in stream order, chunked",
          "[cuda_rma]") {
  FakeCudaScope cuda;
  CudaRmaEnv env;
  ScopedEnv net("NCCL_NET", "ucx");  // every peer by message, as on another host
  ScopedEnv devices("UCX_NET_DEVICES", "lo");
  const std::vector<int> devs = {0, 1, 0};
  CudaRanks ranks(cuda, devs);
  const int n = ranks.size();
  // 6 MiB and a bit: seven chunks through four staging slots, so slots are reused.
  PutRing ring(cuda, ranks, devs, (size_t{6} << 18) + 12345);
  ring.queueWaits();
  ring.queuePuts();
  // Signals alone, to every rank, and the waits for them.
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      REQUIRE(ncclSignal(p, 2, 0, 0, ranks.comms[r], ranks.streams[r]) == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    std::vector<ncclWaitSignalDesc_t> descs;
    for (int p = 0; p < n; ++p) descs.push_back(desc(p, 2, 1));
    REQUIRE(ncclWaitSignal(n, descs.data(), ranks.comms[r], ranks.streams[r]) == ncclSuccess);
  }
  cuda.synchronizeAll();
  ring.checkExact();
  checkNoAsyncError(ranks);
}

namespace {

// A forked rank's CUDA communicator of 2 ranks on device `rank` of its own emulated driver;
// null (after printing why) if it cannot be made.
ncclComm_t forkedRank(FakeCudaScope& cuda, int rank, const ncclUniqueId& id) {
  setenv("RINGCC_DEVICE", "cuda", 1);
  const CudaDriver& cu = cuda.driver();
  CuContext ctx = nullptr;
  ncclComm_t comm = nullptr;
  if (cu.cuDevicePrimaryCtxRetain(&ctx, rank) != kCuSuccess ||
      cu.cuCtxSetCurrent(ctx) != kCuSuccess ||
      ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "[cuda rma procs] rank %d: no communicator\n", rank);
    return nullptr;
  }
  return comm;
}

// One rank of the forked test: a window inside a larger allocation (so its IPC handle names
// the allocation and the offset matters), a put to the other rank, a wait for the other's put,
// a copy queued after the wait; the number of failures (printed).
int rmaRankProcess(int rank, const ncclUniqueId& id) {
  FakeCudaScope cuda;
  const CudaDriver& cu = cuda.driver();
  ncclComm_t comm = forkedRank(cuda, rank, id);
  if (comm == nullptr) return 10;
  const auto stream = reinterpret_cast<cudaStream_t>(cuda.newStream());
  int bad = 0;
  auto no = [&](const char* what) {
    std::fprintf(stderr, "[cuda rma procs] rank %d: %s (%s)\n", rank, what, ncclGetLastError(comm));
    ++bad;
  };
  CuDevicePtr block = 0, src = 0, seen = 0;
  cu.cuMemAlloc(&block, 64 << 10);
  cu.cuMemAlloc(&src, kCount * 4);
  cu.cuMemAlloc(&seen, kCount * 4);
  std::memset(reinterpret_cast<void*>(block), 0, 64 << 10);
  std::memset(reinterpret_cast<void*>(seen), 0, kCount * 4);
  auto* from = reinterpret_cast<int32_t*>(src);
  for (size_t i = 0; i < kCount; ++i) from[i] = valueOf(rank, i);
  auto* window = reinterpret_cast<int32_t*>(block + 4096);
  ncclWindow_t win = nullptr;
  // The connections open peers' GPU memory too (shm slots): the window's import is one more.
  const size_t importsBefore = cuda.liveIpcImports();
  if (ncclCommWindowRegister(comm, window, 2 * kCount * 4, &win, 0) != ncclSuccess) no("register");
  if (cuda.liveIpcImports() != importsBefore + 1)
    no("the peer's window was not opened by CUDA IPC");
  const int peer = 1 - rank;
  ncclWaitSignalDesc_t d = desc(peer, 0, 1);
  if (ncclWaitSignal(1, &d, comm, stream) != ncclSuccess) no("wait");
  cu.cuMemcpyDtoDAsync(seen, reinterpret_cast<CuDevicePtr>(window + peer * kCount), kCount * 4,
                       reinterpret_cast<CuStream>(stream));
  // On a stream of its own: behind the wait it would never start.
  const auto putStream = reinterpret_cast<cudaStream_t>(cuda.newStream());
  if (ncclPutSignal(from, kCount, ncclInt32, peer, win, rank * kCount * 4, 0, 0, 0, comm,
                    putStream) != ncclSuccess)
    no("put");
  cuda.synchronizeAll();
  const auto* got = reinterpret_cast<const int32_t*>(seen);
  for (size_t i = 0; i < kCount; ++i)
    if (got[i] != valueOf(peer, i) || window[rank * kCount + i] != 0) {
      no("the peer's put is not where the wait's copy read it");
      break;
    }
  ncclResult_t async = ncclInternalError;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess) no("async error");
  if (ncclCommWindowDeregister(comm, win) != ncclSuccess) no("deregister");
  if (cuda.liveIpcImports() != importsBefore)
    no("the peer's window is still open after deregistration");
  if (ncclCommDestroy(comm) != ncclSuccess) no("destroy");
  if (cuda.liveHostRegistrations() != 0) no("signal counters still registered");
  cu.cuMemFree(block);
  cu.cuMemFree(src);
  cu.cuMemFree(seen);
  return bad;
}

}  // namespace

// Forked ranks: this group's process starts no thread before it forks (tests/support/ranks.h).
TEST_CASE("CUDA one-sided calls between processes: the window by CUDA IPC", "[cuda_rma_procs]") {
  const ncclUniqueId id = newUniqueId();
  CHECK(runProcesses(2, [&](int rank) { return rmaRankProcess(rank, id); }) == 0);
}

namespace {

// Rank 1 registers its window and exits once rank 0 has opened it (`registered`, shared by the
// forked processes: the IPC open needs the exporter alive); rank 0's wait for its signal must
// stop once the process is gone (the watch raises its flag), long before NCCL_TIMEOUT. 0 if so
// (printed).
int peerExitsProcess(int rank, const ncclUniqueId& id, std::atomic<int>* registered) {
  FakeCudaScope cuda;
  setenv("NCCL_TIMEOUT", "60000", 1);  // (read when the communicator is made)
  const CudaDriver& cu = cuda.driver();
  ncclComm_t comm = forkedRank(cuda, rank, id);
  if (comm == nullptr) return 10;
  CuDevicePtr window = 0;
  cu.cuMemAlloc(&window, 4096);
  ncclWindow_t win = nullptr;
  if (ncclCommWindowRegister(comm, reinterpret_cast<void*>(window), 4096, &win, 0) != ncclSuccess)
    return 11;
  if (rank == 1) {
    for (int i = 0; i < 30000 && registered->load() == 0; ++i) usleep(1000);
    _exit(0);  // gone without a word
  }
  registered->store(1);
  const auto stream = reinterpret_cast<cudaStream_t>(cuda.newStream());
  ncclWaitSignalDesc_t d = desc(1, 0, 1);
  const auto start = std::chrono::steady_clock::now();
  if (ncclWaitSignal(1, &d, comm, stream) != ncclSuccess) return 12;
  cuda.synchronizeAll();
  const auto took = std::chrono::steady_clock::now() - start;
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  const std::string why = ncclGetLastError(comm);
  int bad = 0;
  if (async != ncclRemoteError ||
      why.find("peer 1 stopped: the peer is gone") == std::string::npos) {
    std::fprintf(stderr, "[cuda rma procs] rank 0: async %d, last error: %s\n", async, why.c_str());
    ++bad;
  }
  if (took > std::chrono::seconds(30)) {  // NCCL_TIMEOUT is a minute
    std::fprintf(stderr, "[cuda rma procs] rank 0: the wait ended only at the timeout\n");
    ++bad;
  }
  ncclCommAbort(comm);
  return bad;
}

}  // namespace

TEST_CASE("CUDA one-sided calls between processes: a wait for a peer that exited stops",
          "[cuda_rma_procs]") {
  const ncclUniqueId id = newUniqueId();
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  auto* registered = new (shared) std::atomic<int>(0);
  CHECK(runProcesses(2, [&](int rank) { return peerExitsProcess(rank, id, registered); }) == 0);
  munmap(shared, sizeof(std::atomic<int>));
}
