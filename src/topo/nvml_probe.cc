#include "src/topo/nvml_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "src/base/log.h"

namespace ringcc {
namespace {

// The few NVML and CUDA driver types and entry points used, declared as their documented
// ABI (nvml.h, cuda.h) so that nothing from CUDA is needed to build.
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;
constexpr unsigned kMaxNvLinks = 18;
struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using NvmlInit = int (*)();
using NvmlCount = int (*)(unsigned*);
using NvmlHandle = int (*)(unsigned, NvmlDevice*);
using NvmlPci = int (*)(NvmlDevice, NvmlPciInfo*);
using NvmlCc = int (*)(NvmlDevice, int*, int*);
using NvmlLinkState = int (*)(NvmlDevice, unsigned, int*);
using NvmlRemotePci = int (*)(NvmlDevice, unsigned, NvmlPciInfo*);
using CuInit = int (*)(unsigned);
using CuCount = int (*)(int*);
using CuBusId = int (*)(char*, int, int);

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

std::string pciClassOf(const std::string& busId) {
  std::ifstream in("/sys/bus/pci/devices/" + busId + "/class");
  std::string c;
  in >> c;
  return c;
}

// CUDA device index of each bus id, from the CUDA driver (empty without it).
std::vector<std::string> cudaBusIds() {
  std::vector<std::string> ids;
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu) return ids;
  auto init = symbol<CuInit>(cu, "cuInit");
  auto count = symbol<CuCount>(cu, "cuDeviceGetCount");
  auto busId = symbol<CuBusId>(cu, "cuDeviceGetPCIBusId");
  int n = 0;
  if (init && count && busId && init(0) == 0 && count(&n) == 0) {
    for (int d = 0; d < n; ++d) {
      char buf[64] = {};
      if (busId(buf, sizeof(buf) - 1, d) == 0) ids.push_back(normalizeBusId(buf));
    }
  }
  // The driver stays loaded: unloading it under a live CUDA context is not safe.
  return ids;
}

}  // namespace

std::string normalizeBusId(const std::string& busId) {
  std::string s = busId;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  // Keep "dddd:bb:dd.f": NVML writes an 8-digit domain.
  if (s.size() > 12) s = s.substr(s.size() - 12);
  return s;
}

std::vector<ProbedGpu> probeGpus() {
  std::vector<ProbedGpu> gpus;
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml) {
    LOG_INFO(kLogGraph, "topology: no libnvidia-ml.so.1 (%s): no GPUs detected", dlerror());
    return gpus;
  }
  auto init = symbol<NvmlInit>(nvml, "nvmlInit_v2");
  auto count = symbol<NvmlCount>(nvml, "nvmlDeviceGetCount_v2");
  auto handle = symbol<NvmlHandle>(nvml, "nvmlDeviceGetHandleByIndex_v2");
  auto pci = symbol<NvmlPci>(nvml, "nvmlDeviceGetPciInfo_v3");
  auto cc = symbol<NvmlCc>(nvml, "nvmlDeviceGetCudaComputeCapability");
  auto linkState = symbol<NvmlLinkState>(nvml, "nvmlDeviceGetNvLinkState");
  auto remote = symbol<NvmlRemotePci>(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  unsigned n = 0;
  if (!init || !count || !handle || !pci || init() != kNvmlSuccess || count(&n) != kNvmlSuccess) {
    LOG_INFO(kLogGraph, "topology: NVML did not start: no GPUs detected");
    return gpus;
  }
  const std::vector<std::string> cuda = cudaBusIds();
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    NvmlPciInfo info{};
    if (handle(i, &d) != kNvmlSuccess || pci(d, &info) != kNvmlSuccess) continue;
    ProbedGpu g;
    g.busId = normalizeBusId(info.busId);
    g.dev = static_cast<int>(i);
    if (!cuda.empty()) {
      auto it = std::find(cuda.begin(), cuda.end(), g.busId);
      if (it == cuda.end()) continue;  // hidden from CUDA (CUDA_VISIBLE_DEVICES)
      g.dev = static_cast<int>(it - cuda.begin());
    }
    int major = 0, minor = 0;
    if (cc && cc(d, &major, &minor) == kNvmlSuccess) g.sm = major * 10 + minor;
    for (unsigned l = 0; linkState && remote && l < kMaxNvLinks; ++l) {
      int active = 0;
      NvmlPciInfo far{};
      if (linkState(d, l, &active) != kNvmlSuccess || active != kNvmlFeatureEnabled) continue;
      if (remote(d, l, &far) != kNvmlSuccess) continue;
      const std::string target = normalizeBusId(far.busId);
      auto it = std::find_if(g.nvlinks.begin(), g.nvlinks.end(),
                             [&](const ProbedNvLink& x) { return x.target == target; });
      if (it != g.nvlinks.end()) {
        ++it->count;
        continue;
      }
      std::string tclass = pciClassOf(target);
      if (tclass.empty()) tclass = "0x068000";  // not a PCI device here: an NVSwitch port
      g.nvlinks.push_back({target, tclass, 1});
    }
    gpus.push_back(std::move(g));
  }
  // NVML stays loaded, as NCCL keeps it: other threads may be inside it.
  std::sort(gpus.begin(), gpus.end(),
            [](const ProbedGpu& a, const ProbedGpu& b) { return a.dev < b.dev; });
  return gpus;
}

}  // namespace ringcc
