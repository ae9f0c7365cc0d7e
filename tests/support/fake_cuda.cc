#include "support/fake_cuda.h"

#include "support/fake_driver.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/adasum_tasks.h"
#include "kernels/cuda/batch_block.h"
#include "kernels/rma_tasks.h"
#include "src/exec/host_sync.h"

namespace ringcc::test {
namespace {

constexpr int kDevices = 4;
constexpr uintptr_t kContextBase = 0x1000;
CuFunction const kKernel = reinterpret_cast<CuFunction>(0xf00);
CuFunction const kAdasumKernel = reinterpret_cast<CuFunction>(0xf10);  // the module's second
CuFunction const kRmaKernel = reinterpret_cast<CuFunction>(0xf20);     // ... and third
CuModule const kModule = reinterpret_cast<CuModule>(0xe00);

// A capture sequence (FakeCudaScope::beginCapture): what the streams in it queued, in call
// order (an order their dependencies allow), to run when its graph is launched.
struct Capture {
  uint64_t id;
  bool invalidated = false;  // an error inside it: endCapture fails
  bool ended = false;
  std::vector<std::function<void()>> tasks;
};

// Guards every stream's and event's capture pointers and every Capture.
std::mutex gCaptureMu;

// One stream: a thread running its tasks in order, unless it is capturing: then its tasks go
// into the capture's graph instead.
class Stream {
 public:
  Stream() {
    thread_ = std::thread([this] { run(); });
  }
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      exit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(gCaptureMu);
      if (capture != nullptr) {
        capture->tasks.push_back(std::move(task));
        return;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    cv_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return tasks_.empty() && !busy_; });
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.empty() && !busy_;
  }
  std::shared_ptr<Capture> capture;  // the capture it is in, if any (under gCaptureMu)

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return exit_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // exit_, and nothing left to run
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
      lock.unlock();
      task();
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool exit_ = false;
  std::thread thread_;
};

struct Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;                // records queued
  uint64_t completed = 0;               // records that ran
  std::shared_ptr<Capture> capturedIn;  // the capture of its last record, if it was in one
  void waitFor(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return completed >= n; });
  }
};

// The batch kernel's block, one host thread (kernels/cuda/batch_block.h).
struct HostBlock {
  using Sync = HostSync;
  uint32_t id;
  Slice s{};
  int w = 0;
  uint32_t index() const { return id; }
  uint32_t thread() const { return 0; }
  uint32_t threads() const { return 1; }
  void barrier() const {}
  void nap(unsigned polls) const {
    if (polls > 256)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (polls > 16)
      sched_yield();
  }
  uint64_t nanos() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  Slice* slice() { return &s; }
  int* word() { return &w; }
};

// Whether p lies in one of the ranges of `m` (base -> bytes).
bool insideRange(const std::map<uintptr_t, size_t>& m, uintptr_t p) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  return p < it->first + it->second;
}

// Where a cuMemAlloc block came from: a memfd (so that another process can map it, as CUDA
// IPC lets it) and the device whose context allocated it.
struct DeviceBlock {
  int fd;
  size_t mapped;  // bytes mapped: whole pages
  int device;
};

// What the emulated cuIpcGetMemHandle writes into a CuIpcMemHandle: enough for another process
// to reopen the memfd through /proc/<pid>/fd/<fd>.
struct FakeIpcHandle {
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t mapped;
  int32_t device;
};
static_assert(sizeof(FakeIpcHandle) <= sizeof(CuIpcMemHandle));
constexpr uint64_t kIpcMagic = 0x66616b6569706321ull;  // "fakeipc!"

size_t wholePages(size_t bytes) { return bytes == 0 ? 4096 : (bytes + 4095) / 4096 * 4096; }

struct State {
  std::mutex mu;
  std::map<uintptr_t, size_t> deviceAllocs;  // base -> bytes
  std::map<uintptr_t, DeviceBlock> blocks;   // base -> its memfd
  std::map<uintptr_t, size_t> imports;       // cuIpcOpenMemHandle mappings: base -> bytes
  std::atomic<size_t> ipcOpens{0};
  std::vector<std::unique_ptr<Stream>> streams;
  Stream* legacy = nullptr;
  std::atomic<size_t> kernelsRun{0};
  std::atomic<size_t> adasumKernelsRun{0};
  std::atomic<size_t> rmaKernelsRun{0};
  std::atomic<size_t> kernelsQueued{0};
  std::atomic<size_t> peerAccessCalls{0};
  // Kernels running per device, for the calls that wait until none runs (waitDeviceIdle).
  std::mutex runMu;
  std::condition_variable runCv;
  int running[kDevices] = {};
  std::atomic<int> idleLimitMs{5000};
  std::atomic<size_t> stalls{0};
  std::vector<std::shared_ptr<Capture>> captures;  // active ones (under gCaptureMu)
  uint64_t nextCaptureId = 0;
  std::atomic<size_t> captureErrors{0};
  std::atomic<size_t> functionLoads{0};  // cuFuncLoad calls
  unsigned long long generation = 0;     // this scope's number in the process (cuCtxGetId)
  CudaDriver table;

