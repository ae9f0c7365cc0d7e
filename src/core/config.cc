#include "src/core/config.h"

#include <cstddef>
#include <cstring>

#include "src/base/error.h"

namespace ringcc {
namespace {

// The 2.28 layout: 2.27's fields plus two ints. Reading through it with the caller's size as
// the bound is how both header versions are served.
struct ConfigV22800 {
  ncclConfig_t base;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
};
static_assert(sizeof(ncclConfig_t) == 72, "ncclConfig_t must keep NCCL 2.27's layout");
static_assert(offsetof(ConfigV22800, nvlinkCentricSched) == 76, "2.28 config layout");

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

  ConfigV22800 c{};
  std::memcpy(&c, user, user->size < sizeof(c) ? user->size : sizeof(c));
  const size_t size = user->size;

  int blocking = 1;
  readInt(size, offsetof(ncclConfig_t, blocking), &c.base.blocking, &blocking);
  if (blocking != 0 && blocking != 1)
    return fail(ncclInvalidArgument, where, "config: blocking must be 0 or 1, not %d", blocking);
  out->blocking = blocking == 1;
  readInt(size, offsetof(ncclConfig_t, cgaClusterSize), &c.base.cgaClusterSize,
          &out->cgaClusterSize);
  readInt(size, offsetof(ncclConfig_t, minCTAs), &c.base.minCTAs, &out->minCTAs);
  readInt(size, offsetof(ncclConfig_t, maxCTAs), &c.base.maxCTAs, &out->maxCTAs);
  if (out->minCTAs < 1 || out->maxCTAs < out->minCTAs)
    return fail(ncclInvalidArgument, where, "config: minCTAs %d / maxCTAs %d out of range",
                out->minCTAs, out->maxCTAs);
  if (present(size, offsetof(ncclConfig_t, netName), sizeof(char*)) && c.base.netName)
    out->netName = c.base.netName;
  readInt(size, offsetof(ncclConfig_t, splitShare), &c.base.splitShare, &out->splitShare);
  readInt(size, offsetof(ncclConfig_t, trafficClass), &c.base.trafficClass, &out->trafficClass);
  if (present(size, offsetof(ncclConfig_t, commName), sizeof(char*)) && c.base.commName)
    out->commName = c.base.commName;
  readInt(size, offsetof(ncclConfig_t, collnetEnable), &c.base.collnetEnable, &out->collnetEnable);
  readInt(size, offsetof(ncclConfig_t, CTAPolicy), &c.base.CTAPolicy, &out->ctaPolicy);
  readInt(size, offsetof(ncclConfig_t, shrinkShare), &c.base.shrinkShare, &out->shrinkShare);
  readInt(size, offsetof(ncclConfig_t, nvlsCTAs), &c.base.nvlsCTAs, &out->nvlsCTAs);
  readInt(size, offsetof(ConfigV22800, nChannelsPerNetPeer), &c.nChannelsPerNetPeer,
          &out->nChannelsPerNetPeer);
  readInt(size, offsetof(ConfigV22800, nvlinkCentricSched), &c.nvlinkCentricSched,
          &out->nvlinkCentricSched);
  return ncclSuccess;
}

}  // namespace ringcc
