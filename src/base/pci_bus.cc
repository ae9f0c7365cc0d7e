#include "src/base/pci_bus.h"

#include <cstdio>

#include "src/base/cuda_driver.h"
#include "src/base/error.h"

namespace ringcc {
namespace {

// Bus id of `dev` by the driver's attributes, or the driver's error.
CuResult busIdOf(const CudaDriver& cu, int dev, int64_t* out) {
  int domain = 0, bus = 0, device = 0;
  CuResult r = cu.cuDeviceGetAttribute(&domain, kCuDeviceAttributePciDomainId, dev);
  if (r == kCuSuccess) r = cu.cuDeviceGetAttribute(&bus, kCuDeviceAttributePciBusId, dev);
  if (r == kCuSuccess) r = cu.cuDeviceGetAttribute(&device, kCuDeviceAttributePciDeviceId, dev);
  if (r != kCuSuccess) return r;
  *out = (int64_t{domain} << 16) | (int64_t{bus & 0xff} << 8) | (device & 0x1f);
  return kCuSuccess;
}

}  // namespace

ncclResult_t cudaDeviceBusId(int dev, int64_t* out) {
  *out = -1;
  const CudaDriver* cu = nullptr;
  RINGCC_CHECK(cudaDriver(&cu, "a CUDA communicator"));
  const CuResult r = busIdOf(*cu, dev, out);
  if (r == kCuSuccess) return ncclSuccess;
  char name[96];
  return fail(ncclUnhandledCudaError, "init", "reading the PCI bus id of CUDA device %d: %s", dev,
              cuErrorName(*cu, r, name, sizeof name));
}

int cudaDeviceWithBusId(int64_t busId) {
  const CudaDriver* cu = cudaDriverIfLoaded();
  int count = 0;
  if (busId < 0 || cu == nullptr || cu->cuDeviceGetCount(&count) != kCuSuccess) return -1;
  for (int dev = 0; dev < count; ++dev) {
    int64_t id = -1;
    if (busIdOf(*cu, dev, &id) == kCuSuccess && id == busId) return dev;
  }
  return -1;
}

const char* formatBusId(int64_t busId, char* buf, size_t size) {
  if (busId < 0)
    std::snprintf(buf, size, "none");
  else
    std::snprintf(buf, size, "%04x:%02x:%02x.0", static_cast<unsigned>(busId >> 16),
                  static_cast<unsigned>((busId >> 8) & 0xff), static_cast<unsigned>(busId & 0x1f));
  return buf;
}

}  // namespace ringcc
