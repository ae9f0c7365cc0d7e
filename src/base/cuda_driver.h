// The CUDA driver API, loaded at run time. libnccl.so.2 has no link-time dependency on CUDA
// (no DT_NEEDED on libcuda or libcudart), so it loads and runs host communicators on machines
// without a GPU or driver. libcuda.so.1 is opened with dlopen on first need and the few entry
// points ringcc uses are resolved by name, against our own minimal declarations of their
// documented ABI (cuda.h): no CUDA header is needed to build the host library.
//
// Two ways in:
//  - cudaDriver(): loads the driver if it is not loaded yet (RINGCC_DEVICE=cuda, a CUDA
//    communicator). Fails with an error naming what is missing: the library, an entry point,
//    or cuInit's answer (no GPU, no device node, a driver too old).
//  - cudaDriverIfLoaded(): the driver only if this process has already loaded it (a CUDA
//    program has: the runtime loads it). Never loads it, so host-only processes pay nothing.
// Both answer the same process-wide table. Tests fake the driver itself, never this table: a
// stand-in libcuda.so.1 that they load first (tests/support/fake_driver.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace ringcc {

// cuda.h's types, by their ABI.
using CuResult = int;  // CUresult: 0 is CUDA_SUCCESS
using CuDevice = int;
using CuContext = struct CUctx_st*;
using CuModule = struct CUmod_st*;
using CuFunction = struct CUfunc_st*;
using CuStream = struct CUstream_st*;  // the same type as cudaStream_t
using CuEvent = struct CUevent_st*;
using CuDevicePtr = unsigned long long;

constexpr CuResult kCuSuccess = 0;
constexpr CuResult kCuErrorNotReady = 600;
constexpr int kCuPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kCuMemoryTypeHost = 1;         // CUmemorytype
constexpr unsigned kCuMemoryTypeDevice = 2;
constexpr unsigned kCuMemoryTypeArray = 3;
constexpr unsigned kCuMemoryTypeUnified = 4;
constexpr int kCuStreamCaptureStatusNone = 0;           // CUstreamCaptureStatus
constexpr unsigned kCuMemHostAllocDeviceMap = 0x02;     // CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned kCuMemHostAllocPortable = 0x01;      // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kCuMemHostRegisterPortable = 0x01;   // CU_MEMHOSTREGISTER_PORTABLE
constexpr unsigned kCuMemHostRegisterDeviceMap = 0x02;  // CU_MEMHOSTREGISTER_DEVICEMAP
constexpr unsigned kCuStreamNonBlocking = 0x1;          // CU_STREAM_NON_BLOCKING
constexpr unsigned kCuEventDisableTiming = 0x2;         // CU_EVENT_DISABLE_TIMING
// CUstreamCaptureStatus, then the capture errors: 900 an unsafe call (one that may
// synchronize) during a capture, 901 the capture was invalidated, 905 a wait across a capture's
// boundary, 907 an event last recorded in a capture used by an ordinary call.
constexpr int kCuStreamCaptureStatusActive = 1;
constexpr int kCuStreamCaptureStatusInvalidated = 2;
constexpr int kCuStreamCaptureModeRelaxed = 2;  // CUstreamCaptureMode: GLOBAL 0, THREAD_LOCAL 1
constexpr CuResult kCuErrorStreamCaptureUnsupported = 900;
constexpr CuResult kCuErrorStreamCaptureInvalidated = 901;
constexpr CuResult kCuErrorStreamCaptureIsolation = 905;
constexpr CuResult kCuErrorCapturedEvent = 907;
constexpr CuResult kCuErrorPeerAccessAlreadyEnabled = 704;
constexpr CuResult kCuErrorPeerAccessUnsupported = 217;
constexpr int kCuDeviceAttributePciBusId = 33;           // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
constexpr int kCuDeviceAttributePciDeviceId = 34;        // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
constexpr int kCuDeviceAttributePciDomainId = 50;        // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
constexpr unsigned kCuIpcMemLazyEnablePeerAccess = 0x1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
constexpr int kCuFuncAttributeMaxThreadsPerBlock = 0;    // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK

// CUipcMemHandle: opaque bytes naming a cuMemAlloc block to another process.
struct CuIpcMemHandle {
  char reserved[64];
};
static_assert(sizeof(CuIpcMemHandle) == 64);

