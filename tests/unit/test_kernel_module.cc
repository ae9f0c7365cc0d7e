// The batch kernel's module cache and load errors (src/cuda/kernel_module.h), on fake drivers:
// a module per context id (a context re-created at the same address loads anew), re-validation
// where the driver has no cuCtxGetId, the function loaded eagerly, errors that name the
// driver's and the toolkit's versions; and a CUDA communicator that loads its kernel at init.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nccl.h"
#include "ringcc_config.h"
#include "src/base/error.h"
#include "src/cuda/kernel_module.h"
#include "support/fake_cuda.h"
#include "support/test_env.h"

using namespace ringcc;

#if RINGCC_HAVE_CUDA
namespace {

// The fake driver's state: contexts by address with their ids, modules it handed out.
CuContext gCurrent = nullptr;
std::map<CuContext, unsigned long long> gIds;
int gDevice = 0;
int gLoads = 0, gFuncLoads = 0, gAttributeQueries = 0, gRevalidations = 0;
CuResult gLoadResult = kCuSuccess;
int gDriverVersion = 13000;
int gMaxThreads = 1024;
uintptr_t gNextModule = 0x10000;
std::set<CuModule> gDeadModules;  // modules of destroyed contexts
bool gCountRevalidation = false;

CuFunction functionOf(CuModule m) {
  return reinterpret_cast<CuFunction>(reinterpret_cast<uintptr_t>(m) + 8);
}

CudaDriver moduleDriver() {
  CudaDriver d;
  d.cuGetErrorName = [](CuResult r, const char** name) {
    *name = r == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : "CUDA_ERROR_FAKE";
    return kCuSuccess;
  };
  d.cuCtxGetCurrent = [](CuContext* ctx) {
    *ctx = gCurrent;
    return kCuSuccess;
  };
  d.cuCtxGetDevice = [](CuDevice* dev) {
    *dev = gDevice;
    return kCuSuccess;
  };
  d.cuCtxGetId = [](CuContext ctx, unsigned long long* id) -> CuResult {
    auto it = gIds.find(ctx);
    if (it == gIds.end()) return 201;  // CUDA_ERROR_INVALID_CONTEXT
    *id = it->second;
    return kCuSuccess;
  };
  d.cuDriverGetVersion = [](int* v) {
    *v = gDriverVersion;
    return kCuSuccess;
  };
  d.cuModuleLoadData = [](CuModule* m, const void*) -> CuResult {
    if (gLoadResult != kCuSuccess) return gLoadResult;
    ++gLoads;
    *m = reinterpret_cast<CuModule>(gNextModule += 0x100);
    return kCuSuccess;
  };
  d.cuModuleGetFunction = [](CuFunction* fn, CuModule m, const char* name) -> CuResult {
    if (gCountRevalidation) ++gRevalidations;
    if (gDeadModules.count(m)) return 400;  // CUDA_ERROR_INVALID_HANDLE
    if (std::string(name) == "ringccAdasumKernel") {
      *fn = reinterpret_cast<CuFunction>(reinterpret_cast<uintptr_t>(functionOf(m)) + 8);
      return kCuSuccess;
    }
    if (std::string(name) == "ringccRmaKernel") {
      *fn = reinterpret_cast<CuFunction>(reinterpret_cast<uintptr_t>(functionOf(m)) + 16);
      return kCuSuccess;
    }
    if (std::string(name) != "ringccBatchKernel") return 500;
    *fn = functionOf(m);
    return kCuSuccess;
  };
  d.cuFuncLoad = [](CuFunction) {
    ++gFuncLoads;
    return kCuSuccess;
  };
  d.cuFuncGetAttribute = [](int* value, int attribute, CuFunction) -> CuResult {
    if (attribute != kCuFuncAttributeMaxThreadsPerBlock) return 1;
    ++gAttributeQueries;
    *value = gMaxThreads;
    return kCuSuccess;
  };
  return d;
}

void resetFake() {
  gIds.clear();
  gDeadModules.clear();
  gLoads = gFuncLoads = gAttributeQueries = gRevalidations = 0;
  gLoadResult = kCuSuccess;
  gDriverVersion = 13000;
  gMaxThreads = 1024;
  gDevice = 0;
  gCountRevalidation = false;
}

// Ids unique across this file's test cases (the module cache lives for the process).
unsigned long long freshId() {
  static unsigned long long next = 1000;
  return ++next;
}

}  // namespace

TEST_CASE("the kernel module is kept per context id, not per context address", "[kernel_module]") {
  resetFake();
  const CudaDriver cu = moduleDriver();
  gCurrent = reinterpret_cast<CuContext>(0x2000);
  gIds[gCurrent] = freshId();
  CuFunction first = nullptr, again = nullptr;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &first) == ncclSuccess);
  REQUIRE(kernelFunction(cu, Kernel::Batch, &again) == ncclSuccess);
  CHECK(again == first);
  CHECK(gLoads == 1);
  CHECK(gFuncLoads == 3);  // every kernel loaded eagerly, not at the first launch
  CHECK(gAttributeQueries == 3);
  CuFunction adasum = nullptr;
  REQUIRE(kernelFunction(cu, Kernel::Adasum, &adasum) == ncclSuccess);
  CHECK(adasum != first);
  CHECK(gLoads == 1);  // the same module
  // The context destroyed and made again (cudaDeviceReset) at the very same address: its old
  // module is gone with it, so the kernel is loaded into the new one.
  gDeadModules.insert(reinterpret_cast<CuModule>(reinterpret_cast<uintptr_t>(first) - 8));
  gIds[gCurrent] = freshId();
  CuFunction fresh = nullptr;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &fresh) == ncclSuccess);
  CHECK(fresh != first);
  CHECK(gLoads == 2);
  // Another device's context: a module of its own.
  gDevice = 1;
  gCurrent = reinterpret_cast<CuContext>(0x2100);
  gIds[gCurrent] = freshId();
  CuFunction other = nullptr;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &other) == ncclSuccess);
  CHECK(other != fresh);
  CHECK(gLoads == 3);
  gCurrent = nullptr;
}

