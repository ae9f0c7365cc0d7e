// ncclCommGetUniqueId + ncclCommGrow on CUDA communicators, on the emulated driver
// (support/fake_cuda.h): the grown communicator's engine is a CUDA one on each rank's device
// (existing ranks keep theirs, the new rank brings its own), and its collectives run as
// kernels on the ranks' streams.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "coll/cuda_ranks.h"
#include "nccl.h"
#include "support/fake_cuda.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

constexpr size_t kCount = 70001;  // several slots, the last one partial

int32_t inputOf(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + i % 997); }

// Rank r's all-reduce of kCount ints on `comm`, queued on `stream` (the fake's device memory is
// host memory, so host vectors serve as device buffers); its failures once `sync` drained it.
struct RankSum {
  std::vector<int32_t> send, recv;
  ncclResult_t issue(ncclComm_t comm, int rank, cudaStream_t stream) {
    send.resize(kCount);
    recv.assign(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) send[i] = inputOf(rank, i);
    return ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, stream);
  }
  int failures(int n) const {
    int bad = 0;
    for (size_t i = 0; i < kCount; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += inputOf(r, i);
      bad += recv[i] != sum;
    }
    return bad;
  }
};

// Makes device `dev`'s primary context current on the calling thread.
void bindDevice(FakeCudaScope& cuda, int dev) {
  CuContext ctx = nullptr;
  REQUIRE(cuda.driver().cuDevicePrimaryCtxRetain(&ctx, dev) == kCuSuccess);
  REQUIRE(cuda.driver().cuCtxSetCurrent(ctx) == kCuSuccess);
}

}  // namespace

TEST_CASE("CUDA communicators grow: 2 ranks and a new one on its own GPU; collectives exact",
          "[cuda_grow]") {
  FakeCudaScope cuda;
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  ScopedEnv timeout("NCCL_TIMEOUT", "20000");
  CudaRanks old(cuda, {0, 1});
  ncclUniqueId id;
  REQUIRE(ncclCommGetUniqueId(old.comms[0], &id) == ncclSuccess);
  const int nRanks = 3;
  const std::vector<int> devs = {0, 1, 2};
  std::vector<ncclComm_t> big(nRanks, nullptr);
  std::vector<ncclResult_t> grown(nRanks, ncclInternalError), issued(nRanks, ncclInternalError);
  std::vector<RankSum> sums(nRanks);
  const size_t kernelsBefore = cuda.kernelsRun();
  std::vector<cudaStream_t> streams = old.streams;
  streams.push_back(reinterpret_cast<cudaStream_t>(cuda.newStream()));
  runThreads(nRanks, [&](int r) {
    bindDevice(cuda, devs[r]);
    grown[r] =
        r < 2 ? ncclCommGrow(old.comms[r], nRanks, r == 0 ? &id : nullptr, -1, &big[r], nullptr)
              : ncclCommGrow(nullptr, nRanks, &id, r, &big[r], nullptr);
    if (grown[r] == ncclSuccess) issued[r] = sums[r].issue(big[r], r, streams[r]);
  });
  cuda.synchronizeAll();
  for (int r = 0; r < nRanks; ++r) {
    INFO("rank " << r << ": " << ncclGetLastError(big[r]));
    REQUIRE(grown[r] == ncclSuccess);
    CHECK(issued[r] == ncclSuccess);
    int dev = -1;
    CHECK(ncclCommCuDevice(big[r], &dev) == ncclSuccess);
    CHECK(dev == devs[r]);
    CHECK(sums[r].failures(nRanks) == 0);
    ncclResult_t async = ncclInternalError;
    CHECK(ncclCommGetAsyncError(big[r], &async) == ncclSuccess);
    CHECK(async == ncclSuccess);
  }
  CHECK(cuda.kernelsRun() > kernelsBefore);  // the grown communicator's all-reduce: kernels
  // The parent is still a communicator of its own until destroyed (as NCCL's).
  std::vector<RankSum> parent(2);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 2; ++r)
    CHECK(parent[r].issue(old.comms[r], r, old.streams[r]) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  cuda.synchronizeAll();
  for (int r = 0; r < 2; ++r) CHECK(parent[r].failures(2) == 0);
  for (ncclComm_t c : big)
    if (c) CHECK(ncclCommDestroy(c) == ncclSuccess);
}
