#include "bench/perf/perf_cuda.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <type_traits>

namespace ringcc::bench {
namespace {

struct Loaded {
  std::once_flag once;
  CudaDriver table;
  bool ok = false;
  std::string why;
};

void load(Loaded* l) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    l->why = "no CUDA driver (libcuda.so.1 does not load)";
    return;
  }
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  CudaDriver& t = l->table;
  get(t.cuInit, "cuInit");
  get(t.cuGetErrorName, "cuGetErrorName");
  get(t.cuDeviceGetCount, "cuDeviceGetCount");
  get(t.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(t.cuCtxSetCurrent, "cuCtxSetCurrent");
  get(t.cuMemAlloc, "cuMemAlloc_v2");
  get(t.cuMemFree, "cuMemFree_v2");
  get(t.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  get(t.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  get(t.cuStreamCreate, "cuStreamCreate");
  get(t.cuStreamSynchronize, "cuStreamSynchronize");
  get(t.cuStreamDestroy, "cuStreamDestroy_v2");
  if (!missing.empty()) {
    l->why = "the CUDA driver lacks " + missing;
    return;
  }
  int count = 0;
  if (t.cuInit(0) != kCuSuccess || t.cuDeviceGetCount(&count) != kCuSuccess || count < 1) {
    l->why = "the CUDA driver reports no usable GPU";
    return;
  }
  l->ok = true;
}

}  // namespace

const CudaDriver* loadPerfCuda(std::string* why) {
  static Loaded l;
  std::call_once(l.once, [] { load(&l); });
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.table : nullptr;
}

bool PerfDevices::check(CuResult r, const char* call) const {
  if (r == kCuSuccess) return true;
  const char* name = nullptr;
  if (cu_->cuGetErrorName == nullptr || cu_->cuGetErrorName(r, &name) != kCuSuccess) name = "?";
  char text[160];
  std::snprintf(text, sizeof text, "%s failed: %s (%d)", call, name ? name : "?", r);
  lastError_ = text;
  return false;
}

bool PerfDevices::open(const CudaDriver* cu, int first, int nLocal, std::string* err) {
  cu_ = cu;
  int count = 0;
  if (!check(cu->cuDeviceGetCount(&count), "cuDeviceGetCount") || count < 1) {
    *err = count < 1 ? "no GPU" : lastError_;
    cu_ = nullptr;
    return false;
  }
  ranks_.assign(static_cast<size_t>(nLocal), RankDevice{});
  for (int k = 0; k < nLocal; ++k) {
    RankDevice& r = ranks_[static_cast<size_t>(k)];
    r.dev = (first + k) % count;
    if (!check(cu->cuDevicePrimaryCtxRetain(&r.ctx, r.dev), "cuDevicePrimaryCtxRetain")) {
      *err = lastError_;
      cu_ = nullptr;
      return false;
    }
  }
  return true;
}

bool PerfDevices::use(int k) const {
  return check(cu_->cuCtxSetCurrent(rank(k).ctx), "cuCtxSetCurrent");
}

bool PerfDevices::allocate(size_t bytes, std::string* err) {
  const size_t n = std::max<size_t>(bytes, 1);
  for (int k = 0; k < size(); ++k) {
    RankDevice& r = ranks_[static_cast<size_t>(k)];
    // Non-blocking, as nccl-tests' streams: never ordered behind the legacy default stream.
    const bool ok = use(k) &&
                    check(cu_->cuStreamCreate(&r.stream, kCuStreamNonBlocking), "cuStreamCreate") &&
                    check(cu_->cuMemAlloc(&r.send, n), "cuMemAlloc") &&
                    check(cu_->cuMemAlloc(&r.recv, n), "cuMemAlloc");
    if (!ok) {
      *err = lastError_;
      return false;
    }
  }
  return true;
}

void PerfDevices::release() {
  if (!active()) return;
  for (int k = 0; k < size(); ++k) {
    RankDevice& r = ranks_[static_cast<size_t>(k)];
    if (!use(k)) continue;
    if (r.send) cu_->cuMemFree(r.send);
    if (r.recv) cu_->cuMemFree(r.recv);
    if (r.stream) cu_->cuStreamDestroy(r.stream);
    r.send = r.recv = 0;
    r.stream = nullptr;
  }
}

bool PerfDevices::upload(int k, bool recvBuffer, const void* host, size_t bytes) const {
  if (bytes == 0) return true;
  const RankDevice& r = rank(k);
  return use(k) &&
         check(cu_->cuMemcpyHtoD(recvBuffer ? r.recv : r.send, host, bytes), "cuMemcpyHtoD");
}

bool PerfDevices::download(int k, void* host, size_t bytes) const {
  if (bytes == 0) return true;
  return use(k) && check(cu_->cuMemcpyDtoH(host, rank(k).recv, bytes), "cuMemcpyDtoH");
}

bool PerfDevices::sync(int k) const {
  return use(k) && check(cu_->cuStreamSynchronize(rank(k).stream), "cuStreamSynchronize");
}

}  // namespace ringcc::bench
