#include "src/init/engine_factory.h"

#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/cuda/cuda_engine.h"
#include "src/exec/host_engine.h"

namespace ringcc {

ncclResult_t createEngine(ncclComm* comm, std::unique_ptr<CommEngine>* out) {
  if (comm->memKind == MemoryKind::Cuda) return CudaEngine::create(comm, out);
  auto engine = std::make_unique<HostEngine>(comm);
  RINGCC_CHECK(engine->checkSettingsAgree());
  RINGCC_CHECK(engine->connectRing());
  *out = std::move(engine);
  return ncclSuccess;
}

}  // namespace ringcc
