// GPU check (tests/gpu/run.sh; needs a GPU and the driver): CUDA communicators on device
// buffers. Ranks are made by ncclCommInitAll on one GPU (devlist all 0), each with a stream
// of its own; every collective runs in one group and is checked after the streams drained.
// Then: ncclCommAbort frees a kernel waiting for a peer that never calls.
//
//   gpu_coll collectives [RANKS [COUNT]]
//                          every collective at 1, 2, 4 and 8 ranks (or RANKS), 1,000 and 2^20
//                          floats (or COUNT); tests/gpu/run.sh runs each rank count on its own,
//                          and 1 rank of 1,000 floats under compute-sanitizer
//   gpu_coll abort         abort of a blocked kernel
//   gpu_coll graph         an all-reduce captured into a CUDA graph, replayed three times
//   gpu_coll suspend       ncclCommSuspend(NCCL_SUSPEND_MEM) frees what ncclCommMemStats
//                          counts, and an all-reduce after ncclCommResume is exact
//   gpu_coll adasum        ringccAllReduceAdasum at 2 and 4 ranks, every type, segments and
//                          zero vectors, against its definition (tests/coll/adasum_case.h);
//                          then its time beside ncclAllReduce's on 64 MiB of floats
//   gpu_coll rma           one-sided calls at 2 ranks: each waits for the other's put of 4 MiB
//                          (issued on another stream) and a copy after the wait reads it; then
//                          1,000 signal ping-pongs timed (docs/rma.md, "CUDA communicators")
//   gpu_coll --modes       the modes above, one a line (run.sh runs only what is listed)
// Exit 0 ok; 1 failed (the first difference or error printed); 2 bad arguments.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "ringcc.h"
#include "src/base/cuda_driver.h"
#include "tests/coll/adasum_case.h"

using namespace ringcc;
using ringcc::test::AdasumCase;

namespace {

const CudaDriver* cu = nullptr;

bool check(bool ok, const std::string& what) {
  if (!ok) fprintf(stderr, "gpu_coll: %s\n", what.c_str());
  return ok;
}

bool cudaOk(CuResult r, const char* what) {
  char name[96];
  return check(r == kCuSuccess, std::string(what) + ": " + cuErrorName(*cu, r, name, sizeof name));
}

// Input element i of rank r: small integers, so float sums are exact in any order.
float input(int r, size_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 7)); }

