#include "bench/perf/perf_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/perf/datatypes.h"

namespace ringcc::bench::perf {
namespace {

bool needsId(const Run& run) {
  return run.group->size() > 1 || (run.opt.parallelInit && run.nThreads > 1);
}

char* allocBuffer(size_t bytes) {
  size_t rounded = ((std::max<size_t>(bytes, 1) + 4095) / 4096) * 4096;
  return static_cast<char*>(std::aligned_alloc(4096, rounded));
}

}  // namespace

int checkRequest(Run& run) {
  const PerfOptions& o = run.opt;
  const CommApi& api = *run.api;
  bool mulsum =
      std::find(o.ops.begin(), o.ops.end(), static_cast<int>(OpKind::MulSum)) != o.ops.end();
  std::vector<std::string> missing = missingEntries(api, run.kind, mulsum, needsId(run));
  if (o.localRegister && !(api.memAlloc && api.memFree)) missing.push_back("ncclMemAlloc (-R 1)");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    std::fprintf(run.io.err, "%s: the library does not provide %s (not implemented yet?)\n",
                 run.program.c_str(), list.c_str());
    return kPerfNotImplemented;
  }
  if (run.spec->hasRoot && o.root >= run.nranks) {
    std::fprintf(run.io.err, "%s: invalid root %d for %d ranks\n", run.program.c_str(), o.root,
                 run.nranks);
    return kPerfInvalidUsage;
  }
  return kPerfSuccess;
}

void limitToMemory(Run& run) {
  // Host memory: send, receive and (with -c) expected buffers for every rank on this host
  // must fit in three quarters of the memory available now.
  const PerfOptions& o = run.opt;
  run.maxBytes = o.maxBytes;
  size_t minBytes = o.minBytes;
  long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0) {
    double avail = static_cast<double>(pages) * static_cast<double>(pageSize) * 0.75;
    double ranksHere = static_cast<double>(run.nThreads) * run.nGpus * run.group->localSize();
    size_t memMax = static_cast<size_t>(avail / ranksHere / (o.check ? 3 : 2));
    if (run.maxBytes > memMax) {
      run.maxBytes = memMax;
      if (minBytes > run.maxBytes) minBytes = run.maxBytes;
      print(run, sprint("#\n# Reducing maxBytes to %zu due to memory limitation\n", run.maxBytes));
    }
  }
  run.opt.minBytes = minBytes;
}

int shareUniqueId(Run& run) {
  if (!needsId(run)) return kPerfSuccess;
  bool have = false;
  if (run.group->rank() == 0 && !run.group->providesId() &&
      !ncclOk(run, run.api->getUniqueId(&run.id), "ncclGetUniqueId"))
    return run.failCode;
  std::string err;
  if (!run.group->shareId(run.id, have, err)) {
    std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
    return kPerfInternalError;
  }
  return kPerfSuccess;
}

int openDevices(Run& run, std::string* noCuda) {
  const int nLocal = run.nLocal();
  run.comms.assign(nLocal, nullptr);
  // GPUs, as nccl-tests uses them, where the CUDA driver has any (perf_cuda.h).
  const char* forced = std::getenv("RINGCC_DEVICE");
  if (forced == nullptr || std::strcmp(forced, "host") != 0) {
    const CudaDriver* cu = run.io.cuda ? run.io.cuda : loadPerfCuda(noCuda);
    std::string err;
    if (cu && !run.devs.open(cu, run.group->rank() * nLocal, nLocal, &err)) {
      std::fprintf(run.io.err, "%s: %s\n", run.program.c_str(), err.c_str());
      return kPerfCudaError;
    }
  }
  return kPerfSuccess;
}

