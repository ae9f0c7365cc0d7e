// Communicator configuration: the caller's ncclConfig_t, checked and normalized.
//
// A caller's config is read by its `size` field, so binaries built against older (2.27,
// 72 bytes) or newer (2.28, 80 bytes) headers both work: fields beyond `size` keep their
// defaults, fields we do not know are ignored. A config without NCCL's magic was not made
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
};

constexpr unsigned int kConfigMagic = 0xcafebeef;

// Reads `user` (may be null: defaults) into *out. `where` names the API call for errors.
ncclResult_t readConfig(const ncclConfig_t* user, const char* where, CommConfig* out);

}  // namespace ringcc