  Stream* stream(CuStream s) { return s == nullptr ? legacy : reinterpret_cast<Stream*>(s); }
  CuStream add(std::unique_ptr<Stream> s) {
    std::lock_guard<std::mutex> lock(mu);
    streams.push_back(std::move(s));
    return reinterpret_cast<CuStream>(streams.back().get());
  }
  bool isDevice(uintptr_t p) {
    std::lock_guard<std::mutex> lock(mu);
    return insideRange(deviceAllocs, p) || insideRange(imports, p);
  }
};

State* gState = nullptr;
thread_local CuContext tCurrent = nullptr;
thread_local int tCaptureMode = 0;       // CUstreamCaptureMode: 0 global (the default), 2 relaxed
std::atomic<bool> gNoPeerAccess{false};  // FakeCudaScope::disablePeerAccess
std::atomic<size_t> gLiveHostAllocs{0};  // cuMemHostAlloc blocks not freed yet

// Host memory the "GPU" may address: cuMemHostAlloc blocks and cuMemHostRegister ranges, so
// that cuMemHostGetDevicePointer fails, as the driver does, on memory that is neither.
struct MappedHost {
  std::mutex mu;
  std::map<uintptr_t, size_t> allocs;      // base -> bytes
  std::map<uintptr_t, size_t> registered;  // base -> bytes
  bool overlapsRegistered(uintptr_t p, size_t bytes) {
    auto it = registered.lower_bound(p + bytes);
    if (it == registered.begin()) return false;
    --it;
    return it->first + it->second > p;
  }
};
MappedHost& mappedHost() {
  static MappedHost* m = new MappedHost;  // frees may come after the scope
  return *m;
}

int deviceOf(CuContext ctx) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(ctx) - kContextBase);
}

// CUstreamCaptureStatus of `s`, and its capture's id (0 if none).
int captureStatus(Stream* s, uint64_t* id) {
  std::lock_guard<std::mutex> lock(gCaptureMu);
  if (id != nullptr) *id = s->capture != nullptr ? s->capture->id : 0;
  if (s->capture == nullptr) return kCuStreamCaptureStatusNone;
  return s->capture->invalidated ? kCuStreamCaptureStatusInvalidated : kCuStreamCaptureStatusActive;
}

// Whether the event was last recorded inside a capture: ordinary calls on it fail.
bool capturedEvent(Event* ev) {
  std::lock_guard<std::mutex> lock(ev->mu);
  if (ev->capturedIn == nullptr) return false;
  ++gState->captureErrors;
  return true;
}

// A cuMemAlloc block: a memfd mapped shared (so other processes can open it by IPC).
CuResult allocateBlock(CuDevicePtr* p, size_t bytes) {
  const size_t mapped = wholePages(bytes);
  const int fd = memfd_create("fake-cuda-device", MFD_CLOEXEC);
  if (fd < 0) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  void* mem = ftruncate(fd, static_cast<off_t>(mapped)) == 0
                  ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
  if (mem == MAP_FAILED) {
    close(fd);
    return 2;
  }
  const auto base = reinterpret_cast<uintptr_t>(mem);
  std::lock_guard<std::mutex> lock(gState->mu);
  gState->deviceAllocs[base] = bytes;
  gState->blocks[base] = DeviceBlock{fd, mapped, tCurrent != nullptr ? deviceOf(tCurrent) : -1};
  *p = reinterpret_cast<CuDevicePtr>(mem);
  return kCuSuccess;
}

CuResult freeBlock(CuDevicePtr p) {
  std::lock_guard<std::mutex> lock(gState->mu);
  auto it = gState->blocks.find(static_cast<uintptr_t>(p));
  if (it == gState->blocks.end()) return 1;
  munmap(reinterpret_cast<void*>(p), it->second.mapped);
  close(it->second.fd);
  gState->blocks.erase(it);
  gState->deviceAllocs.erase(static_cast<uintptr_t>(p));
  return kCuSuccess;
}

