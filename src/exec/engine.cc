#include "src/exec/engine.h"

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/exec/host_engine.h"

namespace ringcc {

ncclResult_t CommEngine::create(ncclComm* comm, std::unique_ptr<CommEngine>* out) {
  if (comm->memKind != MemoryKind::Host)
    return fail(ncclInvalidUsage, "init", "only host communicators have an engine so far");
  auto engine = std::make_unique<HostEngine>(comm);
  RINGCC_CHECK(engine->checkSettingsAgree());
  RINGCC_CHECK(engine->connectRing());
  *out = std::move(engine);
  return ncclSuccess;
}

}  // namespace ringcc