enum Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter };
const char* kNames[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                        "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};

// Elements of the send and receive buffers, and the expected receive buffer of rank r.
struct Shape {
  size_t send, recv;
};
Shape shapeOf(Coll c, size_t count, int n) {
  switch (c) {
    case AllGather:
    case Gather:
      return {count, count * n};
    case ReduceScatter:
    case Scatter:
      return {count * n, count};
    case AlltoAll:
      return {count * n, count * n};
    default:
      return {count, count};
  }
}
float expected(Coll c, size_t count, int n, int r, size_t i) {
  const int root = n - 1;
  float sum = 0;
  switch (c) {
    case AllReduce:
    case Reduce:
      for (int b = 0; b < n; ++b) sum += input(b, i);
      return sum;
    case ReduceScatter:
      for (int b = 0; b < n; ++b) sum += input(b, r * count + i);
      return sum;
    case Broadcast:
      return input(root, i);
    case AllGather:
    case Gather:
      return input(static_cast<int>(i / count), i % count);
    case AlltoAll:
      return input(static_cast<int>(i / count), r * count + i % count);
    case Scatter:
      return input(root, r * count + i);
  }
  return 0;
}
bool checked(Coll c, int r, int n) { return !((c == Reduce || c == Gather) && r != n - 1); }

ncclResult_t issue(Coll c, const float* s, float* d, size_t count, ncclComm_t comm, cudaStream_t st,
                   int n) {
  const int root = n - 1;
  switch (c) {
    case AllReduce:
      return ncclAllReduce(s, d, count, ncclFloat, ncclSum, comm, st);
    case Broadcast:
      return ncclBroadcast(s, d, count, ncclFloat, root, comm, st);
    case Reduce:
      return ncclReduce(s, d, count, ncclFloat, ncclSum, root, comm, st);
    case AllGather:
      return ncclAllGather(s, d, count, ncclFloat, comm, st);
    case ReduceScatter:
      return ncclReduceScatter(s, d, count, ncclFloat, ncclSum, comm, st);
    case AlltoAll:
      return ncclAlltoAll(s, d, count, ncclFloat, comm, st);
    case Gather:
      return ncclGather(s, d, count, ncclFloat, root, comm, st);
    case Scatter:
      return ncclScatter(s, d, count, ncclFloat, root, comm, st);
  }
  return ncclInternalError;
}

bool collectives(const std::vector<int>& rankCounts, const std::vector<size_t>& counts) {
  for (int n : rankCounts) {
    std::vector<ncclComm_t> comms(n);
    std::vector<int> devs(n, 0);
    if (!check(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess,
               "ncclCommInitAll: " + std::string(ncclGetLastError(nullptr))))
      return false;
    std::vector<CuStream> streams(n);
    for (auto& s : streams)
      if (!cudaOk(cu->cuStreamCreate(&s, kCuStreamNonBlocking), "cuStreamCreate")) return false;
    for (size_t count : counts) {
      for (int c = AllReduce; c <= Scatter; ++c) {
        const Coll coll = static_cast<Coll>(c);
        const Shape sh = shapeOf(coll, count, n);
        std::vector<CuDevicePtr> send(n), recv(n);
        for (int r = 0; r < n; ++r) {
          std::vector<float> in(sh.send);
          for (size_t i = 0; i < sh.send; ++i) in[i] = input(r, i);
          if (!cudaOk(cu->cuMemAlloc(&send[r], sh.send * 4), "cuMemAlloc") ||
              !cudaOk(cu->cuMemAlloc(&recv[r], sh.recv * 4), "cuMemAlloc") ||
              !cudaOk(cu->cuMemcpyHtoD(send[r], in.data(), sh.send * 4), "cuMemcpyHtoD"))
            return false;
        }
        ncclGroupStart();
        for (int r = 0; r < n; ++r)
          if (!check(issue(coll, reinterpret_cast<const float*>(send[r]),
                           reinterpret_cast<float*>(recv[r]), count, comms[r],
                           reinterpret_cast<cudaStream_t>(streams[r]), n) == ncclSuccess,
                     std::string(kNames[c]) + ": " + ncclGetLastError(comms[r])))
            return false;
        if (!check(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd")) return false;
        for (int r = 0; r < n; ++r) {
          if (!cudaOk(cu->cuStreamSynchronize(streams[r]), "the kernels")) return false;
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comms[r], &async);
          if (!check(async == ncclSuccess,
                     std::string(kNames[c]) + ": async error " + ncclGetLastError(comms[r])))
            return false;
          if (!checked(coll, r, n)) continue;
          std::vector<float> out(sh.recv);
          if (!cudaOk(cu->cuMemcpyDtoH(out.data(), recv[r], sh.recv * 4), "cuMemcpyDtoH"))
            return false;
          for (size_t i = 0; i < sh.recv; ++i) {
            const float want = expected(coll, count, n, r, i);
            if (out[i] != want) {
              fprintf(stderr,
                      "gpu_coll: %s of %zu floats at %d ranks: rank %d element %zu is %g, "
                      "expected %g\n",
                      kNames[c], count, n, r, i, out[i], want);
              return false;
            }
          }
        }
        for (int r = 0; r < n; ++r) {
          cu->cuMemFree(send[r]);
          cu->cuMemFree(recv[r]);
        }
      }
      printf("gpu_coll: %d ranks, %zu floats: every collective exact\n", n, count);
    }
    for (ncclComm_t c : comms) ncclCommDestroy(c);
    for (CuStream s : streams) cu->cuStreamDestroy(s);
  }
  return true;
}

bool abortBlocked() {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  if (!check(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll")) return false;
  const size_t n = size_t{1} << 20;
  CuStream s0 = nullptr, s1 = nullptr;
  CuDevicePtr b0 = 0, b1 = 0;
  if (!cudaOk(cu->cuStreamCreate(&s0, kCuStreamNonBlocking), "cuStreamCreate") ||
      !cudaOk(cu->cuStreamCreate(&s1, kCuStreamNonBlocking), "cuStreamCreate") ||
      !cudaOk(cu->cuMemAlloc(&b0, n * 4), "cuMemAlloc") ||
      !cudaOk(cu->cuMemAlloc(&b1, n * 4), "cuMemAlloc"))
    return false;
  float* p0 = reinterpret_cast<float*>(b0);
  float* p1 = reinterpret_cast<float*>(b1);
  // Once on both (connections made), then on rank 0 alone: its kernel waits for rank 1.
  ncclGroupStart();
  ncclAllReduce(p0, p0, n, ncclFloat, ncclSum, comms[0], reinterpret_cast<cudaStream_t>(s0));
  ncclAllReduce(p1, p1, n, ncclFloat, ncclSum, comms[1], reinterpret_cast<cudaStream_t>(s1));
  if (!check(ncclGroupEnd() == ncclSuccess, "warm-up group")) return false;
  if (!cudaOk(cu->cuStreamSynchronize(s0), "warm-up")) return false;
  if (!check(ncclAllReduce(p0, p0, n, ncclFloat, ncclSum, comms[0],
                           reinterpret_cast<cudaStream_t>(s0)) == ncclSuccess,
             "the lone call"))
    return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!check(cu->cuStreamQuery(s0) == kCuErrorNotReady, "the lone kernel finished alone"))
    return false;
  ncclCommAbort(comms[0]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cu->cuStreamQuery(s0) == kCuErrorNotReady) {
    if (!check(std::chrono::steady_clock::now() < deadline, "abort did not free the kernel"))
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ncclCommAbort(comms[1]);
  printf("gpu_coll: ncclCommAbort freed a blocked kernel\n");
  return true;
}

uint64_t memStat(ncclComm_t comm, ncclCommMemStat_t which) {
  uint64_t v = ~uint64_t{0};
  return ncclCommMemStats(comm, which, &v) == ncclSuccess ? v : ~uint64_t{0};
}

bool suspendCycle() {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  if (!check(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll")) return false;
  const size_t n = size_t{1} << 20;
  CuStream s[2] = {};
  CuDevicePtr b[2] = {};
  for (int r = 0; r < 2; ++r)
    if (!cudaOk(cu->cuStreamCreate(&s[r], kCuStreamNonBlocking), "cuStreamCreate") ||
        !cudaOk(cu->cuMemAlloc(&b[r], n * 4), "cuMemAlloc"))
      return false;
  // An in-place all-reduce of both ranks' inputs, checked.
  auto allReduce = [&](const char* when) {
    for (int r = 0; r < 2; ++r) {
      std::vector<float> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = input(r, i);
      if (!cudaOk(cu->cuMemcpyHtoD(b[r], in.data(), n * 4), "cuMemcpyHtoD")) return false;
    }
    ncclGroupStart();
    for (int r = 0; r < 2; ++r)
      ncclAllReduce(reinterpret_cast<float*>(b[r]), reinterpret_cast<float*>(b[r]), n, ncclFloat,
                    ncclSum, comms[r], reinterpret_cast<cudaStream_t>(s[r]));
    if (!check(ncclGroupEnd() == ncclSuccess, std::string("all-reduce ") + when)) return false;
    for (int r = 0; r < 2; ++r) {
      if (!cudaOk(cu->cuStreamSynchronize(s[r]), "the kernels")) return false;
      std::vector<float> out(n);
      if (!cudaOk(cu->cuMemcpyDtoH(out.data(), b[r], n * 4), "cuMemcpyDtoH")) return false;
      for (size_t i = 0; i < n; ++i)
        if (!check(out[i] == input(0, i) + input(1, i),
                   std::string("all-reduce ") + when + ": element " + std::to_string(i)))
          return false;
    }
    return true;
  };
  if (!allReduce("before suspend")) return false;
  const uint64_t held = memStat(comms[0], ncclStatGpuMemSuspend);
  if (!check(held > 0 && held != ~uint64_t{0}, "ncclCommMemStats counts no suspendable memory"))
    return false;
  ncclResult_t rc[2] = {ncclInternalError, ncclInternalError};
  std::thread other([&] { rc[1] = ncclCommSuspend(comms[1], NCCL_SUSPEND_MEM); });
  rc[0] = ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM);
  other.join();
  if (!check(rc[0] == ncclSuccess && rc[1] == ncclSuccess,
             std::string("ncclCommSuspend: ") + ncclGetLastError(comms[0])))
    return false;
  if (!check(memStat(comms[0], ncclStatGpuMemSuspend) == 0, "memory kept after the suspend") ||
      !check(memStat(comms[0], ncclStatGpuMemSuspended) == 1, "not suspended"))
    return false;
  for (ncclComm_t c : comms)
    if (!check(ncclCommResume(c) == ncclSuccess, "ncclCommResume")) return false;
  if (!allReduce("after resume")) return false;
  printf("gpu_coll: suspend released %llu bytes of rank 0's; the all-reduce after resume exact\n",
         static_cast<unsigned long long>(held));
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  for (int r = 0; r < 2; ++r) {
    cu->cuMemFree(b[r]);
    cu->cuStreamDestroy(s[r]);
  }
  return true;
}

// Graph capture through the driver's own entry points (ringcc's table has no graph calls).
struct GraphApi {
  using Graph = void*;
  using Exec = void*;
  CuResult (*begin)(CuStream, int) = nullptr;
  CuResult (*end)(CuStream, Graph*) = nullptr;
  CuResult (*instantiate)(Exec*, Graph, unsigned long long) = nullptr;
  CuResult (*launch)(Exec, CuStream) = nullptr;
  bool load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return false;
    begin = reinterpret_cast<decltype(begin)>(dlsym(lib, "cuStreamBeginCapture_v2"));
    end = reinterpret_cast<decltype(end)>(dlsym(lib, "cuStreamEndCapture"));
    instantiate =
        reinterpret_cast<decltype(instantiate)>(dlsym(lib, "cuGraphInstantiateWithFlags"));
    launch = reinterpret_cast<decltype(launch)>(dlsym(lib, "cuGraphLaunch"));
    return begin && end && instantiate && launch;
  }
};

bool graphReplay() {
  GraphApi g;
  if (!check(g.load(), "the driver's graph entry points")) return false;
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  if (!check(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll")) return false;
  const size_t n = 4096;
  CuStream s[2];
  CuDevicePtr send[2], recv[2];
  for (int r = 0; r < 2; ++r) {
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = input(r, i);
    if (!cudaOk(cu->cuStreamCreate(&s[r], kCuStreamNonBlocking), "cuStreamCreate") ||
        !cudaOk(cu->cuMemAlloc(&send[r], n * 4), "cuMemAlloc") ||
        !cudaOk(cu->cuMemAlloc(&recv[r], n * 4), "cuMemAlloc") ||
        !cudaOk(cu->cuMemcpyHtoD(send[r], in.data(), n * 4), "cuMemcpyHtoD"))
      return false;
  }
  auto group = [&] {
    ncclGroupStart();
    for (int r = 0; r < 2; ++r)
      ncclAllReduce(reinterpret_cast<const float*>(send[r]), reinterpret_cast<float*>(recv[r]), n,
                    ncclFloat, ncclSum, comms[r], reinterpret_cast<cudaStream_t>(s[r]));
    return ncclGroupEnd() == ncclSuccess;
  };
  // Once outside the capture (the first call of a shape uploads its tables), then captured
  // (relaxed mode: the engine threads launch into the captured streams).
  if (!check(group(), "warm-up") || !cudaOk(cu->cuStreamSynchronize(s[0]), "warm-up") ||
      !cudaOk(cu->cuStreamSynchronize(s[1]), "warm-up"))
    return false;
  GraphApi::Graph graphs[2] = {};
  GraphApi::Exec execs[2] = {};
  for (int r = 0; r < 2; ++r)
    if (!cudaOk(g.begin(s[r], 2), "cuStreamBeginCapture")) return false;
  if (!check(group(), std::string("the captured calls: ") + ncclGetLastError(nullptr)))
    return false;
  for (int r = 0; r < 2; ++r)
    if (!cudaOk(g.end(s[r], &graphs[r]), "cuStreamEndCapture") ||
        !cudaOk(g.instantiate(&execs[r], graphs[r], 0), "cuGraphInstantiate"))
      return false;
  for (int replay = 0; replay < 3; ++replay) {
    for (int r = 0; r < 2; ++r)
      if (!cudaOk(cu->cuMemsetD8(recv[r], 0, n * 4), "cuMemsetD8")) return false;
    for (int r = 0; r < 2; ++r)
      if (!cudaOk(g.launch(execs[r], s[r]), "cuGraphLaunch")) return false;
    for (int r = 0; r < 2; ++r) {
      if (!cudaOk(cu->cuStreamSynchronize(s[r]), "the replay")) return false;
      std::vector<float> out(n);
      if (!cudaOk(cu->cuMemcpyDtoH(out.data(), recv[r], n * 4), "cuMemcpyDtoH")) return false;
      for (size_t i = 0; i < n; ++i)
        if (!check(out[i] == input(0, i) + input(1, i),
                   "replay " + std::to_string(replay) + ": rank " + std::to_string(r) +
                       " element " + std::to_string(i) + " is " + std::to_string(out[i])))
          return false;
    }
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  printf("gpu_coll: a captured all-reduce replayed 3 times, exact\n");
  return true;
}


// Adasum on device buffers: each case's inputs copied in, every rank's call in one group,
// each result against the reference; then 64 MiB of floats timed, Adasum beside an all-reduce.
struct DeviceRanks {
  explicit DeviceRanks(int n) : comms(n), streams(n) {
    std::vector<int> devs(n, 0);
    ok = check(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess,
               std::string("ncclCommInitAll: ") + ncclGetLastError(nullptr));
    for (CuStream& s : streams) ok = ok && cudaOk(cu->cuStreamCreate(&s, kCuStreamNonBlocking), "cuStreamCreate");
  }
  ~DeviceRanks() {
    for (ncclComm_t c : comms)
      if (c != nullptr) ncclCommDestroy(c);
    for (CuStream s : streams)
      if (s != nullptr) cu->cuStreamDestroy(s);
  }
  bool sync() {
    for (CuStream s : streams)
      if (!cudaOk(cu->cuStreamSynchronize(s), "the kernels")) return false;
    return true;
  }
  bool ok = false;
  std::vector<ncclComm_t> comms;
  std::vector<CuStream> streams;
};

bool adasumCase(DeviceRanks& ranks, const AdasumCase& c) {
  const int n = static_cast<int>(ranks.comms.size());
  const size_t bytes = c.input[0].size();
  std::vector<CuDevicePtr> send(n), recv(n);
  bool ok = true;
  for (int r = 0; r < n && ok; ++r)
    ok = cudaOk(cu->cuMemAlloc(&send[r], bytes), "cuMemAlloc") &&
         cudaOk(cu->cuMemAlloc(&recv[r], bytes), "cuMemAlloc") &&
         cudaOk(cu->cuMemcpyHtoD(send[r], c.input[r].data(), bytes), "cuMemcpyHtoD");
  if (ok) {
    ncclGroupStart();
    const bool several = c.segs.size() > 1;
    for (int r = 0; r < n; ++r)
      ringccAllReduceAdasum(reinterpret_cast<void*>(send[r]),
                            reinterpret_cast<void*>(c.inPlace ? send[r] : recv[r]), c.count(),
                            c.type, several ? c.segs.data() : nullptr,
                            several ? static_cast<int>(c.segs.size()) : 0, ranks.comms[r],
                            reinterpret_cast<cudaStream_t>(ranks.streams[r]));
    ok = check(ncclGroupEnd() == ncclSuccess,
               c.describe() + ": " + ncclGetLastError(nullptr)) && ranks.sync();
  }
  for (int r = 0; r < n && ok; ++r) {
    std::vector<uint8_t> out(bytes);
    ok = cudaOk(cu->cuMemcpyDtoH(out.data(), c.inPlace ? send[r] : recv[r], bytes),
                "cuMemcpyDtoH") &&
         check(c.check(out).empty(), "rank " + std::to_string(r) + ": " + c.check(out));
  }
  for (int r = 0; r < n; ++r) {
    if (send[r] != 0) cu->cuMemFree(send[r]);
    if (recv[r] != 0) cu->cuMemFree(recv[r]);
  }
  return ok;
}

// Seconds per call of `issue` on every rank (a group), over `iters` calls after a warm-up.
template <class Issue>
double timeCalls(DeviceRanks& ranks, int iters, Issue issue) {
  auto group = [&] {
    ncclGroupStart();
    for (size_t r = 0; r < ranks.comms.size(); ++r) issue(static_cast<int>(r));
    return ncclGroupEnd() == ncclSuccess;
  };
  if (!group() || !ranks.sync()) return -1;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (!group()) return -1;
  if (!ranks.sync()) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

bool adasum() {
  for (int n : {2, 4}) {
    DeviceRanks ranks(n);
    if (!ranks.ok) return false;
    uint64_t seed = 1000 + n;
    for (ncclDataType_t t : ringcc::test::kAdasumTypes) {
      if (!adasumCase(ranks, AdasumCase(t, n, {1000}, false, ++seed)) ||
          !adasumCase(ranks, AdasumCase(t, n, {333, 100, 64, 1, 4099}, true, ++seed)))
        return false;
    }
    if (!adasumCase(ranks, AdasumCase(ncclFloat32, n, {size_t{1} << 20, 5, 7}, false, ++seed)))
      return false;
    printf("gpu_coll: adasum at %d ranks: every type, segments and zero vectors, within "
           "tolerance\n", n);
  }
  // 64 MiB of floats at 4 ranks, in place: Adasum's time beside an all-reduce's.
  const int n = 4;
  const size_t count = size_t{16} << 20;
  DeviceRanks ranks(n);
  if (!ranks.ok) return false;
  std::vector<CuDevicePtr> buf(n);
  for (int r = 0; r < n; ++r)
    if (!cudaOk(cu->cuMemAlloc(&buf[r], count * 4), "cuMemAlloc") ||
        !cudaOk(cu->cuMemsetD8(buf[r], 0, count * 4), "cuMemsetD8"))
      return false;
  auto ptr = [&](int r) { return reinterpret_cast<float*>(buf[r]); };
  auto stream = [&](int r) { return reinterpret_cast<cudaStream_t>(ranks.streams[r]); };
  const double allReduce = timeCalls(ranks, 5, [&](int r) {
    ncclAllReduce(ptr(r), ptr(r), count, ncclFloat, ncclSum, ranks.comms[r], stream(r));
  });
  const double ada = timeCalls(ranks, 5, [&](int r) {
    ringccAllReduceAdasum(ptr(r), ptr(r), count, ncclFloat, nullptr, 0, ranks.comms[r],
                          stream(r));
  });
  for (CuDevicePtr b : buf) cu->cuMemFree(b);
  if (!check(allReduce > 0 && ada > 0, "the timed calls failed")) return false;
  printf("gpu_coll: adasum exact at 2 and 4 ranks; 64 MiB x 4 ranks: all-reduce %.3f ms, "
         "adasum %.3f ms (all-reduce / adasum %.2f)\n",
         allReduce * 1e3, ada * 1e3, allReduce / ada);
  return true;
}

ncclWaitSignalDesc_t signalFrom(int peer) {
  ncclWaitSignalDesc_t d{};
  d.opCnt = 1;
  d.peer = peer;
  return d;
}

bool rmaCheck() {
  const int n = 2;
  const size_t count = size_t{1} << 20;  // floats of one put
  DeviceRanks ranks(n);
  if (!ranks.ok) return false;
  std::vector<CuStream> putStreams(n);
  std::vector<CuDevicePtr> win(n), src(n), seen(n);
  std::vector<ncclWindow_t> wins(n);
  bool ok = true;
  std::vector<float> host(count);
  for (int r = 0; r < n && ok; ++r) {
    for (size_t i = 0; i < count; ++i) host[i] = input(r, i);
    ok = cudaOk(cu->cuStreamCreate(&putStreams[r], kCuStreamNonBlocking), "cuStreamCreate") &&
         cudaOk(cu->cuMemAlloc(&win[r], n * count * 4), "cuMemAlloc") &&
         cudaOk(cu->cuMemsetD8(win[r], 0, n * count * 4), "cuMemsetD8") &&
         cudaOk(cu->cuMemAlloc(&src[r], count * 4), "cuMemAlloc") &&
         cudaOk(cu->cuMemcpyHtoD(src[r], host.data(), count * 4), "cuMemcpyHtoD") &&
         cudaOk(cu->cuMemAlloc(&seen[r], count * 4), "cuMemAlloc") &&
         cudaOk(cu->cuMemsetD8(seen[r], 0, count * 4), "cuMemsetD8");
  }
  auto stream = [&](int r) { return reinterpret_cast<cudaStream_t>(ranks.streams[r]); };
  if (ok) {
    ncclGroupStart();
    for (int r = 0; r < n; ++r)
      ncclCommWindowRegister(ranks.comms[r], reinterpret_cast<void*>(win[r]), n * count * 4,
                             &wins[r], 0);
    ok = check(ncclGroupEnd() == ncclSuccess,
               std::string("ncclCommWindowRegister: ") + ncclGetLastError(ranks.comms[0]));
  }
  for (int r = 0; r < n && ok; ++r) {
    ncclWaitSignalDesc_t d = signalFrom(1 - r);
    ok = check(ncclWaitSignal(1, &d, ranks.comms[r], stream(r)) == ncclSuccess, "ncclWaitSignal") &&
         cudaOk(cu->cuMemcpyDtoDAsync(seen[r], win[r] + (1 - r) * count * 4, count * 4,
                                      ranks.streams[r]),
                "cuMemcpyDtoDAsync");
  }
  for (int r = 0; r < n && ok; ++r)
    ok = check(ncclPutSignal(reinterpret_cast<void*>(src[r]), count, ncclFloat, 1 - r, wins[r],
                             r * count * 4, 0, 0, 0, ranks.comms[r],
                             reinterpret_cast<cudaStream_t>(putStreams[r])) == ncclSuccess,
               std::string("ncclPutSignal: ") + ncclGetLastError(ranks.comms[r]));
  for (CuStream s : putStreams) ok = ok && cudaOk(cu->cuStreamSynchronize(s), "the puts");
  ok = ok && ranks.sync();
  for (int r = 0; r < n && ok; ++r) {
    ok = cudaOk(cu->cuMemcpyDtoH(host.data(), seen[r], count * 4), "cuMemcpyDtoH");
    for (size_t i = 0; i < count && ok; ++i)
      ok = check(host[i] == input(1 - r, i), "rank " + std::to_string(r) + " element " +
                                                 std::to_string(i) + " is not the peer's put");
  }
  // Ping-pong: rank 0 signals and waits for the answer, rank 1 waits and answers.
  const int rounds = 1000;
  double perRound = 0;
  if (ok) {
    const auto start = std::chrono::steady_clock::now();
    ncclWaitSignalDesc_t from1 = signalFrom(1), from0 = signalFrom(0);
    for (int i = 0; i < rounds && ok; ++i)
      ok = ncclSignal(1, 0, 0, 0, ranks.comms[0], stream(0)) == ncclSuccess &&
           ncclWaitSignal(1, &from1, ranks.comms[0], stream(0)) == ncclSuccess &&
           ncclWaitSignal(1, &from0, ranks.comms[1], stream(1)) == ncclSuccess &&
           ncclSignal(0, 0, 0, 0, ranks.comms[1], stream(1)) == ncclSuccess;
    ok = check(ok, std::string("ping-pong: ") + ncclGetLastError(nullptr)) && ranks.sync();
    perRound = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
               rounds;
  }
  for (int r = 0; r < n && ok; ++r) {
    ncclResult_t async = ncclInternalError;
    ncclCommGetAsyncError(ranks.comms[r], &async);
    ok = check(async == ncclSuccess, std::string("async: ") + ncclGetLastError(ranks.comms[r]));
  }
  if (ok) {
    ncclGroupStart();
    for (int r = 0; r < n; ++r) ncclCommWindowDeregister(ranks.comms[r], wins[r]);
    ok = check(ncclGroupEnd() == ncclSuccess, "ncclCommWindowDeregister");
  }
  for (int r = 0; r < n; ++r) {
    cu->cuMemFree(win[r]);
    cu->cuMemFree(src[r]);
    cu->cuMemFree(seen[r]);
    if (putStreams[r] != nullptr) cu->cuStreamDestroy(putStreams[r]);
  }
  if (ok)
    printf("gpu_coll: rma exact (4 MiB puts both ways, waits holding the streams); signal "
           "ping-pong %.1f us a round trip (2 ranks, one GPU)\n",
           perRound * 1e6);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "collectives";
  if (what == "--modes") return printf("collectives\nabort\ngraph\nsuspend\nadasum\nrma\n"), 0;
  std::vector<int> rankCounts = {1, 2, 4, 8};
  std::vector<size_t> counts = {1000, size_t{1} << 20};
  if (what == "collectives" && argc > 2) rankCounts = {atoi(argv[2])};
  if (what == "collectives" && argc > 3) counts = {strtoull(argv[3], nullptr, 10)};
  if (rankCounts[0] < 1 || rankCounts[0] > 64 || counts[0] < 1 ||
      (what != "collectives" && what != "abort" && what != "graph" && what != "suspend" &&
       what != "adasum" && what != "rma"))
    return fprintf(stderr,
                   "usage: gpu_coll collectives [RANKS [COUNT]] | abort | graph | suspend | adasum | "
                   "rma\n"),
           2;
  if (cudaDriver(&cu, "gpu_coll") != ncclSuccess) return check(false, "no CUDA driver"), 1;
  CuContext ctx = nullptr;
  if (!cudaOk(cu->cuDevicePrimaryCtxRetain(&ctx, 0), "device 0") ||
      !cudaOk(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
    return 1;
  const bool ok = what == "abort"     ? abortBlocked()
                  : what == "graph"   ? graphReplay()
                  : what == "suspend" ? suspendCycle()
                  : what == "adasum"  ? adasum()
                  : what == "rma"     ? rmaCheck()
                                      : collectives(rankCounts, counts);
  return ok ? 0 : 1;
}