TEST_CASE("without cuCtxGetId a kept module is checked again before use", "[kernel_module]") {
  resetFake();
  CudaDriver cu = moduleDriver();
  cu.cuCtxGetId = nullptr;  // a driver before CUDA 12.0
  cu.cuFuncLoad = nullptr;  // ... and before 12.4: the attribute query loads the function
  gCurrent = reinterpret_cast<CuContext>(0x3000 + 0x10 * static_cast<uintptr_t>(freshId()));
  CuFunction first = nullptr, again = nullptr;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &first) == ncclSuccess);
  CHECK(gAttributeQueries == 3);  // one per kernel
  gCountRevalidation = true;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &again) == ncclSuccess);
  CHECK(again == first);
  CHECK(gLoads == 1);
  CHECK(gRevalidations == 1);
  // The context behind this address was re-created: the kept module no longer answers.
  gDeadModules.insert(reinterpret_cast<CuModule>(reinterpret_cast<uintptr_t>(first) - 8));
  REQUIRE(kernelFunction(cu, Kernel::Batch, &again) == ncclSuccess);
  CHECK(again != first);
  CHECK(gLoads == 2);
  gCurrent = nullptr;
}

TEST_CASE("a failed load names the driver's version and the kernels' toolkit", "[kernel_module]") {
  resetFake();
  const CudaDriver cu = moduleDriver();
  gCurrent = reinterpret_cast<CuContext>(0x4000);
  gIds[gCurrent] = freshId();
  const std::string toolkit = std::string("kernels built with CUDA ") + RINGCC_CUDA_TOOLKIT_VERSION;
  CuFunction fn = nullptr;
  gLoadResult = 209;
  gDriverVersion = 12040;
  CHECK(kernelFunction(cu, Kernel::Batch, &fn) == ncclUnhandledCudaError);
  std::string msg = lastErrorMessage();
  INFO(msg);
  CHECK(msg.find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
  CHECK(msg.find("driver 12.4") != std::string::npos);
  CHECK(msg.find(toolkit) != std::string::npos);
  CHECK(msg.find("sm_80, sm_90 and compute_90 PTX") != std::string::npos);
  CHECK(msg.find("older than that toolkit") != std::string::npos);  // 12.4 < 13.x
  // A driver as new as the toolkit, refusing anyway (another GPU): no claim about age.
  gDriverVersion = 99090;
  CHECK(kernelFunction(cu, Kernel::Batch, &fn) == ncclUnhandledCudaError);
  msg = lastErrorMessage();
  CHECK(msg.find("driver 99.9") != std::string::npos);
  CHECK(msg.find("older") == std::string::npos);
  // A failed load is not kept: once the driver can, the kernel loads.
  gLoadResult = kCuSuccess;
  REQUIRE(kernelFunction(cu, Kernel::Batch, &fn) == ncclSuccess);
  CHECK(gLoads == 1);
  // A kernel that cannot run a whole block here is refused at load, not at the first launch.
  gIds[gCurrent] = freshId();
  gMaxThreads = 256;
  CHECK(kernelFunction(cu, Kernel::Batch, &fn) == ncclUnhandledCudaError);
  msg = lastErrorMessage();
  CHECK(msg.find("at most 256 threads a block") != std::string::npos);
  CHECK(msg.find(toolkit) != std::string::npos);
  gCurrent = nullptr;
}

TEST_CASE("a CUDA communicator loads its kernel at init, into each new context",
          "[kernel_module]") {
  test::ScopedEnv device("RINGCC_DEVICE", "cuda");
  for (int round = 0; round < 2; ++round) {
    // Each scope's contexts are new (new ids at the same addresses, as after a device reset):
    // a cache keyed by the address would hand the second round the first round's function.
    test::FakeCudaScope cuda;
    ncclComm_t comms[3] = {};
    int devs[3] = {0, 0, 1};
    REQUIRE(ncclCommInitAll(comms, 3, devs) == ncclSuccess);
    CHECK(cuda.functionLoads() == 6);  // the three kernels per context (devices 0 and 1), at init
    CHECK(cuda.kernelsRun() == 0);
    for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
}

#else

TEST_CASE("a build without CUDA kernels says so", "[kernel_module]") {
  CudaDriver cu;
  CuFunction fn = nullptr;
  CHECK(kernelFunction(cu, Kernel::Batch, &fn) == ncclInvalidUsage);
  CHECK(lastErrorMessage().find("built without CUDA kernels") != std::string::npos);
}

#endif
