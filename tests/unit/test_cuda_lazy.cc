// Lazy CUDA (issue 12): libnccl.so.2 needs no CUDA to load, the driver is opened only on
// need, the memory kind is chosen as NCCL's users expect, and buffers that do not match the
// communicator's kind are refused. The driver's answers are faked where this machine has none.
#include <dlfcn.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/base/cuda_driver.h"
#include "src/base/error.h"
#include "src/base/mem_kind.h"
#include "src/cuda/kernel_module.h"
#include "support/fake_driver.h"
#include "support/test_env.h"

using ringcc::test::ScopedEnv;
using namespace ringcc;

namespace {

// A fake driver: one context on device 3; kDevice is device memory, kPinned page-locked host
// memory, anything else pageable.
char gDeviceBytes[64];
char gPinnedBytes[64];
CuContext const kFakeContext = reinterpret_cast<CuContext>(0x1000);
int gPointerQueries = 0;  // cuPointerGetAttribute calls

CudaDriver fakeDriver(bool withContext) {
  CudaDriver d;
  d.cuGetErrorName = [](CuResult, const char** name) {
    *name = "CUDA_ERROR_FAKE";
    return kCuSuccess;
  };
  if (withContext) {
    d.cuCtxGetCurrent = [](CuContext* ctx) {
      *ctx = kFakeContext;
      return kCuSuccess;
    };
  } else {
    d.cuCtxGetCurrent = [](CuContext* ctx) {
      *ctx = nullptr;
      return kCuSuccess;
    };
  }
  d.cuCtxGetDevice = [](CuDevice* dev) {
    *dev = 3;
    return kCuSuccess;
  };
  d.cuDeviceGetAttribute = [](int* value, int, CuDevice dev) {  // PCI ids: bus = device
    *value = dev;
    return kCuSuccess;
  };
  d.cuPointerGetAttribute = [](void* data, int attribute, CuDevicePtr ptr) -> CuResult {
    if (attribute != kCuPointerAttributeMemoryType) return 1;
    ++gPointerQueries;
    auto* p = reinterpret_cast<const char*>(ptr);
    if (p >= gDeviceBytes && p < gDeviceBytes + sizeof gDeviceBytes) {
      *static_cast<unsigned*>(data) = kCuMemoryTypeDevice;
      return kCuSuccess;
    }
    if (p >= gPinnedBytes && p < gPinnedBytes + sizeof gPinnedBytes) {
      *static_cast<unsigned*>(data) = kCuMemoryTypeHost;
      return kCuSuccess;
    }
    return 1;  // CUDA_ERROR_INVALID_VALUE: not CUDA's memory
  };
  return d;
}

struct FakeDriverScope {
  explicit FakeDriverScope(const CudaDriver* d) { test::installFakeCudaDriver(d); }
  ~FakeDriverScope() { test::installFakeCudaDriver(nullptr); }
};

}  // namespace

TEST_CASE("libnccl.so.2 has no link-time dependency on CUDA", "[cuda_driver]") {
  std::string cmd = std::string("readelf -d '") + RINGCC_BUILD_ROOT + "/libnccl.so.2' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char line[512];
  int needed = 0;
  while (fgets(line, sizeof line, p)) {
    out += line;
    if (strstr(line, "(NEEDED)")) ++needed;
  }
  pclose(p);
  INFO(out);
  REQUIRE(needed > 0);  // readelf ran and listed the library's dependencies
  CHECK(out.find("libcuda") == std::string::npos);
  CHECK(out.find("libcudart") == std::string::npos);
  CHECK(out.find("libnvidia") == std::string::npos);
}

TEST_CASE("RINGCC_DEVICE=cuda without a usable driver names what is missing", "[cuda_driver]") {
  void* probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (probe) dlclose(probe);
  ScopedEnv device("RINGCC_DEVICE", "cuda");
  ncclResult_t r = ncclSuccess;
  std::string why;
  std::thread([&] {
    ncclComm_t comms[2] = {};
    r = ncclCommInitAll(comms, 2, nullptr);
    why = ncclGetLastError(nullptr);
  }).join();
  INFO(why);
  CHECK(r != ncclSuccess);
  CHECK(why.find("RINGCC_DEVICE=cuda") != std::string::npos);
  if (!probe) {
    // This machine (and CI) has no driver: the error says so by name.
    CHECK(r == ncclSystemError);
    CHECK(why.find("libcuda.so.1") != std::string::npos);
    CHECK(why.find("cannot be loaded") != std::string::npos);
  }
}

