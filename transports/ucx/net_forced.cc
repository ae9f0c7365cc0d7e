// NCCL_NET, read the same way with or without UCX in the build (ucx_transport.cc or
// ucx_disabled.cc is the transport it forces).
#include <strings.h>

#include <string>

#include "src/base/error.h"
#include "src/base/param.h"
#include "transports/ucx/ucx_transport.h"

namespace ringcc {

ncclResult_t netForced(bool* forced) {
  const std::string net = paramString("NET");
  *forced = false;
  if (net.empty()) return ncclSuccess;
  if (strcasecmp(net.c_str(), "ucx") == 0) {
    *forced = true;
    return ncclSuccess;
  }
  return fail(ncclInvalidArgument, "selectTransport",
              "NCCL_NET='%s' is not a network ringcc has; the only one is 'ucx' (or leave it "
              "unset: ranks on different hosts use UCX anyway)",
              net.c_str());
}

}  // namespace ringcc
