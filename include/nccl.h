/*
 * ringcc: the NCCL C API.
 *
 * Written for ringcc; ABI-identical to NCCL 2.32.3's nccl.h: the same enum values, the same
 * struct layouts and sizes, the same function names and signatures. A binary built against
 * NVIDIA's header loads libnccl.so.2 from ringcc unchanged. tests/unit/test_abi.cc checks
 * this header against NVIDIA's 2.32.3 one (scripts/fetch_nccl_header.sh puts it in a per-user
 * cache), and tests/abi/ links a C program that calls every function of that header against
 * ringcc's library. Which functions ringcc implements, and which answer ncclInvalidUsage, is
 * in docs/api.md; ringcc itself is told from NVIDIA's library by ringccGetVersion (ringcc.h).
 *
 * Source compatibility: like NVIDIA's header, this one includes cuda_runtime.h, cuda_fp16.h
 * and cuda_bf16.h when the CUDA toolkit's headers are on the include path, so programs written
 * against NVIDIA's header (nccl-tests uses `half` after including only nccl.h) compile
 * unchanged. Without them it needs no CUDA at all: cudaStream_t is declared here with the very
 * typedef CUDA uses, so a later cuda_runtime.h redeclares it harmlessly. Defining
 * RINGCC_NCCL_NO_CUDA_HEADERS before including it keeps the CUDA-free form (ringcc's own host
 * sources never have the toolkit on their include path).
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23203
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

/* Marks ringcc's header: ringcc's own sources check that this, not NVIDIA's nccl.h (which sits
 * in /usr/local/cuda/include on CUDA machines), is the one they compile against. */
#define RINGCC_NCCL_H 1

#if !defined(RINGCC_NCCL_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define RINGCC_NCCL_H_WITH_CUDA 1
#endif
#endif

#if defined(RINGCC_NCCL_H_WITH_CUDA)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
/* Same typedefs as cuda_runtime_api.h, so a redeclaration there is harmless. */
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Result codes. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* The magic of every versioned struct's initializer. */
#define NCCL_API_MAGIC 0xcafebeef

/* Window registration flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
#define NCCL_WIN_CFT_COUNTED 0x08
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Performance policy (config.CTAPolicy). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags: must be NCCL_REVOKE_DEFAULT. */
#define NCCL_REVOKE_DEFAULT 0x00

/* config.hostCftMode. */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

/* config.nvlsHostMode: flags that turn host NVLS components off (ringcc has none). */
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Communicator configuration. The library reads a caller's config by its `size` field, so
 * configs of older headers (2.27's 72 bytes, 2.28's 80, 2.30's 96) and of newer ones (which
 * append fields) are accepted too. */
typedef struct ncclConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                  \
  {                                                              \
    sizeof(ncclConfig_t),          /* size */                    \
        NCCL_API_MAGIC,            /* magic */                   \
        NCCL_VERSION_CODE,         /* version */                 \
        NCCL_CONFIG_UNDEF_INT,     /* blocking */                \
        NCCL_CONFIG_UNDEF_INT,     /* cgaClusterSize */          \
        NCCL_CONFIG_UNDEF_INT,     /* minCTAs */                 \
        NCCL_CONFIG_UNDEF_INT,     /* maxCTAs */                 \
        NCCL_CONFIG_UNDEF_PTR,     /* netName */                 \
        NCCL_CONFIG_UNDEF_INT,     /* splitShare */              \
        NCCL_CONFIG_UNDEF_INT,     /* trafficClass */            \
        NCCL_CONFIG_UNDEF_PTR,     /* commName */                \
        NCCL_CONFIG_UNDEF_INT,     /* collnetEnable */           \
        NCCL_CONFIG_UNDEF_INT,     /* CTAPolicy */               \
        NCCL_CONFIG_UNDEF_INT,     /* shrinkShare */             \
        NCCL_CONFIG_UNDEF_INT,     /* nvlsCTAs */                \
        NCCL_CONFIG_UNDEF_INT,     /* nChannelsPerNetPeer */     \
        NCCL_CONFIG_UNDEF_INT,     /* nvlinkCentricSched */      \
        NCCL_CONFIG_UNDEF_INT,     /* graphUsageMode */          \
        NCCL_CONFIG_UNDEF_INT,     /* numRmaCtx */               \
        NCCL_CONFIG_UNDEF_INT,     /* maxP2pPeers */             \
        NCCL_CONFIG_UNDEF_INT,     /* graphStreamOrdering */     \
        NCCL_CONFIG_UNDEF_INT,     /* launchOrderImplicit */     \
        NCCL_CONFIG_UNDEF_INT,     /* numRmaSig */               \
        NCCL_CONFIG_UNDEF_INT,     /* rmaEagerInit */            \
        NCCL_CONFIG_UNDEF_INT,     /* hostCftMode */             \
        NCCL_CONFIG_UNDEF_INT,     /* nvlsHostMode */            \
  }