// The entry points ringcc uses. Every pointer is set once the table is loaded, but for the
// optional ones at the end.
struct CudaDriver {
  CuResult (*cuInit)(unsigned flags) = nullptr;
  CuResult (*cuGetErrorName)(CuResult error, const char** name) = nullptr;
  CuResult (*cuDeviceGetCount)(int* count) = nullptr;
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext* ctx, CuDevice dev) = nullptr;
  CuResult (*cuCtxGetCurrent)(CuContext* ctx) = nullptr;
  CuResult (*cuCtxSetCurrent)(CuContext ctx) = nullptr;
  CuResult (*cuCtxGetDevice)(CuDevice* dev) = nullptr;
  CuResult (*cuPointerGetAttribute)(void* data, int attribute, CuDevicePtr ptr) = nullptr;
  CuResult (*cuModuleLoadData)(CuModule* module, const void* image) = nullptr;
  CuResult (*cuModuleGetFunction)(CuFunction* fn, CuModule module, const char* name) = nullptr;
  CuResult (*cuLaunchKernel)(CuFunction fn, unsigned gridX, unsigned gridY, unsigned gridZ,
                             unsigned blockX, unsigned blockY, unsigned blockZ,
                             unsigned sharedBytes, CuStream stream, void** params,
                             void** extra) = nullptr;
  CuResult (*cuMemAlloc)(CuDevicePtr* ptr, size_t bytes) = nullptr;
  CuResult (*cuMemFree)(CuDevicePtr ptr) = nullptr;
  CuResult (*cuMemcpyHtoD)(CuDevicePtr dst, const void* src, size_t bytes) = nullptr;
  CuResult (*cuMemcpyDtoH)(void* dst, CuDevicePtr src, size_t bytes) = nullptr;
  CuResult (*cuMemsetD8)(CuDevicePtr dst, unsigned char value, size_t bytes) = nullptr;
  CuResult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;
  CuResult (*cuMemHostGetDevicePointer)(CuDevicePtr* dptr, void* host, unsigned flags) = nullptr;
  CuResult (*cuMemFreeHost)(void* ptr) = nullptr;
  CuResult (*cuStreamQuery)(CuStream stream) = nullptr;
  CuResult (*cuStreamSynchronize)(CuStream stream) = nullptr;
  CuResult (*cuStreamIsCapturing)(CuStream stream, int* status) = nullptr;
  // cuStreamGetCaptureInfo_v2 (CUDA 11.3+): the status and the capture sequence's id, unique in
  // the process; graph, dependencies and their count are optional (ringcc passes nulls).
  CuResult (*cuStreamGetCaptureInfo)(CuStream stream, int* status, uint64_t* id, void** graph,
                                     const void** dependencies, size_t* nDependencies) = nullptr;
  // The CUDA engine's own: a short-lived stream for FIFO setup (non-blocking, so it never
  // waits for kernels on the legacy default stream), uploads queued on the batch's stream,
  // events that order a communicator's launches across the user's streams (cuEventQuery: a
  // captured batch waits for ordinary work on the host), and peer access between GPUs.
  CuResult (*cuStreamCreate)(CuStream* stream, unsigned flags) = nullptr;
  CuResult (*cuStreamDestroy)(CuStream stream) = nullptr;
  CuResult (*cuMemcpyHtoDAsync)(CuDevicePtr dst, const void* src, size_t bytes,
                                CuStream stream) = nullptr;
  CuResult (*cuMemcpyDtoDAsync)(CuDevicePtr dst, CuDevicePtr src, size_t bytes,
                                CuStream stream) = nullptr;
  CuResult (*cuMemsetD8Async)(CuDevicePtr dst, unsigned char value, size_t bytes,
                              CuStream stream) = nullptr;
  // A host function run in stream order (it must not call CUDA): a one-sided put to a peer
  // reached by message sends what the stream staged (src/rma/rma_device.h).
  CuResult (*cuLaunchHostFunc)(CuStream stream, void (*fn)(void*), void* userData) = nullptr;
  // Stream-ordered allocation (CUDA 11.2+) from the device's current pool: a composite
  // operation's workspace (Adasum), allocated and freed in stream order, never waiting for
  // running kernels.
  CuResult (*cuMemAllocAsync)(CuDevicePtr* ptr, size_t bytes, CuStream stream) = nullptr;
  CuResult (*cuMemFreeAsync)(CuDevicePtr ptr, CuStream stream) = nullptr;
  CuResult (*cuEventCreate)(CuEvent* event, unsigned flags) = nullptr;
  CuResult (*cuEventRecord)(CuEvent event, CuStream stream) = nullptr;
  CuResult (*cuEventSynchronize)(CuEvent event) = nullptr;
  CuResult (*cuEventQuery)(CuEvent event) = nullptr;  // kCuSuccess once done, else NotReady
  // The calling thread's capture mode, swapped: in the default (global) mode a query such as
  // cuEventQuery while any capture is active is an unsafe call that invalidates the capture.
  CuResult (*cuThreadExchangeStreamCaptureMode)(int* mode) = nullptr;
  CuResult (*cuEventDestroy)(CuEvent event) = nullptr;
  CuResult (*cuStreamWaitEvent)(CuStream stream, CuEvent event, unsigned flags) = nullptr;
  CuResult (*cuCtxEnablePeerAccess)(CuContext peer, unsigned flags) = nullptr;
  CuResult (*cuDeviceCanAccessPeer)(int* can, CuDevice dev, CuDevice peer) = nullptr;
  // Host memory that another process shares (a shm segment) or that a proxy moves (a network
  // FIFO), made reachable for kernels: transports/host_mapped.h.
  CuResult (*cuMemHostRegister)(void* ptr, size_t bytes, unsigned flags) = nullptr;
  CuResult (*cuMemHostUnregister)(void* ptr) = nullptr;
  // GPU memory of one process written by another's kernels (a shm connection's slots between
  // CUDA ranks: transports/shm/device_slots.h), and the PCI ids that tell which GPU a rank of
  // another process uses (src/base/pci_bus.h).
  CuResult (*cuIpcGetMemHandle)(CuIpcMemHandle* handle, CuDevicePtr ptr) = nullptr;
  CuResult (*cuIpcOpenMemHandle)(CuDevicePtr* ptr, CuIpcMemHandle handle, unsigned flags) = nullptr;
  CuResult (*cuIpcCloseMemHandle)(CuDevicePtr ptr) = nullptr;
  // The allocation a device address lies in (its base and size): a window of one-sided
  // operations (src/rma) is exported to another process by its allocation's IPC handle and its
  // offset there.
  CuResult (*cuMemGetAddressRange)(CuDevicePtr* base, size_t* bytes, CuDevicePtr ptr) = nullptr;
  CuResult (*cuDeviceGetAttribute)(int* value, int attribute, CuDevice dev) = nullptr;
  // The batch kernel's module (src/cuda/kernel_module.h): the driver's version, named when the
  // kernels do not load, and the function's attributes (asking one loads a lazily loaded
  // kernel, CUDA_MODULE_LOADING=LAZY being the default since CUDA 12.2).
  CuResult (*cuDriverGetVersion)(int* version) = nullptr;
  CuResult (*cuFuncGetAttribute)(int* value, int attribute, CuFunction fn) = nullptr;
  // Optional, null where the driver lacks them: a context's process-unique id (CUDA 12.0) and
  // the explicit load of a lazily loaded function (CUDA 12.4).
  CuResult (*cuCtxGetId)(CuContext ctx, unsigned long long* id) = nullptr;
  CuResult (*cuFuncLoad)(CuFunction fn) = nullptr;
};

// The driver, loading it (and calling cuInit) on first need. On failure *out is null and the
// error (ncclSystemError: no library or entry point; ncclUnhandledCudaError: cuInit failed)
// names what is missing; `why` says who needed CUDA ("RINGCC_DEVICE=cuda").
ncclResult_t cudaDriver(const CudaDriver** out, const char* why);

// The driver if this process has loaded libcuda.so.1 already (and it initialized), else null.
const CudaDriver* cudaDriverIfLoaded();

// Whether a library of this file name ("libcuda.so.1") is loaded in the process; cheap when
// nothing was loaded since the last look for libcuda.so.1.
bool libraryInProcess(const char* name);

// "CUDA_ERROR_NO_DEVICE (100)", for messages.
const char* cuErrorName(const CudaDriver& cu, CuResult r, char* buf, size_t size);

}  // namespace ringcc
