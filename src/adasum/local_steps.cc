#include "src/adasum/local_steps.h"

#include <cstring>

#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/cuda/cuda_engine.h"

namespace ringcc {
namespace {

// The calling thread is the whole executor: one block of one thread.
class HostLocal final : public AdasumLocal {
 public:
  explicit HostLocal(ncclComm* comm) : comm_(comm) {}
  char* workspace() override { return reinterpret_cast<char*>(comm_->hostScratch.data()); }
  ncclResult_t copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src) std::memmove(dst, src, bytes);
    return ncclSuccess;
  }
  ncclResult_t zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return ncclSuccess;
  }
  ncclResult_t run(const AdasumArgs& args) override {
    AdasumSoloBlock block;
    adasumRunBlock(args, block);
    return ncclSuccess;
  }

 private:
  ncclComm* comm_;
};

class CudaLocal final : public AdasumLocal {
 public:
  CudaLocal(CudaEngine* engine, cudaStream_t stream)
      : engine_(engine), stream_(reinterpret_cast<CuStream>(stream)) {}
  char* workspace() override { return reinterpret_cast<char*>(engine_->workspace()); }
  ncclResult_t copy(void* dst, const void* src, size_t bytes) override {
    return engine_->copyAsync(reinterpret_cast<CuDevicePtr>(dst),
                              reinterpret_cast<CuDevicePtr>(src), bytes, stream_);
  }
  ncclResult_t zero(void* dst, size_t bytes) override {
    return engine_->zeroAsync(reinterpret_cast<CuDevicePtr>(dst), bytes, stream_);
  }
  ncclResult_t run(const AdasumArgs& args) override { return engine_->launchAdasum(args, stream_); }

 private:
  CudaEngine* engine_;
  CuStream stream_;
};

CudaEngine* cudaEngine(ncclComm* comm) {
  return comm->memKind == MemoryKind::Cuda ? dynamic_cast<CudaEngine*>(comm->engine.get())
                                           : nullptr;
}

}  // namespace

ncclResult_t reserveAdasumWorkspace(ncclComm* comm, size_t bytes) {
  if (CudaEngine* engine = cudaEngine(comm)) return engine->reserveWorkspace(bytes);
  if (comm->memKind == MemoryKind::Cuda)
    return fail(ncclInternalError, "ringccAllReduceAdasum",
                "a CUDA communicator without the CUDA engine");
  if (comm->hostScratch.size() < bytes) comm->hostScratch.resize(bytes);
  return ncclSuccess;
}

std::unique_ptr<AdasumLocal> adasumLocal(ncclComm* comm, cudaStream_t stream) {
  if (CudaEngine* engine = cudaEngine(comm)) return std::make_unique<CudaLocal>(engine, stream);
  return std::make_unique<HostLocal>(comm);
}

}  // namespace ringcc
