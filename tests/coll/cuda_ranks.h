// CUDA communicators for tests on the emulated driver (support/fake_cuda.h): made by
// ncclCommInitAll (RINGCC_DEVICE=cuda set by the caller), one per entry of `devs` (several may
// share a device), each with a stream of its own; destroyed with the object.
#pragma once

#include <catch2/catch.hpp>
#include <vector>

#include "nccl.h"
#include "support/fake_cuda.h"

namespace ringcc::test {

struct CudaRanks {
  CudaRanks(FakeCudaScope& cuda, std::vector<int> devs) : comms(devs.size()) {
    REQUIRE(ncclCommInitAll(comms.data(), static_cast<int>(devs.size()), devs.data()) ==
            ncclSuccess);
    for (size_t r = 0; r < devs.size(); ++r) {
      int dev = -1;
      REQUIRE(ncclCommCuDevice(comms[r], &dev) == ncclSuccess);
      CHECK(dev == devs[r]);
      streams.push_back(reinterpret_cast<cudaStream_t>(cuda.newStream()));
    }
  }
  ~CudaRanks() {
    for (ncclComm_t c : comms)
      if (c != nullptr) CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
  CudaRanks(const CudaRanks&) = delete;
  CudaRanks& operator=(const CudaRanks&) = delete;
  int size() const { return static_cast<int>(comms.size()); }
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
};

}  // namespace ringcc::test