TEST_CASE("a library is seen in the process once it is loaded", "[cuda_driver]") {
  CHECK(libraryInProcess("libc.so.6"));
  CHECK_FALSE(libraryInProcess("libringcc-no-such-library.so.1"));
  // Asked again with nothing loaded in between (the cheap path), then after a load.
  CHECK_FALSE(libraryInProcess("libcuda.so.1"));
  CHECK_FALSE(libraryInProcess("libcuda.so.1"));
  const char* other = "libresolv.so.2";
  bool before = libraryInProcess(other);
  void* lib = dlopen(other, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  CHECK(libraryInProcess(other));
  CHECK_FALSE(libraryInProcess("libcuda.so.1"));
  dlclose(lib);
  INFO("libresolv.so.2 was loaded before the test: " << before);
}

TEST_CASE("the memory-kind decision", "[mem_kind]") {
  CHECK(decideMemKind("", false, false) == KindChoice::Host);
  CHECK(decideMemKind(nullptr, false, false) == KindChoice::Host);
  CHECK(decideMemKind("", true, false) == KindChoice::Host);  // driver loaded, no context
  CHECK(decideMemKind("", true, true) == KindChoice::Cuda);
  CHECK(decideMemKind("host", true, true) == KindChoice::Host);
  CHECK(decideMemKind("cuda", false, false) == KindChoice::CudaNeedsDriver);
  CHECK(decideMemKind("gpu", false, false) == KindChoice::Invalid);
}

TEST_CASE("host communicators never load the CUDA driver", "[mem_kind]") {
  ScopedEnv device("RINGCC_DEVICE", std::nullopt);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  float x[4] = {1, 2, 3, 4};
  REQUIRE(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(x[3] == 4.0f);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
  // Nothing above opened libcuda.so.1: the loader does not have it.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CHECK(lib == nullptr);
  if (lib) dlclose(lib);
  CHECK(cudaDriverIfLoaded() == nullptr);
}

TEST_CASE("pointers are classified by the driver's memory type", "[mem_kind]") {
  CudaDriver fake = fakeDriver(true);
  char pageable[8];
  CHECK(classifyPointer(nullptr, gDeviceBytes) == PointerKind::Unknown);  // no driver
  CHECK(classifyPointer(&fake, gDeviceBytes + 8) == PointerKind::Device);
  CHECK(classifyPointer(&fake, gPinnedBytes) == PointerKind::HostPinned);
  CHECK(classifyPointer(&fake, pageable) == PointerKind::Unknown);
}

TEST_CASE("buffers of the wrong memory kind are invalid arguments", "[mem_kind]") {
  char pageable[8];
  {
    // Before the driver is loaded no pointer can be device memory: nothing to refuse.
    CHECK(checkBufferKind(MemoryKind::Host, gDeviceBytes, "sendbuff", "test") == ncclSuccess);
  }
  CudaDriver fake = fakeDriver(true);
  FakeDriverScope scope(&fake);
  CHECK(checkBufferKind(MemoryKind::Host, pageable, "sendbuff", "test") == ncclSuccess);
  CHECK(checkBufferKind(MemoryKind::Host, gPinnedBytes, "sendbuff", "test") == ncclSuccess);
  CHECK(checkBufferKind(MemoryKind::Host, gDeviceBytes, "sendbuff", "test") == ncclInvalidArgument);
  CHECK(lastErrorMessage().find("sendbuff") != std::string::npos);
  CHECK(lastErrorMessage().find("device memory") != std::string::npos);
  CHECK(checkBufferKind(MemoryKind::Cuda, gDeviceBytes, "recvbuff", "test") == ncclSuccess);
  CHECK(checkBufferKind(MemoryKind::Cuda, gPinnedBytes, "recvbuff", "test") == ncclSuccess);
  CHECK(checkBufferKind(MemoryKind::Cuda, pageable, "recvbuff", "test") == ncclInvalidArgument);
  CHECK(lastErrorMessage().find("recvbuff") != std::string::npos);
  CHECK(lastErrorMessage().find("pageable host memory") != std::string::npos);
}

TEST_CASE("a host communicator refuses device buffers at the call", "[mem_kind]") {
  ScopedEnv device("RINGCC_DEVICE", "host");
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  CudaDriver fake = fakeDriver(true);
  FakeDriverScope scope(&fake);
  float host[4] = {1, 2, 3, 4};
  auto* dev = reinterpret_cast<float*>(gDeviceBytes);
  CHECK(ncclAllReduce(dev, host, 4, ncclFloat, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclGetLastError(comm) != nullptr);
  CHECK(std::string(ncclGetLastError(comm)).find("sendbuff") != std::string::npos);
  CHECK(ncclAllReduce(host, dev, 4, ncclFloat, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(comm)).find("recvbuff") != std::string::npos);
  CHECK(ncclAllReduce(host, host, 4, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("a communicator checks each buffer once, and refused ones every time", "[mem_kind]") {
  CudaDriver fake = fakeDriver(true);
  FakeDriverScope scope(&fake);
  CheckedBuffers checked;
  char a[8], b[8], c[8], d[8], e[8];
  gPointerQueries = 0;
  CHECK(checked.check(MemoryKind::Host, a, b, "test") == ncclSuccess);
  CHECK(gPointerQueries == 2);
  CHECK(checked.check(MemoryKind::Host, b, b, "test") == ncclSuccess);  // in place: known
  CHECK(checked.check(MemoryKind::Host, a, b, "test") == ncclSuccess);
  CHECK(gPointerQueries == 2);
  CHECK(checked.check(MemoryKind::Host, c, nullptr, "test") == ncclSuccess);  // a new one
  CHECK(gPointerQueries == 3);
  // Device memory is refused at every call, never remembered.
  for (int i = 0; i < 2; ++i) {
    CHECK(checked.check(MemoryKind::Host, a, gDeviceBytes, "test") == ncclInvalidArgument);
    CHECK(lastErrorMessage().find("recvbuff") != std::string::npos);
  }
  CHECK(gPointerQueries == 5);
  // A few are kept: the oldest (a) makes way for new ones and is asked about again; b stays.
  CHECK(checked.check(MemoryKind::Host, d, e, "test") == ncclSuccess);
  CHECK(gPointerQueries == 7);
  CHECK(checked.check(MemoryKind::Host, a, b, "test") == ncclSuccess);
  CHECK(gPointerQueries == 8);
}

TEST_CASE("a current CUDA context makes CUDA communicators (host ones in a build without kernels)",
          "[mem_kind]") {
  ScopedEnv device("RINGCC_DEVICE", std::nullopt);
  MemoryKind kind = MemoryKind::Host;
  int dev = -1;
  {
    CudaDriver fake = fakeDriver(true);
    FakeDriverScope scope(&fake);
    REQUIRE(chooseMemKind(&kind, &dev) == ncclSuccess);
    if (kCudaEngineBuilt) {
      CHECK(kind == MemoryKind::Cuda);
      CHECK(dev == 3);
    } else {  // -Dcuda=disabled: host users in a CUDA process keep working (mem_kind.h)
      CHECK(kind == MemoryKind::Host);
      CHECK(dev == -1);
    }
  }
  {
    CudaDriver fake = fakeDriver(false);
    FakeDriverScope scope(&fake);
    dev = -1;
    REQUIRE(chooseMemKind(&kind, &dev) == ncclSuccess);
    CHECK(kind == MemoryKind::Host);
    CHECK(dev == -1);
  }
  {
    ScopedEnv forced("RINGCC_DEVICE", "host");
    CudaDriver fake = fakeDriver(true);
    FakeDriverScope scope(&fake);
    REQUIRE(chooseMemKind(&kind, &dev) == ncclSuccess);
    CHECK(kind == MemoryKind::Host);
  }
}

namespace {

// A fake driver with per-thread current contexts: context 0x1000 + d is device d's.
thread_local CuContext tCurrent = nullptr;
std::mutex gRetainedMu;
std::vector<int> gRetained;

CudaDriver perThreadDriver() {
  CudaDriver d = fakeDriver(true);
  d.cuCtxGetCurrent = [](CuContext* ctx) {
    *ctx = tCurrent;
    return kCuSuccess;
  };
  d.cuCtxSetCurrent = [](CuContext ctx) {
    tCurrent = ctx;
    return kCuSuccess;
  };
  d.cuDevicePrimaryCtxRetain = [](CuContext* ctx, CuDevice dev) -> CuResult {
    if (dev < 0 || dev > 3) return 101;  // CUDA_ERROR_INVALID_DEVICE
    std::lock_guard<std::mutex> lock(gRetainedMu);
    gRetained.push_back(dev);
    *ctx = reinterpret_cast<CuContext>(0x1000 + dev);
    return kCuSuccess;
  };
  d.cuCtxGetDevice = [](CuDevice* dev) {
    *dev = static_cast<CuDevice>(reinterpret_cast<uintptr_t>(tCurrent) - 0x1000);
    return kCuSuccess;
  };
  d.cuModuleLoadData = [](CuModule*, const void*) -> CuResult {
    return 209;  // CUDA_ERROR_NO_BINARY_FOR_GPU
  };
  d.cuDriverGetVersion = [](int* v) {  // named by the load error
    *v = 13000;
    return kCuSuccess;
  };
  return d;
}

}  // namespace

TEST_CASE("ncclCommInitAll binds its helper threads to the ranks' devices", "[mem_kind]") {
  ScopedEnv device("RINGCC_DEVICE", std::nullopt);
  CudaDriver fake = perThreadDriver();
  FakeDriverScope scope(&fake);
  ncclComm_t comms[3] = {};
  {
    // The caller has no context: host communicators, no device touched.
    gRetained.clear();
    tCurrent = nullptr;
    REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
    CHECK(gRetained.empty());
    for (int r = 0; r < 2; ++r) CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
  // CUDA asked for: every rank binds to its device and becomes a CUDA communicator (whose
  // engine then loads its kernels, which this fake driver refuses, so init fails saying so, on
  // every rank; tests/coll/test_cuda_engine.cc runs the engine on an emulated driver).
  ScopedEnv forced("RINGCC_DEVICE", "cuda");
  tCurrent = reinterpret_cast<CuContext>(0x1000);
  gRetained.clear();
  int devs[3] = {2, 2, 1};
  size_t imageBytes = 0;
  const bool haveKernels = batchKernelImage(&imageBytes) != nullptr;  // not in -Dcuda=disabled
  CHECK(ncclCommInitAll(comms, 3, devs) ==
        (haveKernels ? ncclUnhandledCudaError : ncclInvalidUsage));
  CHECK(std::string(ncclGetLastError(nullptr))
            .find(haveKernels ? "loading the embedded kernels failed"
                              : "built without CUDA kernels") != std::string::npos);
  std::sort(gRetained.begin(), gRetained.end());
  CHECK(gRetained == std::vector<int>{1, 1, 2, 2, 2, 2});  // checked first, then bound
  CHECK(comms[0] == nullptr);
  // A device the driver refuses is an invalid argument naming it, before any rank starts (so
  // none waits for the failed one).
  int bad[2] = {0, 7};
  CHECK(ncclCommInitAll(comms, 2, bad) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("device 7") != std::string::npos);
  tCurrent = nullptr;
}

TEST_CASE("a faked driver is a libcuda.so.1 that the library loads as it would the real one",
          "[mem_kind]") {
  CudaDriver fake = fakeDriver(true);
  FakeDriverScope scope(&fake);
  const CudaDriver* cu = nullptr;
  REQUIRE(cudaDriver(&cu, "test") == ncclSuccess);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  // The library's table holds the stand-in's exports, resolved by name like the driver's: no
  // table of the test's was slipped into the library.
  CHECK(dlsym(lib, "ringccFakeCudaInstall") != nullptr);
  CHECK(reinterpret_cast<void*>(cu->cuPointerGetAttribute) == dlsym(lib, "cuPointerGetAttribute"));
  CHECK(reinterpret_cast<void*>(cu->cuMemAlloc) == dlsym(lib, "cuMemAlloc_v2"));
  CHECK(cu != &fake);
  CHECK(cudaDriverIfLoaded() == cu);
  // ... which answer with the installed table.
  gPointerQueries = 0;
  unsigned type = 0;
  CHECK(cu->cuPointerGetAttribute(&type, kCuPointerAttributeMemoryType,
                                  reinterpret_cast<CuDevicePtr>(gDeviceBytes)) == kCuSuccess);
  CHECK(type == kCuMemoryTypeDevice);
  CHECK(gPointerQueries == 1);
  dlclose(lib);
}