// A kernel: every block on a thread of its own, as blocks of a launch run side by side.
void runKernel(uint32_t blocks, int device, const std::function<void(uint32_t)>& block) {
  if (device >= 0) {
    std::lock_guard<std::mutex> lock(gState->runMu);
    ++gState->running[device];
  }
  std::vector<std::thread> threads;
  for (uint32_t b = 0; b < blocks; ++b) threads.emplace_back([&block, b] { block(b); });
  for (auto& t : threads) t.join();
  ++gState->kernelsRun;
  if (device >= 0) {
    std::lock_guard<std::mutex> lock(gState->runMu);
    --gState->running[device];
  }
  gState->runCv.notify_all();
}

// The conservative reading of the driver's documentation: allocation, synchronous copies and
// stream synchronization may wait until no kernel runs on the device. A kernel that waits for a
// peer's kernel which this very call holds back would make that wait last for ever; here it
// ends after idleLimitMs with kFakeStall and a line on stderr, so that a test fails in bounded
// time instead of hanging.
CuResult waitDeviceIdle(const char* call) {
  if (tCurrent == nullptr) return kCuSuccess;
  const int dev = deviceOf(tCurrent);
  std::unique_lock<std::mutex> lock(gState->runMu);
  const auto limit = std::chrono::milliseconds(gState->idleLimitMs.load());
  if (gState->runCv.wait_for(lock, limit, [dev] { return gState->running[dev] == 0; }))
    return kCuSuccess;
  ++gState->stalls;
  std::fprintf(stderr,
               "fake_cuda: %s waited %lld ms for a kernel running on device %d to end: the "
               "driver may wait for ever here (a kernel waiting for this thread's work)\n",
               call, static_cast<long long>(limit.count()), dev);
  return kFakeStall;
}

// Stream capture in the default (global) mode forbids calls that may synchronize while any
// capture is active: such a call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidates the captures.
CuResult captureForbids(const char* call) {
  if (tCaptureMode == kCuStreamCaptureModeRelaxed) return kCuSuccess;  // allowed on this thread
  std::lock_guard<std::mutex> lock(gCaptureMu);
  if (gState->captures.empty()) return kCuSuccess;
  for (auto& c : gState->captures) c->invalidated = true;
  ++gState->captureErrors;
  std::fprintf(stderr, "fake_cuda: %s during a stream capture: invalidated\n", call);
  return kCuErrorStreamCaptureUnsupported;
}

// Both checks of a call that allocates or waits for the device.
CuResult strictCall(const char* call) {
  const CuResult r = captureForbids(call);
  return r != kCuSuccess ? r : waitDeviceIdle(call);
}

