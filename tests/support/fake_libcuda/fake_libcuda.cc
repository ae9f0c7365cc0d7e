// A stand-in libcuda.so.1 for host tests: every entry point ringcc resolves from the driver
// (src/base/cuda_driver.cc) exists here under its driver name and forwards to the table a test
// installs (tests/support/fake_driver.h). The library under test finds it the way it finds the
// real driver: it dlopens "libcuda.so.1", which the loader answers with this object once a
// test has loaded it (through a link of that name: no search finds the file), because its
// soname is libcuda.so.1. So the shipped library carries no test hook: what a test fakes is the driver.
//
// Without a table, or for an entry the table leaves null, a call answers
// CUDA_ERROR_NOT_INITIALIZED, as a driver whose cuInit was not called. Two exceptions, so
// that one load per process (ringcc resolves the driver once) serves every test after it:
// cuInit always succeeds (a failure would be kept for the process), and the optional
// cuFuncLoad answers success where the table has none (the function loads at the attribute
// query that follows, as on a driver before CUDA 12.4).
#include <atomic>

#include "src/base/cuda_driver.h"

namespace {

using ringcc::CudaDriver;
using ringcc::CuResult;

constexpr CuResult kNotInitialized = 3;  // CUDA_ERROR_NOT_INITIALIZED

std::atomic<const CudaDriver*> gTable{nullptr};

template <auto Entry, typename... A>
CuResult forward(A... args) {
  const CudaDriver* t = gTable.load(std::memory_order_acquire);
  if (t == nullptr || t->*Entry == nullptr) return kNotInitialized;
  return (t->*Entry)(args...);
}

}  // namespace

using namespace ringcc;

