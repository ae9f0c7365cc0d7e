#include "src/core/config.h"

#include <cstddef>
#include <cstring>

#include "src/base/error.h"

namespace ringcc {
namespace {

static_assert(sizeof(ncclConfig_t) == 120, "ncclConfig_t must keep NCCL 2.32's layout");
static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "2.28 config layout");
static_assert(offsetof(ncclConfig_t, graphStreamOrdering) == 92, "2.30 config layout");

bool present(size_t size, size_t offset, size_t width) { return offset + width <= size; }

// Copies an int field if the caller's struct has it and it is set.
void readInt(size_t size, size_t offset, const int* field, int* out) {
  if (present(size, offset, sizeof(int)) && *field != NCCL_CONFIG_UNDEF_INT) *out = *field;
}

}  // namespace

ncclResult_t readConfig(const ncclConfig_t* user, const char* where, CommConfig* out) {
  *out = CommConfig{};
  if (user == nullptr) return ncclSuccess;
  if (user->magic != kConfigMagic)
    return fail(ncclInvalidArgument, where,
                "config: magic is 0x%x, not 0x%x; initialize it with NCCL_CONFIG_INITIALIZER",
                user->magic, kConfigMagic);
  if (user->size < offsetof(ncclConfig_t, blocking))
    return fail(ncclInvalidArgument, where, "config: size %zu is too small", user->size);

  // Only the caller's `size` bytes are read: an older header's struct ends there.
  ncclConfig_t c{};
  std::memcpy(&c, user, user->size < sizeof(c) ? user->size : sizeof(c));
  const size_t size = user->size;

  int blocking = 1;
  readInt(size, offsetof(ncclConfig_t, blocking), &c.blocking, &blocking);
  if (blocking != 0 && blocking != 1)
    return fail(ncclInvalidArgument, where, "config: blocking must be 0 or 1, not %d", blocking);
  out->blocking = blocking == 1;
  readInt(size, offsetof(ncclConfig_t, cgaClusterSize), &c.cgaClusterSize, &out->cgaClusterSize);
  readInt(size, offsetof(ncclConfig_t, minCTAs), &c.minCTAs, &out->minCTAs);
  readInt(size, offsetof(ncclConfig_t, maxCTAs), &c.maxCTAs, &out->maxCTAs);
  if (out->minCTAs < 1 || out->maxCTAs < out->minCTAs)
    return fail(ncclInvalidArgument, where, "config: minCTAs %d / maxCTAs %d out of range",
                out->minCTAs, out->maxCTAs);
  if (present(size, offsetof(ncclConfig_t, netName), sizeof(char*)) && c.netName)
    out->netName = c.netName;
  readInt(size, offsetof(ncclConfig_t, splitShare), &c.splitShare, &out->splitShare);
  readInt(size, offsetof(ncclConfig_t, trafficClass), &c.trafficClass, &out->trafficClass);
  if (present(size, offsetof(ncclConfig_t, commName), sizeof(char*)) && c.commName)
    out->commName = c.commName;
  readInt(size, offsetof(ncclConfig_t, collnetEnable), &c.collnetEnable, &out->collnetEnable);
  readInt(size, offsetof(ncclConfig_t, CTAPolicy), &c.CTAPolicy, &out->ctaPolicy);
  readInt(size, offsetof(ncclConfig_t, shrinkShare), &c.shrinkShare, &out->shrinkShare);
  readInt(size, offsetof(ncclConfig_t, nvlsCTAs), &c.nvlsCTAs, &out->nvlsCTAs);
#define RINGCC_READ_INT(field) readInt(size, offsetof(ncclConfig_t, field), &c.field, &out->field)
  RINGCC_READ_INT(nChannelsPerNetPeer);
  RINGCC_READ_INT(nvlinkCentricSched);
  RINGCC_READ_INT(graphUsageMode);
  RINGCC_READ_INT(numRmaCtx);
  RINGCC_READ_INT(maxP2pPeers);
  RINGCC_READ_INT(graphStreamOrdering);
  RINGCC_READ_INT(launchOrderImplicit);
  RINGCC_READ_INT(numRmaSig);
  RINGCC_READ_INT(rmaEagerInit);
  RINGCC_READ_INT(hostCftMode);
  RINGCC_READ_INT(nvlsHostMode);
#undef RINGCC_READ_INT
  return ncclSuccess;
}

}  // namespace ringcc