CudaDriver makeTable() {
  CudaDriver d;
  d.cuInit = [](unsigned) { return kCuSuccess; };
  d.cuGetErrorName = [](CuResult, const char** name) {
    *name = "CUDA_ERROR_EMULATED";
    return kCuSuccess;
  };
  d.cuDeviceGetCount = [](int* n) {
    *n = kDevices;
    return kCuSuccess;
  };
  d.cuDevicePrimaryCtxRetain = [](CuContext* ctx, CuDevice dev) -> CuResult {
    if (dev < 0 || dev >= kDevices) return 101;  // CUDA_ERROR_INVALID_DEVICE
    *ctx = reinterpret_cast<CuContext>(kContextBase + dev);
    return kCuSuccess;
  };
  d.cuCtxGetCurrent = [](CuContext* ctx) {
    *ctx = tCurrent;
    return kCuSuccess;
  };
  d.cuCtxSetCurrent = [](CuContext ctx) {
    tCurrent = ctx;
    return kCuSuccess;
  };
  d.cuCtxGetDevice = [](CuDevice* dev) -> CuResult {
    if (tCurrent == nullptr) return 201;  // CUDA_ERROR_INVALID_CONTEXT
    *dev = static_cast<CuDevice>(reinterpret_cast<uintptr_t>(tCurrent) - kContextBase);
    return kCuSuccess;
  };
  d.cuPointerGetAttribute = [](void* data, int attribute, CuDevicePtr ptr) -> CuResult {
    if (attribute != kCuPointerAttributeMemoryType) return 1;
    *static_cast<unsigned*>(data) =
        gState->isDevice(static_cast<uintptr_t>(ptr)) ? kCuMemoryTypeDevice : kCuMemoryTypeHost;
    return kCuSuccess;
  };
  d.cuModuleLoadData = [](CuModule* m, const void*) {
    *m = kModule;
    return kCuSuccess;
  };
  d.cuModuleGetFunction = [](CuFunction* fn, CuModule, const char* name) -> CuResult {
    if (std::strcmp(name, "ringccRmaKernel") == 0) {
      *fn = kRmaKernel;
      return kCuSuccess;
    }
    if (std::strcmp(name, "ringccAdasumKernel") == 0) {
      *fn = kAdasumKernel;
      return kCuSuccess;
    }
    if (std::strcmp(name, "ringccBatchKernel") != 0) return 500;  // CUDA_ERROR_NOT_FOUND
    *fn = kKernel;
    return kCuSuccess;
  };
  // The kernel module's (src/cuda/kernel_module.cc): each scope's contexts are new ones, with
  // ids never seen before in the process, as after a cudaDeviceReset, at the same addresses.
  d.cuDriverGetVersion = [](int* v) {
    *v = 13000;
    return kCuSuccess;
  };
  d.cuCtxGetId = [](CuContext ctx, unsigned long long* id) -> CuResult {
    if (ctx == nullptr) return 201;  // CUDA_ERROR_INVALID_CONTEXT
    *id = gState->generation * kDevices + static_cast<unsigned long long>(deviceOf(ctx));
    return kCuSuccess;
  };
  d.cuFuncLoad = [](CuFunction fn) -> CuResult {
    if (fn != kKernel && fn != kAdasumKernel && fn != kRmaKernel)
      return 400;  // CUDA_ERROR_INVALID_HANDLE
    ++gState->functionLoads;
    return kCuSuccess;
  };
  d.cuFuncGetAttribute = [](int* value, int attribute, CuFunction fn) -> CuResult {
    if ((fn != kKernel && fn != kAdasumKernel && fn != kRmaKernel) ||
        attribute != kCuFuncAttributeMaxThreadsPerBlock)
      return 1;
    *value = 1024;
    return kCuSuccess;
  };
  d.cuLaunchKernel = [](CuFunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, CuStream stream, void** params,
                        void**) -> CuResult {
    const int device = tCurrent != nullptr ? deviceOf(tCurrent) : -1;
    if (fn == kRmaKernel) {
      // One-sided signals and waits: one block, its thread 0 working (a wait blocks the stream
      // until its signals came, as on a GPU).
      if (gx != 1 || gy != 1 || gz != 1 || bx != kRmaThreads || by != 1 || bz != 1) return 1;
      auto args = std::make_shared<RmaArgs>(*static_cast<const RmaArgs*>(params[0]));
      ++gState->kernelsQueued;
      gState->stream(stream)->push([args, device] {
        runKernel(1, device, [&args](uint32_t b) {
          HostBlock block{b};
          rmaRunBlock(*args, block);
        });
        ++gState->rmaKernelsRun;
      });
      return kCuSuccess;
    }
    if (fn == kAdasumKernel) {
      // Adasum's local steps: any grid, one host thread a block.
      if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx != kLaunchThreads || gx == 0 ||
          gx > kAdasumMaxBlocks)
        return 1;
      auto args = std::make_shared<AdasumArgs>(*static_cast<const AdasumArgs*>(params[0]));
      ++gState->kernelsQueued;
      gState->stream(stream)->push([args, gx, device] {
        runKernel(gx, device, [&args, gx](uint32_t b) {
          AdasumSoloBlock block{b, gx};
          adasumRunBlock(*args, block);
        });
        ++gState->adasumKernelsRun;
      });
      return kCuSuccess;
    }
    if (fn != kKernel || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx != kLaunchThreads ||
        gx == 0 || gx > kLaunchMaxBlocks)
      return 1;  // CUDA_ERROR_INVALID_VALUE
    // Parameters are copied at launch, as the driver does.
    auto args = std::make_shared<BatchArgs>(*static_cast<const BatchArgs*>(params[0]));
    ++gState->kernelsQueued;
    gState->stream(stream)->push([args, gx, device] {
      runKernel(gx, device, [&args](uint32_t b) {
        HostBlock block{b};
        runBatchBlock(*args, block);
      });
    });
    return kCuSuccess;
  };
  d.cuMemAlloc = [](CuDevicePtr* p, size_t bytes) -> CuResult {
    if (const CuResult r = strictCall("cuMemAlloc"); r != kCuSuccess) return r;
    return allocateBlock(p, bytes);
  };
  d.cuMemFree = [](CuDevicePtr p) -> CuResult { return freeBlock(p); };
  // Stream-ordered: the block exists at once (no wait for running kernels, as the pool
  // promises) and is freed when the stream reaches the free. Inside a capture the driver would
  // add memory nodes to the graph, which this emulation does not model: refused.
  d.cuMemAllocAsync = [](CuDevicePtr* p, size_t bytes, CuStream s) -> CuResult {
    if (captureStatus(gState->stream(s), nullptr) != kCuStreamCaptureStatusNone)
      return 801;  // CUDA_ERROR_NOT_SUPPORTED
    return allocateBlock(p, bytes);
  };
  d.cuMemFreeAsync = [](CuDevicePtr p, CuStream s) -> CuResult {
    if (captureStatus(gState->stream(s), nullptr) != kCuStreamCaptureStatusNone) return 801;
    {
      std::lock_guard<std::mutex> lock(gState->mu);
      if (gState->blocks.count(static_cast<uintptr_t>(p)) == 0) return 1;
    }
    gState->stream(s)->push([p] { freeBlock(p); });
    return kCuSuccess;
  };
  d.cuIpcGetMemHandle = [](CuIpcMemHandle* handle, CuDevicePtr p) -> CuResult {
    std::lock_guard<std::mutex> lock(gState->mu);
    auto it = gState->blocks.find(static_cast<uintptr_t>(p));
    if (it == gState->blocks.end()) return 1;  // CUDA_ERROR_INVALID_VALUE: not a block's base
    const FakeIpcHandle h{kIpcMagic, static_cast<int32_t>(getpid()), it->second.fd,
                          it->second.mapped, it->second.device};
    *handle = CuIpcMemHandle{};
    std::memcpy(handle->reserved, &h, sizeof h);
    return kCuSuccess;
  };
  d.cuIpcOpenMemHandle = [](CuDevicePtr* p, CuIpcMemHandle handle, unsigned flags) -> CuResult {
    FakeIpcHandle h;
    std::memcpy(&h, handle.reserved, sizeof h);
    if (h.magic != kIpcMagic) return 400;                  // CUDA_ERROR_INVALID_HANDLE
    if (tCurrent == nullptr) return 201;                   // CUDA_ERROR_INVALID_CONTEXT
    if (h.pid == getpid()) return 201;                     // the driver refuses its own handles
    if (flags != kCuIpcMemLazyEnablePeerAccess) return 1;  // CUDA_ERROR_INVALID_VALUE
    if (gNoPeerAccess && h.device != deviceOf(tCurrent)) return kCuErrorPeerAccessUnsupported;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", h.pid, h.fd);
    const int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 400;  // the exporter is gone or freed it
    void* mem = mmap(nullptr, h.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    // The mapping keeps the memory.
    close(fd);
    if (mem == MAP_FAILED) return 205;  // CUDA_ERROR_MAP_FAILED
    std::lock_guard<std::mutex> lock(gState->mu);
    gState->imports[reinterpret_cast<uintptr_t>(mem)] = h.mapped;
    ++gState->ipcOpens;
    *p = reinterpret_cast<CuDevicePtr>(mem);
    return kCuSuccess;
  };
  d.cuIpcCloseMemHandle = [](CuDevicePtr p) -> CuResult {
    std::lock_guard<std::mutex> lock(gState->mu);
    auto it = gState->imports.find(static_cast<uintptr_t>(p));
    if (it == gState->imports.end()) return 1;
    munmap(reinterpret_cast<void*>(p), it->second);
    gState->imports.erase(it);
    return kCuSuccess;
  };
  d.cuMemGetAddressRange = [](CuDevicePtr* base, size_t* bytes, CuDevicePtr p) -> CuResult {
    std::lock_guard<std::mutex> lock(gState->mu);
    for (const auto* ranges : {&gState->deviceAllocs, &gState->imports}) {
      auto it = ranges->upper_bound(static_cast<uintptr_t>(p));
      if (it == ranges->begin()) continue;
      --it;
      if (static_cast<uintptr_t>(p) >= it->first + it->second) continue;
      if (base != nullptr) *base = it->first;
      if (bytes != nullptr) *bytes = it->second;
      return kCuSuccess;
    }
    return 1;  // CUDA_ERROR_INVALID_VALUE: not device memory
  };
  d.cuDeviceGetAttribute = [](int* value, int attribute, CuDevice dev) -> CuResult {
    if (dev < 0 || dev >= kDevices) return 101;  // CUDA_ERROR_INVALID_DEVICE
    if (attribute == kCuDeviceAttributePciBusId)
      *value = 0x18 + 0x10 * dev;  // 0000:18:00.0, 0000:28:00.0, ...
    else if (attribute == kCuDeviceAttributePciDeviceId ||
             attribute == kCuDeviceAttributePciDomainId)
      *value = 0;
    else
      return 1;  // CUDA_ERROR_INVALID_VALUE: an attribute ringcc does not ask for
    return kCuSuccess;
  };
  d.cuMemcpyHtoD = [](CuDevicePtr dst, const void* src, size_t bytes) {
    if (const CuResult r = strictCall("cuMemcpyHtoD"); r != kCuSuccess) return r;
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return kCuSuccess;
  };
  d.cuMemcpyDtoH = [](void* dst, CuDevicePtr src, size_t bytes) {
    if (const CuResult r = strictCall("cuMemcpyDtoH"); r != kCuSuccess) return r;
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return kCuSuccess;
  };
  d.cuMemsetD8 = [](CuDevicePtr dst, unsigned char v, size_t bytes) {
    if (const CuResult r = strictCall("cuMemsetD8"); r != kCuSuccess) return r;
    std::memset(reinterpret_cast<void*>(dst), v, bytes);
    return kCuSuccess;
  };
  d.cuMemHostAlloc = [](void** p, size_t bytes, unsigned) -> CuResult {
    if (const CuResult r = strictCall("cuMemHostAlloc"); r != kCuSuccess) return r;
    *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (*p == nullptr) return 2;
    ++gLiveHostAllocs;
    std::lock_guard<std::mutex> lock(mappedHost().mu);
    mappedHost().allocs[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return kCuSuccess;
  };
  d.cuMemHostGetDevicePointer = [](CuDevicePtr* dptr, void* host, unsigned) -> CuResult {
    MappedHost& m = mappedHost();
    std::lock_guard<std::mutex> lock(m.mu);
    const auto p = reinterpret_cast<uintptr_t>(host);
    if (!insideRange(m.allocs, p) && !insideRange(m.registered, p))
      return 1;  // CUDA_ERROR_INVALID_VALUE: not memory the driver maps
    *dptr = reinterpret_cast<CuDevicePtr>(host);
    return kCuSuccess;
  };
  d.cuMemFreeHost = [](void* p) {
    {
      std::lock_guard<std::mutex> lock(mappedHost().mu);
      mappedHost().allocs.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
    --gLiveHostAllocs;
    return kCuSuccess;
  };
  d.cuMemHostRegister = [](void* host, size_t bytes, unsigned flags) -> CuResult {
    if (host == nullptr || bytes == 0 || (flags & kCuMemHostRegisterDeviceMap) == 0)
      return 1;  // CUDA_ERROR_INVALID_VALUE (ringcc always asks for a device mapping)
    MappedHost& m = mappedHost();
    std::lock_guard<std::mutex> lock(m.mu);
    const auto p = reinterpret_cast<uintptr_t>(host);
    if (m.overlapsRegistered(p, bytes)) return 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    m.registered[p] = bytes;
    return kCuSuccess;
  };
  d.cuMemHostUnregister = [](void* host) -> CuResult {
    MappedHost& m = mappedHost();
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.registered.erase(reinterpret_cast<uintptr_t>(host)) == 0)
      return 713;  // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
    return kCuSuccess;
  };
  d.cuStreamQuery = [](CuStream s) {
    return gState->stream(s)->idle() ? kCuSuccess : kCuErrorNotReady;
  };
  d.cuStreamSynchronize = [](CuStream s) {
    if (const CuResult r = captureForbids("cuStreamSynchronize"); r != kCuSuccess) return r;
    gState->stream(s)->synchronize();
    return waitDeviceIdle("cuStreamSynchronize");
  };
  d.cuStreamIsCapturing = [](CuStream s, int* status) {
    *status = captureStatus(gState->stream(s), nullptr);
    return kCuSuccess;
  };
  d.cuStreamGetCaptureInfo = [](CuStream s, int* status, uint64_t* id, void** graph,
                                const void** deps, size_t* n) -> CuResult {
    if (graph != nullptr || deps != nullptr || n != nullptr) return 1;  // not emulated
    *status = captureStatus(gState->stream(s), id);
    return kCuSuccess;
  };
  d.cuStreamCreate = [](CuStream* s, unsigned) {
    *s = gState->add(std::make_unique<Stream>());
    return kCuSuccess;
  };
  d.cuStreamDestroy = [](CuStream s) {
    gState->stream(s)->synchronize();  // destroyed with the scope; its work finishes first
    return kCuSuccess;
  };
  d.cuMemcpyHtoDAsync = [](CuDevicePtr dst, const void* src, size_t bytes, CuStream s) {
    // From pageable memory the driver copies out of the source before it returns.
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                    static_cast<const char*>(src) + bytes);
    gState->stream(s)->push(
        [dst, copy] { std::memcpy(reinterpret_cast<void*>(dst), copy->data(), copy->size()); });
    return kCuSuccess;
  };
  d.cuMemcpyDtoDAsync = [](CuDevicePtr dst, CuDevicePtr src, size_t bytes, CuStream s) {
    gState->stream(s)->push([=] {
      std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    });
    return kCuSuccess;
  };
  d.cuLaunchHostFunc = [](CuStream s, void (*fn)(void*), void* user) -> CuResult {
    if (fn == nullptr) return 1;  // CUDA_ERROR_INVALID_VALUE
    gState->stream(s)->push([fn, user] { fn(user); });
    return kCuSuccess;
  };
  d.cuMemsetD8Async = [](CuDevicePtr dst, unsigned char v, size_t bytes, CuStream s) {
    gState->stream(s)->push([=] { std::memset(reinterpret_cast<void*>(dst), v, bytes); });
    return kCuSuccess;
  };
  d.cuEventCreate = [](CuEvent* e, unsigned) {
    *e = reinterpret_cast<CuEvent>(new Event);
    return kCuSuccess;
  };
  d.cuEventRecord = [](CuEvent e, CuStream s) {
    Event* ev = reinterpret_cast<Event*>(e);
    Stream* stream = gState->stream(s);
    {
      // Inside a capture the record is a node of the graph: ordinary calls may no longer
      // use the event (CUDA_ERROR_CAPTURED_EVENT) until it is recorded outside one again.
      std::lock_guard<std::mutex> lock(gCaptureMu);
      std::lock_guard<std::mutex> elock(ev->mu);
      ev->capturedIn = stream->capture;
      if (stream->capture != nullptr) return kCuSuccess;
    }
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      n = ++ev->recorded;
    }
    gState->stream(s)->push([ev, n] {
      std::lock_guard<std::mutex> lock(ev->mu);
      ev->completed = std::max(ev->completed, n);
      ev->cv.notify_all();
    });
    return kCuSuccess;
  };
  d.cuEventSynchronize = [](CuEvent e) {
    Event* ev = reinterpret_cast<Event*>(e);
    if (capturedEvent(ev)) return kCuErrorCapturedEvent;
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      n = ev->recorded;
    }
    ev->waitFor(n);
    return kCuSuccess;
  };
  d.cuEventQuery = [](CuEvent e) {
    Event* ev = reinterpret_cast<Event*>(e);
    if (capturedEvent(ev)) return kCuErrorCapturedEvent;
    if (const CuResult r = captureForbids("cuEventQuery"); r != kCuSuccess) return r;
    std::lock_guard<std::mutex> lock(ev->mu);
    return ev->completed >= ev->recorded ? kCuSuccess : kCuErrorNotReady;
  };
  d.cuThreadExchangeStreamCaptureMode = [](int* mode) -> CuResult {
    if (*mode < 0 || *mode > kCuStreamCaptureModeRelaxed) return 1;  // CUDA_ERROR_INVALID_VALUE
    std::swap(*mode, tCaptureMode);
    return kCuSuccess;
  };
  d.cuEventDestroy = [](CuEvent e) {
    delete reinterpret_cast<Event*>(e);
    return kCuSuccess;
  };
  d.cuStreamWaitEvent = [](CuStream s, CuEvent e, unsigned) {
    Event* ev = reinterpret_cast<Event*>(e);
    Stream* stream = gState->stream(s);
    {
      std::lock_guard<std::mutex> lock(gCaptureMu);
      std::lock_guard<std::mutex> elock(ev->mu);
      const std::shared_ptr<Capture>& mine = stream->capture;
      const std::shared_ptr<Capture>& its = ev->capturedIn;
      if (mine != nullptr) {
        if (its == mine) return kCuSuccess;  // an edge inside the graph: call order keeps it
        if (its == nullptr && ev->recorded == 0) return kCuSuccess;  // never recorded: no work
        // Work from outside the capture (or another one's): a dependency across its boundary.
        mine->invalidated = true;
        ++gState->captureErrors;
        return kCuErrorStreamCaptureIsolation;
      }
      if (its != nullptr) {
        if (its->ended) {
          ++gState->captureErrors;
          return kCuErrorCapturedEvent;
        }
        stream->capture = its;  // an ordinary stream waiting on a capture's event joins it
        return kCuSuccess;
      }
    }
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      n = ev->recorded;
    }
    gState->stream(s)->push([ev, n] { ev->waitFor(n); });
    return kCuSuccess;
  };
  d.cuCtxEnablePeerAccess = [](CuContext peer, unsigned) -> CuResult {
    ++gState->peerAccessCalls;
    return gNoPeerAccess && deviceOf(peer) != deviceOf(tCurrent) ? kCuErrorPeerAccessUnsupported
                                                                 : kCuSuccess;
  };
  d.cuDeviceCanAccessPeer = [](int* can, CuDevice dev, CuDevice peer) -> CuResult {
    if (dev < 0 || dev >= kDevices || peer < 0 || peer >= kDevices) return 101;
    *can = !gNoPeerAccess || dev == peer;
    return kCuSuccess;
  };
  return d;
}

}  // namespace

