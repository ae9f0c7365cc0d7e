#include "src/exec/engine.h"

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/exec/host_engine.h"

namespace ringcc {

ncclResult_t CommEngine::create(ncclComm* comm, std::unique_ptr<CommEngine>* out) {
  if (comm->memKind != MemoryKind::Host)
    return fail(ncclInvalidUsage, "init",
                "CUDA communicators are not implemented yet in ringcc: the CUDA engine (kernel "
                "launches on the user's stream) is still to come; use host buffers with "
                "RINGCC_DEVICE=host");
  auto engine = std::make_unique<HostEngine>(comm);
  RINGCC_CHECK(engine->checkSettingsAgree());
  RINGCC_CHECK(engine->connectRing());
  *out = std::move(engine);
  return ncclSuccess;
}

}  // namespace ringcc
