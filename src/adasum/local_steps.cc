#include "src/adasum/local_steps.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/cuda/cuda_engine.h"

namespace ringcc {
namespace {

// The calling thread is the whole executor: one block of one thread.
class HostLocal final : public AdasumLocal {
  static constexpr size_t kWindowBytes = size_t{256} << 10;

 public:
  explicit HostLocal(ncclComm* comm) : comm_(comm) {}
  ncclResult_t acquireWorkspace(size_t bytes, char** out) override {
    if (comm_->hostScratch.size() < bytes) comm_->hostScratch.resize(bytes);
    *out = reinterpret_cast<char*>(comm_->hostScratch.data());
    return ncclSuccess;
  }
  ncclResult_t releaseWorkspace(char*) override { return ncclSuccess; }
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
  // 256 KiB: what a window's products read of the partner's copy is still in this core's
  // cache (docs/benchmarks.md, "Adasum: windows and the weighted two-rank path": 128-256 KiB
  // measured alike, 4 MiB and more slower).
  size_t windowElems(size_t elementSize) const override {
    return std::max<size_t>(1, kWindowBytes / elementSize);
  }
  bool stepsRunAtOnce() const override { return true; }

 private:
  ncclComm* comm_;
};

class CudaLocal final : public AdasumLocal {
 public:
  CudaLocal(CudaEngine* engine, cudaStream_t stream)
      : engine_(engine), stream_(reinterpret_cast<CuStream>(stream)) {}
  ncclResult_t acquireWorkspace(size_t bytes, char** out) override {
    CuDevicePtr p = 0;
    RINGCC_CHECK(engine_->allocAsync(bytes, stream_, &p));
    *out = reinterpret_cast<char*>(p);
    return ncclSuccess;
  }
  ncclResult_t releaseWorkspace(char* workspace) override {
    return engine_->freeAsync(reinterpret_cast<CuDevicePtr>(workspace), stream_);
  }
  ncclResult_t copy(void* dst, const void* src, size_t bytes) override {
    return engine_->copyAsync(reinterpret_cast<CuDevicePtr>(dst),
                              reinterpret_cast<CuDevicePtr>(src), bytes, stream_);
  }
  ncclResult_t zero(void* dst, size_t bytes) override {
    return engine_->zeroAsync(reinterpret_cast<CuDevicePtr>(dst), bytes, stream_);
  }
  ncclResult_t run(const AdasumArgs& args) override { return engine_->launchAdasum(args, stream_); }
  bool preparesFirst() const override { return engine_->ranksShareGpu(); }
  ncclResult_t prepare(std::span<const CollArgs> ops) override {
    return engine_->prepareOnly(ops, stream_);
  }

 private:
  CudaEngine* engine_;
  CuStream stream_;
};

CudaEngine* cudaEngine(ncclComm* comm) {
  return comm->memKind == MemoryKind::Cuda ? dynamic_cast<CudaEngine*>(comm->engine.get())
                                           : nullptr;
}

}  // namespace

std::unique_ptr<AdasumLocal> adasumLocal(ncclComm* comm, cudaStream_t stream) {
  if (CudaEngine* engine = cudaEngine(comm)) return std::make_unique<CudaLocal>(engine, stream);
  if (comm->memKind == MemoryKind::Cuda) return nullptr;  // no CUDA engine: the caller says so
  return std::make_unique<HostLocal>(comm);
}

}  // namespace ringcc
