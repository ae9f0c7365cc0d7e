// Communicator configuration: the caller's ncclConfig_t, checked and normalized.
//
// A caller's config is read by its `size` field, as NCCL reads it, so binaries built against
// every header since 2.27 (72 bytes; 2.28's 80, 2.30's 96, 2.31/2.32's 120) and against newer
// ones (which append fields) work: fields beyond `size` keep their defaults, fields we do not
// know are ignored. A config without NCCL's magic was not made
// with NCCL_CONFIG_INITIALIZER and is refused.
#pragma once

#include <string>

#include "nccl.h"

namespace ringcc {

struct CommConfig {
  bool blocking = true;
  int cgaClusterSize = 4;
  int minCTAs = 1;
  int maxCTAs = 32;
  std::string netName;
  int splitShare = 0;
  int trafficClass = 0;
  std::string commName;
  int collnetEnable = 0;
  int ctaPolicy = NCCL_CTA_POLICY_DEFAULT;
  int shrinkShare = 0;
  int nvlsCTAs = 0;
  int nChannelsPerNetPeer = 0;
  int nvlinkCentricSched = 0;
  // 2.30 and later. ringcc has no CUDA graphs, RMA contexts or NVLS of its own: these are
  // kept so that a split or shrink inherits what the caller asked for.
  int graphUsageMode = NCCL_CONFIG_UNDEF_INT;
  int numRmaCtx = NCCL_CONFIG_UNDEF_INT;
  int maxP2pPeers = NCCL_CONFIG_UNDEF_INT;
  int graphStreamOrdering = NCCL_CONFIG_UNDEF_INT;
  int launchOrderImplicit = NCCL_CONFIG_UNDEF_INT;
  int numRmaSig = NCCL_CONFIG_UNDEF_INT;
  int rmaEagerInit = NCCL_CONFIG_UNDEF_INT;
  int hostCftMode = NCCL_CONFIG_UNDEF_INT;
  int nvlsHostMode = NCCL_CONFIG_UNDEF_INT;
};

constexpr unsigned int kConfigMagic = NCCL_API_MAGIC;

// Reads `user` (may be null: defaults) into *out. `where` names the API call for errors.
ncclResult_t readConfig(const ncclConfig_t* user, const char* where, CommConfig* out);

}  // namespace ringcc
