// ringcc's extensions (include/ringcc.h).
#include "ringcc.h"
#include "src/api/api.h"

using namespace ringcc;

extern "C" __attribute__((visibility("default"))) ncclResult_t ringccCommMemoryKind(
    ncclComm_t comm, ringccMemKind_t* kind) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ringccCommMemoryKind"));
  RINGCC_CHECK(checkNotNull(kind, "kind", "ringccCommMemoryKind"));
  *kind = comm->memKind == MemoryKind::Cuda ? ringccMemCuda : ringccMemHost;
  return ncclSuccess;
}
