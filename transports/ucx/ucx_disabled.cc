// The UCX transport's place in a build without UCX (meson -Ducx=disabled, as the device
// bundle's is: tests/gpu/bundle.sh). It connects no one and says why, so ranks on different
// hosts, or NCCL_NET=ucx, fail naming the build rather than a missing library; and there is no
// one-sided engine (ucx_rma.h), so one-sided calls to such peers go by message.
#include <atomic>
#include <memory>
#include <string>

#include "src/base/error.h"
#include "transports/ucx/ucx_rma.h"
#include "transports/ucx/ucx_transport.h"

namespace ringcc {
namespace {

constexpr const char* kNoUcx = "this libnccl.so.2 was built without UCX (meson -Ducx=disabled)";

class NoUcxTransport : public Transport {
 public:
  const char* name() const override { return "ucx"; }
  bool canConnect(const PeerInfo&, const PeerInfo&, std::string* why) const override {
    if (why) *why = kNoUcx;
    return false;
  }

 protected:
  ncclResult_t setupImpl(ConnSide, const ConnSpec& spec, ConnInfo*,
                         std::unique_ptr<PendingConnection>*) override {
    return failPeer(ncclInvalidUsage, spec.peer.rank, "ucx setup", "%s", kNoUcx);
  }
};

}  // namespace

std::unique_ptr<UcxRma> UcxRma::create(int, const std::atomic<bool>*, std::string* why) {
  *why = kNoUcx;
  return nullptr;
}

Transport& ucxTransport() {
  static NoUcxTransport t;
  return t;
}

}  // namespace ringcc