FakeCudaScope::FakeCudaScope() {
  // Every device block holds a memfd open (for cuIpcOpenMemHandle): allow as many as we may.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  static std::atomic<unsigned long long> scopes{0};
  gState = new State;
  gState->generation = ++scopes;
  gState->table = makeTable();
  gState->legacy = reinterpret_cast<Stream*>(gState->add(std::make_unique<Stream>()));
  installFakeCudaDriver(&gState->table);
}

FakeCudaScope::~FakeCudaScope() {
  synchronizeAll();
  installFakeCudaDriver(nullptr);
  gState->streams.clear();
  delete gState;
  gState = nullptr;
  tCurrent = nullptr;
  gNoPeerAccess = false;
}

const CudaDriver& FakeCudaScope::driver() const { return gState->table; }

CuStream FakeCudaScope::newStream() { return gState->add(std::make_unique<Stream>()); }

void FakeCudaScope::beginCapture(CuStream s) {
  auto c = std::make_shared<Capture>();
  std::lock_guard<std::mutex> lock(gCaptureMu);
  c->id = ++gState->nextCaptureId;
  gState->stream(s)->capture = c;
  gState->captures.push_back(c);
}

CuResult FakeCudaScope::endCapture(CuStream s, FakeGraph* graph) {
  std::shared_ptr<Capture> c;
  {
    std::lock_guard<std::mutex> lock(gCaptureMu);
    c = gState->stream(s)->capture;
    if (c == nullptr) return kFakeIllegalState;
    c->ended = true;
    std::lock_guard<std::mutex> slock(gState->mu);
    for (auto& st : gState->streams)
      if (st->capture == c) st->capture = nullptr;
    std::erase(gState->captures, c);
  }
  if (c->invalidated) return kCuErrorStreamCaptureInvalidated;
  *graph = std::make_shared<const std::vector<std::function<void()>>>(std::move(c->tasks));
  return kCuSuccess;
}