/* A vendor option of a ncclCollConfig_t (a list through `next`). NCCL ignores them all, and so
 * does ringcc. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Per-collective configuration of the nccl*Config entry points (versioned, append-only). */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                            \
  {                                                            \
    sizeof(ncclCollConfig_t),      /* size */                  \
        NCCL_API_MAGIC,            /* magic */                 \
        NCCL_VERSION_CODE,         /* version */               \
        NCCL_CONFIG_UNDEF_PTR,     /* ext */                   \
        NCCL_CONFIG_UNDEF_INT,     /* minCTAs */               \
        NCCL_CONFIG_UNDEF_INT,     /* maxCTAs */               \
        NCCL_CONFIG_UNDEF_INT,     /* nvlsCTAs */              \
        NCCL_CONFIG_UNDEF_INT,     /* cgaClusterSize */        \
        NCCL_CONFIG_UNDEF_PTR,     /* algSelection */          \
        1,                         /* forceAlgSelection */     \
        NCCL_CONFIG_UNDEF_INT,     /* CTAPolicy */             \
        0,                         /* userProfilerTag */       \
        NCCL_CONFIG_UNDEF_PTR,     /* launchCompletionEvent */ \
  }

/* Filled by ncclGroupSimulateEnd. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                      \
  {                                                                    \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT \
  }

/* Reduction operators. Values >= ncclNumOps are handles from ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,       /* read while the collective runs */
  ncclScalarHostImmediate = 1 /* read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ncclCommSuspend flags. */
#define NCCL_SUSPEND_MEM 0x01

/* What ncclCommMemStats reports (GPU memory the communicator holds, in bytes). */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* GPU memory ncclCommSuspend could release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* GPU memory that stays while suspended */
  ncclStatGpuMemTotal = 3      /* all GPU memory the communicator holds */
} ncclCommMemStat_t;

/* ncclWaitSignal: wait for opCnt signals from peer on (sigIdx, ctx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* ncclSetEncryption: encryption of NCCL's TCP sockets. */
typedef enum {
  NCCL_ENCRYPTION_MODE_NONE = 0,
  NCCL_ENCRYPTION_MODE_PSK = 1
} ncclEncryptionMode_t;

typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;
  const char* psk;
} ncclEncryptionConfig_t;

#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                                   \
  {                                                                                          \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE,                       \
        NCCL_ENCRYPTION_MODE_NONE, NCCL_CONFIG_UNDEF_PTR                                     \
  }

/* A parameter of the parameter API (ncclParamBind): owned by the library, never freed. */
typedef struct ncclParamHandle* ncclParamHandle_t;

/* Each function exists twice: nccl* and the profiling alias pnccl*. */
#define NCCL_API_PAIR(ret, name, args) \
  ret name args;                       \
  ret p##name args;

