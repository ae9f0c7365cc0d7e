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

// Added by NCCL 2.29-2.32 (nccl_device/host.h): properties, window pointers, CFT teams and
// the GIN inbox/outbox requirements.
NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t, void*) {
  return notProvided("ncclCommQueryProperties");
}
NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t, size_t, void**) {
  return notProvided("ncclGetLsaMultimemDevicePointer");
}
NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t, size_t, void*, void**) {
  return notProvided("ncclGetMultimemDevicePointer");
}
NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t, size_t, int, void**) {
  return notProvided("ncclGetLsaDevicePointer");
}
NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t, size_t, int, void**) {
  return notProvided("ncclGetPeerDevicePointer");
}
NCCL_API(ncclResult_t, ncclGetMultimemDeviceLeInfo, ncclWindow_t, size_t, void*, size_t*) {
  return notProvided("ncclGetMultimemDeviceLeInfo");
}
NCCL_API(ncclResult_t, ncclGetCftDeviceLeInfo, ncclWindow_t, size_t, int, DeviceTeam, void*,
         size_t*) {
  return notProvided("ncclGetCftDeviceLeInfo");
}
NCCL_API(ncclResult_t, ncclGetPeerDeviceLeInfo, ncclWindow_t, size_t, int, void*, size_t*) {
  return notProvided("ncclGetPeerDeviceLeInfo");
}
NCCL_API(DeviceTeam, ncclTeamCft, ncclComm_t, int) {
  notProvided("ncclTeamCft");
  return DeviceTeam{0, -1, 0};
}
NCCL_API(DeviceTeam, ncclTeamCftMultimem, ncclComm_t) {
  notProvided("ncclTeamCftMultimem");
  return DeviceTeam{0, -1, 0};
}
NCCL_API(ncclResult_t, ncclGinOutboxCreateRequirement, int, int, void*, void*) {
  return notProvided("ncclGinOutboxCreateRequirement");
}
NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, DeviceTeam, int, int, void*, void*) {
  return notProvided("ncclGinInboxA2ACreateRequirement");
}