// The project builds with -fvisibility=hidden; a driver's entry points are its exports.
#pragma GCC visibility push(default)
extern "C" {

// The test's side: `table` answers from now on (null: none does). The table must outlive its
// installation.
void ringccFakeCudaInstall(const CudaDriver* table) {
  gTable.store(table, std::memory_order_release);
}

CuResult cuInit(unsigned) { return 0; }
CuResult cuGetErrorName(CuResult e, const char** n) {
  return forward<&CudaDriver::cuGetErrorName>(e, n);
}
CuResult cuDeviceGetCount(int* c) { return forward<&CudaDriver::cuDeviceGetCount>(c); }
CuResult cuDevicePrimaryCtxRetain(CuContext* c, CuDevice d) {
  return forward<&CudaDriver::cuDevicePrimaryCtxRetain>(c, d);
}
CuResult cuCtxGetCurrent(CuContext* c) { return forward<&CudaDriver::cuCtxGetCurrent>(c); }
CuResult cuCtxSetCurrent(CuContext c) { return forward<&CudaDriver::cuCtxSetCurrent>(c); }
CuResult cuCtxGetDevice(CuDevice* d) { return forward<&CudaDriver::cuCtxGetDevice>(d); }
CuResult cuPointerGetAttribute(void* data, int attribute, CuDevicePtr p) {
  return forward<&CudaDriver::cuPointerGetAttribute>(data, attribute, p);
}
CuResult cuModuleLoadData(CuModule* m, const void* image) {
  return forward<&CudaDriver::cuModuleLoadData>(m, image);
}
CuResult cuModuleGetFunction(CuFunction* f, CuModule m, const char* name) {
  return forward<&CudaDriver::cuModuleGetFunction>(f, m, name);
}
CuResult cuLaunchKernel(CuFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CuStream s, void** params,
                        void** extra) {
  return forward<&CudaDriver::cuLaunchKernel>(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
CuResult cuMemAlloc_v2(CuDevicePtr* p, size_t n) { return forward<&CudaDriver::cuMemAlloc>(p, n); }
CuResult cuMemFree_v2(CuDevicePtr p) { return forward<&CudaDriver::cuMemFree>(p); }
CuResult cuMemcpyHtoD_v2(CuDevicePtr dst, const void* src, size_t n) {
  return forward<&CudaDriver::cuMemcpyHtoD>(dst, src, n);
}
CuResult cuMemcpyDtoH_v2(void* dst, CuDevicePtr src, size_t n) {
  return forward<&CudaDriver::cuMemcpyDtoH>(dst, src, n);
}
CuResult cuMemsetD8_v2(CuDevicePtr dst, unsigned char v, size_t n) {
  return forward<&CudaDriver::cuMemsetD8>(dst, v, n);
}
CuResult cuMemHostAlloc(void** p, size_t n, unsigned flags) {
  return forward<&CudaDriver::cuMemHostAlloc>(p, n, flags);
}
CuResult cuMemHostGetDevicePointer_v2(CuDevicePtr* d, void* host, unsigned flags) {
  return forward<&CudaDriver::cuMemHostGetDevicePointer>(d, host, flags);
}
CuResult cuMemFreeHost(void* p) { return forward<&CudaDriver::cuMemFreeHost>(p); }
CuResult cuStreamQuery(CuStream s) { return forward<&CudaDriver::cuStreamQuery>(s); }
CuResult cuStreamSynchronize(CuStream s) { return forward<&CudaDriver::cuStreamSynchronize>(s); }
CuResult cuStreamIsCapturing(CuStream s, int* status) {
  return forward<&CudaDriver::cuStreamIsCapturing>(s, status);
}
CuResult cuStreamGetCaptureInfo_v2(CuStream s, int* status, uint64_t* id, void** graph,
                                   const void** deps, size_t* nDeps) {
  return forward<&CudaDriver::cuStreamGetCaptureInfo>(s, status, id, graph, deps, nDeps);
}
CuResult cuStreamCreate(CuStream* s, unsigned flags) {
  return forward<&CudaDriver::cuStreamCreate>(s, flags);
}
CuResult cuStreamDestroy_v2(CuStream s) { return forward<&CudaDriver::cuStreamDestroy>(s); }
CuResult cuMemcpyHtoDAsync_v2(CuDevicePtr dst, const void* src, size_t n, CuStream s) {
  return forward<&CudaDriver::cuMemcpyHtoDAsync>(dst, src, n, s);
}
CuResult cuLaunchHostFunc(CuStream s, void (*fn)(void*), void* user) {
  return forward<&CudaDriver::cuLaunchHostFunc>(s, fn, user);
}
CuResult cuMemcpyDtoDAsync_v2(CuDevicePtr dst, CuDevicePtr src, size_t n, CuStream s) {
  return forward<&CudaDriver::cuMemcpyDtoDAsync>(dst, src, n, s);
}
CuResult cuMemsetD8Async(CuDevicePtr dst, unsigned char v, size_t n, CuStream s) {
  return forward<&CudaDriver::cuMemsetD8Async>(dst, v, n, s);
}
CuResult cuMemAllocAsync(CuDevicePtr* p, size_t n, CuStream s) {
  return forward<&CudaDriver::cuMemAllocAsync>(p, n, s);
}
CuResult cuMemFreeAsync(CuDevicePtr p, CuStream s) {
  return forward<&CudaDriver::cuMemFreeAsync>(p, s);
}
CuResult cuEventCreate(CuEvent* e, unsigned flags) {
  return forward<&CudaDriver::cuEventCreate>(e, flags);
}
CuResult cuEventRecord(CuEvent e, CuStream s) { return forward<&CudaDriver::cuEventRecord>(e, s); }
CuResult cuEventSynchronize(CuEvent e) { return forward<&CudaDriver::cuEventSynchronize>(e); }
CuResult cuEventQuery(CuEvent e) { return forward<&CudaDriver::cuEventQuery>(e); }
CuResult cuThreadExchangeStreamCaptureMode(int* mode) {
  return forward<&CudaDriver::cuThreadExchangeStreamCaptureMode>(mode);
}
CuResult cuEventDestroy_v2(CuEvent e) { return forward<&CudaDriver::cuEventDestroy>(e); }
CuResult cuStreamWaitEvent(CuStream s, CuEvent e, unsigned flags) {
  return forward<&CudaDriver::cuStreamWaitEvent>(s, e, flags);
}
CuResult cuCtxEnablePeerAccess(CuContext peer, unsigned flags) {
  return forward<&CudaDriver::cuCtxEnablePeerAccess>(peer, flags);
}
CuResult cuDeviceCanAccessPeer(int* can, CuDevice dev, CuDevice peer) {
  return forward<&CudaDriver::cuDeviceCanAccessPeer>(can, dev, peer);
}
CuResult cuMemHostRegister_v2(void* p, size_t n, unsigned flags) {
  return forward<&CudaDriver::cuMemHostRegister>(p, n, flags);
}
CuResult cuMemHostUnregister(void* p) { return forward<&CudaDriver::cuMemHostUnregister>(p); }
CuResult cuIpcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p) {
  return forward<&CudaDriver::cuIpcGetMemHandle>(h, p);
}
CuResult cuIpcOpenMemHandle_v2(CuDevicePtr* p, CuIpcMemHandle h, unsigned flags) {
  return forward<&CudaDriver::cuIpcOpenMemHandle>(p, h, flags);
}
CuResult cuIpcCloseMemHandle(CuDevicePtr p) { return forward<&CudaDriver::cuIpcCloseMemHandle>(p); }
CuResult cuMemGetAddressRange_v2(CuDevicePtr* base, size_t* bytes, CuDevicePtr p) {
  return forward<&CudaDriver::cuMemGetAddressRange>(base, bytes, p);
}
CuResult cuDeviceGetAttribute(int* v, int attribute, CuDevice d) {
  return forward<&CudaDriver::cuDeviceGetAttribute>(v, attribute, d);
}
CuResult cuDriverGetVersion(int* v) { return forward<&CudaDriver::cuDriverGetVersion>(v); }
CuResult cuFuncGetAttribute(int* v, int attribute, CuFunction f) {
  return forward<&CudaDriver::cuFuncGetAttribute>(v, attribute, f);
}
CuResult cuCtxGetId(CuContext c, unsigned long long* id) {
  return forward<&CudaDriver::cuCtxGetId>(c, id);
}
CuResult cuFuncLoad(CuFunction f) {
  const CudaDriver* t = gTable.load(std::memory_order_acquire);
  if (t != nullptr && t->cuFuncLoad == nullptr) return 0;
  return forward<&CudaDriver::cuFuncLoad>(f);
}

}  // extern "C"
#pragma GCC visibility pop
