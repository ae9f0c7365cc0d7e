// Connection geometry: NCCL_BUFFSIZE into nSlots x slotBytes (plus LL slots), and the checks
// both sides apply.
#include <algorithm>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "transports/transport.h"

namespace ringcc {

ConnSpec connSpecForBuffer(int64_t bytes, uint32_t nSlots) {
  ConnSpec spec;
  spec.nSlots = nSlots;
  int64_t lo = int64_t{nSlots} * 64;
  int64_t clamped = std::clamp<int64_t>(bytes, lo, static_cast<int64_t>(kMaxConnBytes));
  spec.slotBytes = static_cast<uint32_t>((clamped / nSlots) & ~int64_t{63});
  return spec;
}

ConnSpec defaultConnSpec() {
  int64_t bytes = paramInt("BUFFSIZE");
  ConnSpec spec = connSpecForBuffer(bytes, kDefaultSlots);
  if (static_cast<int64_t>(connSlotBytes(spec)) != bytes)
    LOG_INFO(kLogInit | kLogEnv, "NCCL_BUFFSIZE=%lld: using %u slots of %u bytes",
             static_cast<long long>(bytes), spec.nSlots, spec.slotBytes);
  if (bytes < int64_t{kDefaultSlots} * 64 || bytes > static_cast<int64_t>(kMaxConnBytes))
    LOG_WARN("NCCL_BUFFSIZE=%lld is out of range [%u, %llu]; using %llu bytes",
             static_cast<long long>(bytes), kDefaultSlots * 64,
             static_cast<unsigned long long>(kMaxConnBytes),
             static_cast<unsigned long long>(connSlotBytes(spec)));
  return spec;
}

ncclResult_t checkConnSpec(const ConnSpec& spec, const char* where) {
  if (spec.nSlots == 0 || spec.nSlots > kMaxSlots || (spec.nSlots & (spec.nSlots - 1)) != 0)
    return failPeer(ncclInvalidArgument, spec.peer.rank, where,
                    "spec.nSlots=%u must be a power of two in [1, %u]", spec.nSlots, kMaxSlots);
  if (spec.slotBytes < 64 || spec.slotBytes % 64 != 0)
    return failPeer(ncclInvalidArgument, spec.peer.rank, where,
                    "spec.slotBytes=%u must be a positive multiple of 64", spec.slotBytes);
  if (connSlotBytes(spec) > kMaxConnBytes)
    return failPeer(ncclInvalidArgument, spec.peer.rank, where,
                    "spec.nSlots x spec.slotBytes = %llu exceeds %llu bytes",
                    static_cast<unsigned long long>(connSlotBytes(spec)),
                    static_cast<unsigned long long>(kMaxConnBytes));
  if (spec.llSlotBytes % kLlLineBytes != 0)
    return failPeer(ncclInvalidArgument, spec.peer.rank, where,
                    "spec.llSlotBytes=%u must be a multiple of %u (0: no LL memory)",
                    spec.llSlotBytes, kLlLineBytes);
  if (connLlBytes(spec) > kMaxConnBytes)
    return failPeer(ncclInvalidArgument, spec.peer.rank, where,
                    "spec.nSlots x spec.llSlotBytes = %llu exceeds %llu bytes",
                    static_cast<unsigned long long>(connLlBytes(spec)),
                    static_cast<unsigned long long>(kMaxConnBytes));
  return ncclSuccess;
}

ncclResult_t checkConnGeometry(const ConnSpec& spec, const ConnGeometry& remote,
                               const char* where) {
  if (remote.nSlots == spec.nSlots && remote.slotBytes == spec.slotBytes &&
      remote.llSlotBytes == spec.llSlotBytes)
    return ncclSuccess;
  return failPeer(ncclInvalidUsage, spec.peer.rank, where,
                  "channel %d: the peer has %u slots of %u bytes (LL %u bytes), we have %u of %u "
                  "(LL %u) (NCCL_BUFFSIZE must be the same on every rank)",
                  spec.channel, remote.nSlots, remote.slotBytes, remote.llSlotBytes, spec.nSlots,
                  spec.slotBytes, spec.llSlotBytes);
}

}  // namespace ringcc