bool initComms(Run& run) {
  const CommApi& api = *run.api;
  if (run.group->size() == 1) {
    std::vector<int> devList;
    for (int k = 0; k < run.devs.size(); ++k) devList.push_back(run.devs.rank(k).dev);
    return ncclOk(run,
                  api.commInitAll(run.comms.data(), run.nLocal(),
                                  run.devs.active() ? devList.data() : nullptr),
                  "ncclCommInitAll");
  }
  bool ok = ncclOk(run, api.groupStart(), "ncclGroupStart");
  for (int t = 0; t < run.nThreads && ok; ++t)
    for (int i = 0; i < run.nGpus && ok; ++i) {
      if (run.devs.active() && !deviceOk(run, run.devs.use(t * run.nGpus + i))) return false;
      ok = ncclOk(
          run,
          api.commInitRank(&run.comms[t * run.nGpus + i], run.nranks, run.id, run.globalRank(t, i)),
          "ncclCommInitRank");
    }
  return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
}

bool initThreadComms(Run& run, int thread) {
  const CommApi& api = *run.api;
  if (!ncclOk(run, api.groupStart(), "ncclGroupStart")) return false;
  bool ok = true;
  for (int i = 0; i < run.nGpus && ok; ++i) {
    // On a GPU, each rank's communicator is made with its device current (cudaSetDevice).
    if (run.devs.active() && !deviceOk(run, run.devs.use(thread * run.nGpus + i))) return false;
    ok = ncclOk(run,
                api.commInitRank(&run.comms[thread * run.nGpus + i], run.nranks, run.id,
                                 run.globalRank(thread, i)),
                "ncclCommInitRank");
  }
  return ncclOk(run, api.groupEnd(), "ncclGroupEnd") && ok;
}

int chooseMemory(Run& run, const std::string& noCuda) {
  // Device buffers exactly when the communicators are CUDA ones (a library without
  // ringccCommMemoryKind, NVIDIA's, makes only CUDA ones).
  const CommApi& api = *run.api;
  run.onDevice = run.devs.active();
  if (!api.commMemoryKind) return kPerfSuccess;
  for (ncclComm_t c : run.comms) {
    ringccMemKind_t memKind = ringccMemHost;
    if (!ncclOk(run, api.commMemoryKind(c, &memKind), "ringccCommMemoryKind")) return run.failCode;
    run.onDevice = memKind == ringccMemCuda;
    if (run.onDevice && !run.devs.active()) {
      std::fprintf(run.io.err,
                   "%s: the communicator uses CUDA device memory, but the tool cannot "
                   "allocate device buffers: %s\n",
                   run.program.c_str(), noCuda.c_str());
      for (ncclComm_t comm : run.comms) api.commDestroy(comm);
      return kPerfCudaError;
    }
  }
  return kPerfSuccess;
}

bool allocBuffers(Run& run, std::string* deviceErr) {
  // Sized for maxBytes as nccl-tests does: send and receive whole, expected as the largest
  // receive.
  const CommApi& api = *run.api;
  CollCounts largest = collCounts(run.kind, run.maxBytes, 1, run.nranks);
  run.bufs.resize(run.nLocal());
  bool allocated = true;
  // -R 1: send and receive buffers from the library's ncclMemAlloc, as nccl-tests' local
  // registration takes them (ringcc shares such memory between processes: one copy).
  run.buffersFromLibrary = run.opt.localRegister != 0;  // (checkRequest checked the entries)
  auto alloc = [&](size_t bytes) -> char* {
    if (!run.buffersFromLibrary) return allocBuffer(bytes);
    void* p = nullptr;
    return api.memAlloc(&p, std::max<size_t>(bytes, 1)) == ncclSuccess ? static_cast<char*>(p)
                                                                       : nullptr;
  };
  for (RankBuffers& b : run.bufs) {
    b.send = alloc(run.maxBytes);
    b.recv = alloc(run.maxBytes);
    b.expected = allocBuffer(run.opt.check ? largest.recvCount : 0);
    allocated = allocated && b.send && b.recv && b.expected;
  }
  if (allocated && run.onDevice) allocated = run.devs.allocate(run.maxBytes, deviceErr);
  return allocated;
}

void freeBuffers(Run& run) {
  for (RankBuffers& b : run.bufs) {
    for (char* p : {b.send, b.recv}) {
      if (run.buffersFromLibrary && p)
        (void)run.api->memFree(p);
      else
        std::free(p);
    }
    std::free(b.expected);
  }
  run.devs.release();
}

}  // namespace ringcc::bench::perf
