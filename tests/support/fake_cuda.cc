#include "support/fake_cuda.h"

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
#include <vector>

#include "kernels/cuda/batch_block.h"
#include "src/exec/host_sync.h"

namespace ringcc::test {
namespace {

constexpr int kDevices = 4;
constexpr uintptr_t kContextBase = 0x1000;
CuFunction const kKernel = reinterpret_cast<CuFunction>(0xf00);
CuModule const kModule = reinterpret_cast<CuModule>(0xe00);

// One stream: a thread running its tasks in order.
class Stream {
 public:
  explicit Stream(bool capturing = false) : capturing_(capturing) {
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
  bool capturing() const { return capturing_; }

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

  const bool capturing_;
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
  uint64_t recorded = 0;   // records queued
  uint64_t completed = 0;  // records that ran
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
  std::atomic<size_t> peerAccessCalls{0};
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

// The kernel: every block on a thread of its own, as blocks of a launch run side by side.
void runKernel(const BatchArgs& args, uint32_t blocks) {
  std::vector<std::thread> threads;
  for (uint32_t b = 0; b < blocks; ++b)
    threads.emplace_back([&args, b] {
      HostBlock block{b};
      runBatchBlock(args, block);
    });
  for (auto& t : threads) t.join();
  ++gState->kernelsRun;
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
    if (fn != kKernel) return 400;  // CUDA_ERROR_INVALID_HANDLE
    ++gState->functionLoads;
    return kCuSuccess;
  };
  d.cuFuncGetAttribute = [](int* value, int attribute, CuFunction fn) -> CuResult {
    if (fn != kKernel || attribute != kCuFuncAttributeMaxThreadsPerBlock) return 1;
    *value = 1024;
    return kCuSuccess;
  };
  d.cuLaunchKernel = [](CuFunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, CuStream stream, void** params,
                        void**) -> CuResult {
    if (fn != kKernel || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx != kLaunchThreads ||
        gx == 0 || gx > kLaunchMaxBlocks)
      return 1;  // CUDA_ERROR_INVALID_VALUE
    // Parameters are copied at launch, as the driver does.
    auto args = std::make_shared<BatchArgs>(*static_cast<const BatchArgs*>(params[0]));
    gState->stream(stream)->push([args, gx] { runKernel(*args, gx); });
    return kCuSuccess;
  };
  d.cuMemAlloc = [](CuDevicePtr* p, size_t bytes) -> CuResult {
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
  };
  d.cuMemFree = [](CuDevicePtr p) -> CuResult {
    std::lock_guard<std::mutex> lock(gState->mu);
    auto it = gState->blocks.find(static_cast<uintptr_t>(p));
    if (it == gState->blocks.end()) return 1;
    munmap(reinterpret_cast<void*>(p), it->second.mapped);
    close(it->second.fd);
    gState->blocks.erase(it);
    gState->deviceAllocs.erase(static_cast<uintptr_t>(p));
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
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return kCuSuccess;
  };
  d.cuMemcpyDtoH = [](void* dst, CuDevicePtr src, size_t bytes) {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return kCuSuccess;
  };
  d.cuMemsetD8 = [](CuDevicePtr dst, unsigned char v, size_t bytes) {
    std::memset(reinterpret_cast<void*>(dst), v, bytes);
    return kCuSuccess;
  };
  d.cuMemHostAlloc = [](void** p, size_t bytes, unsigned) -> CuResult {
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
    gState->stream(s)->synchronize();
    return kCuSuccess;
  };
  d.cuStreamIsCapturing = [](CuStream s, int* status) {
    *status = gState->stream(s)->capturing() ? 1 : kCuStreamCaptureStatusNone;
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
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      n = ev->recorded;
    }
    ev->waitFor(n);
    return kCuSuccess;
  };
  d.cuEventDestroy = [](CuEvent e) {
    delete reinterpret_cast<Event*>(e);
    return kCuSuccess;
  };
  d.cuStreamWaitEvent = [](CuStream s, CuEvent e, unsigned) {
    Event* ev = reinterpret_cast<Event*>(e);
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
  setCudaDriverForTesting(&gState->table);
}

FakeCudaScope::~FakeCudaScope() {
  synchronizeAll();
  setCudaDriverForTesting(nullptr);
  gState->streams.clear();
  delete gState;
  gState = nullptr;
  tCurrent = nullptr;
  gNoPeerAccess = false;
}

const CudaDriver& FakeCudaScope::driver() const { return gState->table; }

CuStream FakeCudaScope::newStream() { return gState->add(std::make_unique<Stream>()); }

CuStream FakeCudaScope::captureStream() {
  return gState->add(std::make_unique<Stream>(/*capturing=*/true));
}

void FakeCudaScope::synchronizeAll() {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(gState->mu);
    for (auto& s : gState->streams) streams.push_back(s.get());
  }
  for (Stream* s : streams) s->synchronize();
}

size_t FakeCudaScope::kernelsRun() const { return gState->kernelsRun.load(); }

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
