// The nccl*Config collectives (NCCL 2.32): a collective with a per-call ncclCollConfig_t.
// config == NULL is the plain call. Otherwise the config is checked (NCCL's magic, a size
// that holds the fields read), and then:
// - resource hints (minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize, CTAPolicy) are checked for
//   range and otherwise not used: ringcc's tuner picks channels per operation (NCCL_MIN/
//   MAX_NCHANNELS bound it), as NCCL does when they are unset;
// - vendor extensions (ext) are ignored, as NCCL ignores them; userProfilerTag is ignored
//   (ringcc loads no profiler plugins);
// - what ringcc cannot do is refused with ncclInvalidUsage: a forced algSelection, and a
//   launchCompletionEvent.
#include <cstddef>
#include <cstring>

#include "src/api/api.h"
#include "src/base/log.h"

using namespace ringcc;

namespace {

// Reads the caller's config up to its size (an older or newer header's struct).
ncclResult_t checkCollConfig(const ncclCollConfig_t* user, const char* where) {
  if (user == nullptr) return ncclSuccess;
  if (user->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument, where,
                "config: magic is 0x%x, not 0x%x; initialize it with NCCL_COLLCONFIG_INITIALIZER",
                user->magic, NCCL_API_MAGIC);
  if (user->size < offsetof(ncclCollConfig_t, ext))
    return fail(ncclInvalidArgument, where, "config: size %zu is too small", user->size);
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  std::memcpy(&c, user, user->size < sizeof(c) ? user->size : sizeof(c));
  const bool minSet = c.minCTAs != NCCL_CONFIG_UNDEF_INT;
  const bool maxSet = c.maxCTAs != NCCL_CONFIG_UNDEF_INT;
  if ((minSet && c.minCTAs < 1) || (maxSet && c.maxCTAs < 1) ||
      (minSet && maxSet && c.maxCTAs < c.minCTAs))
    return fail(ncclInvalidArgument, where, "config: minCTAs %d / maxCTAs %d out of range",
                c.minCTAs, c.maxCTAs);
  if (c.CTAPolicy != NCCL_CONFIG_UNDEF_INT &&
      (c.CTAPolicy & ~(NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO)) != 0)
    return fail(ncclInvalidArgument, where, "config: CTAPolicy 0x%x is not a NCCL_CTA_POLICY_*",
                c.CTAPolicy);
  if (c.algSelection != nullptr && c.algSelection[0] != '\0') {
    if (c.forceAlgSelection != 0)
      return fail(ncclInvalidUsage, where,
                  "config: algSelection \"%s\" is not implemented in ringcc yet (choose "
                  "algorithms with NCCL_ALGO), and forceAlgSelection makes it binding",
                  c.algSelection);
    LOG_INFO(kLogColl, "%s: algSelection \"%s\" is not forced; ringcc's tuner chooses", where,
             c.algSelection);
  }
  if (c.launchCompletionEvent != nullptr)
    return fail(ncclInvalidUsage, where,
                "config: launchCompletionEvent is not implemented in ringcc yet");
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclAllReduceConfig"));
  return ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

NCCL_API(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclBroadcastConfig"));
  return ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclReduceConfig"));
  return ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclAllGatherConfig"));
  return ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff,
         size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
         cudaStream_t stream, const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclReduceScatterConfig"));
  return ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclAlltoAllConfig"));
  return ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

NCCL_API(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclGatherConfig"));
  return ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RINGCC_CHECK(checkCollConfig(config, "ncclScatterConfig"));
  return ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

// Encryption of the bootstrap's TCP sockets: ringcc's sockets are plaintext (NCCL_COMM_SECRET
// authenticates, it does not encrypt), so only NCCL_ENCRYPTION_MODE_NONE is accepted.
NCCL_API(ncclResult_t, ncclSetEncryption, const ncclEncryptionConfig_t* config) {
  const char* where = "ncclSetEncryption";
  RINGCC_CHECK(checkNotNull(config, "config", where));
  if (config->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument, where,
                "config: magic is 0x%x; initialize it with NCCL_ENCRYPTION_CONFIG_INITIALIZER",
                config->magic);
  if (config->size < offsetof(ncclEncryptionConfig_t, psk))
    return fail(ncclInvalidArgument, where, "config: size %zu is too small", config->size);
  if (config->mode == NCCL_ENCRYPTION_MODE_NONE) return ncclSuccess;
  if (config->mode != NCCL_ENCRYPTION_MODE_PSK)
    return fail(ncclInvalidArgument, where, "config: mode %d is not a ncclEncryptionMode_t",
                config->mode);
  return fail(ncclInvalidUsage, where,
              "NCCL_ENCRYPTION_MODE_PSK is not implemented in ringcc yet (its sockets are "
              "plaintext)");
}