void FakeCudaScope::launchGraph(const FakeGraph& graph, CuStream s) {
  gState->stream(s)->push([graph] {
    for (const auto& task : *graph) task();
  });
}

void FakeCudaScope::setIdleWaitLimit(int ms) { gState->idleLimitMs = ms; }

size_t FakeCudaScope::stalls() const { return gState->stalls.load(); }

size_t FakeCudaScope::captureErrors() const { return gState->captureErrors.load(); }

void FakeCudaScope::synchronizeAll() {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(gState->mu);
    for (auto& s : gState->streams) streams.push_back(s.get());
  }
  for (Stream* s : streams) s->synchronize();
}

size_t FakeCudaScope::kernelsRun() const { return gState->kernelsRun.load(); }
size_t FakeCudaScope::adasumKernelsRun() const { return gState->adasumKernelsRun.load(); }
size_t FakeCudaScope::rmaKernelsRun() const { return gState->rmaKernelsRun.load(); }

size_t FakeCudaScope::kernelsQueued() const { return gState->kernelsQueued.load(); }
size_t FakeCudaScope::functionLoads() const { return gState->functionLoads.load(); }

void FakeCudaScope::disablePeerAccess() { gNoPeerAccess = true; }

size_t FakeCudaScope::peerAccessCalls() const { return gState->peerAccessCalls.load(); }

size_t FakeCudaScope::liveHostAllocs() const { return gLiveHostAllocs.load(); }

size_t FakeCudaScope::liveHostRegistrations() const {
  std::lock_guard<std::mutex> lock(mappedHost().mu);
  return mappedHost().registered.size();
}

size_t FakeCudaScope::ipcOpens() const { return gState->ipcOpens.load(); }

size_t FakeCudaScope::liveIpcImports() const {
  std::lock_guard<std::mutex> lock(gState->mu);
  return gState->imports.size();
}

size_t FakeCudaScope::liveDeviceAllocs() const {
  std::lock_guard<std::mutex> lock(gState->mu);
  return gState->deviceAllocs.size();
}

}  // namespace ringcc::test
