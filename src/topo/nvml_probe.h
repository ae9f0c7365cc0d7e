// GPUs seen through the CUDA driver and NVML, both opened with dlopen at run time (no CUDA
// header or library is needed to build). Absent libraries, no devices, or any failure give an
// empty answer: detection then describes a host without GPUs.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

struct ProbedNvLink {
  std::string target;  // bus id at the far end, lower case "0000:xx:yy.z"
  std::string tclass;  // its PCI class ("0x068000": NVSwitch, "0x030200": GPU)
  int count = 0;       // active links to it
};

struct ProbedGpu {
  std::string busId;  // lower case "0000:xx:yy.z"
  int dev = -1;       // CUDA device index (NVML index without the CUDA driver)
  int sm = 0;         // compute capability x 10
  std::vector<ProbedNvLink> nvlinks;
};

std::vector<ProbedGpu> probeGpus();

// "00000000:19:00.0" or "0000:19:00.0", any case -> "0000:19:00.0".
std::string normalizeBusId(const std::string& busId);

}  // namespace ringcc