NCCL_API_PAIR(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
NCCL_API_PAIR(ncclResult_t, ncclMemFree, (void* ptr))
NCCL_API_PAIR(ncclResult_t, ncclGetVersion, (int* version))
NCCL_API_PAIR(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
NCCL_API_PAIR(ncclResult_t, ncclCommInitRankConfig,
              (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclCommInitRank,
              (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
NCCL_API_PAIR(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
NCCL_API_PAIR(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
NCCL_API_PAIR(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
NCCL_API_PAIR(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
NCCL_API_PAIR(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
NCCL_API_PAIR(ncclResult_t, ncclCommSplit,
              (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclCommShrink,
              (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
               ncclConfig_t* config, int shrinkFlags))
NCCL_API_PAIR(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId))
NCCL_API_PAIR(ncclResult_t, ncclCommGrow,
              (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
               ncclComm_t* newcomm, ncclConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclCommInitRankScalable,
              (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
               ncclConfig_t* config))
NCCL_API_PAIR(const char*, ncclGetErrorString, (ncclResult_t result))
NCCL_API_PAIR(const char*, ncclGetLastError, (ncclComm_t comm))
/* NVIDIA's header declares these (deprecated) only under NCCL_OS_LINUX and makes them empty
 * macros otherwise; both libraries export them. */
NCCL_API_PAIR(void, ncclResetDebugInit, (void))
NCCL_API_PAIR(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
NCCL_API_PAIR(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
NCCL_API_PAIR(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
NCCL_API_PAIR(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))
NCCL_API_PAIR(ncclResult_t, ncclCommRegister,
              (const ncclComm_t comm, void* buff, size_t size, void** handle))
NCCL_API_PAIR(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
NCCL_API_PAIR(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags))
NCCL_API_PAIR(ncclResult_t, ncclCommResume, (ncclComm_t comm))
NCCL_API_PAIR(ncclResult_t, ncclCommMemStats,
              (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value))
NCCL_API_PAIR(ncclResult_t, ncclCommWindowRegister,
              (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
NCCL_API_PAIR(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))
NCCL_API_PAIR(ncclResult_t, ncclWinGetUserPtr,
              (ncclComm_t comm, ncclWindow_t win, void** outUserPtr))
NCCL_API_PAIR(ncclResult_t, ncclRedOpCreatePreMulSum,
              (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype,
               ncclScalarResidence_t residence, ncclComm_t comm))
NCCL_API_PAIR(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

/* Collectives. sendbuff == recvbuff (or the rank's own block of it) means in place. */
NCCL_API_PAIR(ncclResult_t, ncclReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclBcast,
              (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
               cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclBroadcast,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclAllReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclReduceScatter,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclAllGather,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclAlltoAll,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclGather,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclScatter,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream))

/* The same collectives with a per-call ncclCollConfig_t (NULL: as the plain call). */
NCCL_API_PAIR(ncclResult_t, ncclAllReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
               const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclBroadcastConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
               const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclAllGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclReduceScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
               const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclAlltoAllConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))
NCCL_API_PAIR(ncclResult_t, ncclScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))

/* Point to point. */
NCCL_API_PAIR(ncclResult_t, ncclSend,
              (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclRecv,
              (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream))

/* One-sided: put into a peer's window, signal, wait for signals. */
NCCL_API_PAIR(ncclResult_t, ncclPutSignal,
              (const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
               unsigned int flags, ncclComm_t comm, cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclSignal,
              (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
               cudaStream_t stream))
NCCL_API_PAIR(ncclResult_t, ncclWaitSignal,
              (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
               cudaStream_t stream))

/* Groups: calls between start and end are batched; end launches (and, on host
 * communicators, completes) them all. */
NCCL_API_PAIR(ncclResult_t, ncclGroupStart, (void))
NCCL_API_PAIR(ncclResult_t, ncclGroupEnd, (void))
NCCL_API_PAIR(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

NCCL_API_PAIR(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t* config))

/* Parameters (NCCL_* and RINGCC_* settings): by handle with typed reads, or by key as text.
 * Returned strings and tables live until the same call's next use on the same thread. */
NCCL_API_PAIR(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key))
NCCL_API_PAIR(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out))
NCCL_API_PAIR(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out))
NCCL_API_PAIR(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len))
NCCL_API_PAIR(ncclResult_t, ncclParamGetParameter,
              (const char* key, const char** value, int* valueLen))
NCCL_API_PAIR(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen))
NCCL_API_PAIR(void, ncclParamDumpAll, (void))

#undef NCCL_API_PAIR

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
