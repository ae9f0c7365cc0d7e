// NCCL's device API (nccl_device.h: device communicators, teams, barriers, LL all-to-all)
// is exported so that binaries linked against NVIDIA's library load, but ringcc does not
// provide it: each call answers ncclInvalidUsage (or an empty value) with a WARN.
//
// The argument types are opaque here: ringcc does not ship nccl_device.h, and none of these
// functions reads its arguments.
#include "src/api/api.h"

using namespace ringcc;

namespace {

// ncclTeam_t as nccl_device.h defines it: three ints returned by value.
struct DeviceTeam {
  int nRanks, rank, stride;
};

ncclResult_t notProvided(const char* name) {
  return fail(ncclInvalidUsage, name,
              "NCCL's device API is not provided by ringcc (host and ring/tree collectives "
              "only)");
}

}  // namespace

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t, const void*, void*) {
  return notProvided("ncclDevCommCreate");
}
NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t, const void*) {
  return notProvided("ncclDevCommDestroy");
}
NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t, DeviceTeam, int, void*, void*) {
  return notProvided("ncclGinBarrierCreateRequirement");
}
NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, DeviceTeam, int, void*, void*) {
  return notProvided("ncclLsaBarrierCreateRequirement");
}
NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int, int, void*, void*) {
  return notProvided("ncclLLA2ACreateRequirement");
}
NCCL_API(int, ncclLLA2ACalcSlots, int, int) {
  notProvided("ncclLLA2ACalcSlots");
  return 0;
}
NCCL_API(DeviceTeam, ncclTeamWorld, ncclComm_t) {
  notProvided("ncclTeamWorld");
  return DeviceTeam{0, -1, 0};
}
NCCL_API(DeviceTeam, ncclTeamLsa, ncclComm_t) {
  notProvided("ncclTeamLsa");
  return DeviceTeam{0, -1, 0};
}
NCCL_API(DeviceTeam, ncclTeamRail, ncclComm_t) {
  notProvided("ncclTeamRail");
  return DeviceTeam{0, -1, 0};
}
NCCL_API(int, ncclTeamRankToWorld, ncclComm_t, DeviceTeam, int) {
  notProvided("ncclTeamRankToWorld");
  return -1;
}
NCCL_API(int, ncclTeamRankToLsa, ncclComm_t, DeviceTeam, int) {
  notProvided("ncclTeamRankToLsa");
  return -1;
}
