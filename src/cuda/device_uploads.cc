#include "src/cuda/device_uploads.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"

namespace ringcc {

DeviceUploads::~DeviceUploads() {
  for (Chunk& c : chunks_) {
    cu_.cuMemFree(c.device);
    cu_.cuMemFreeHost(c.host);
  }
}

ncclResult_t DeviceUploads::reserve(size_t bytes) {
  char name[96];
  Chunk c;
  c.size = (bytes + kAlign - 1) / kAlign * kAlign;
  CuResult r = cu_.cuMemAlloc(&c.device, c.size);
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "cuda", "cuMemAlloc of %zu bytes for uploads failed: %s",
                c.size, cuErrorName(cu_, r, name, sizeof name));
  void* host = nullptr;
  r = cu_.cuMemHostAlloc(&host, c.size, 0);
  if (r != kCuSuccess) {
    cu_.cuMemFree(c.device);
    return fail(ncclUnhandledCudaError, "cuda",
                "cuMemHostAlloc of %zu bytes for uploads failed: %s", c.size,
                cuErrorName(cu_, r, name, sizeof name));
  }
  c.host = static_cast<unsigned char*>(host);
  chunks_.push_back(c);
  return ncclSuccess;
}

ncclResult_t DeviceUploads::get(const void* host, size_t bytes, CuStream stream, bool capturing,
                                CuDevicePtr* out) {
  std::vector<Version>& versions = copies_[host];
  for (Version& v : versions) {
    if (v.bytes == bytes && std::memcmp(v.contents, host, bytes) == 0) {
      *out = v.device;
      return ncclSuccess;
    }
  }
  if (capturing)
    return fail(ncclInvalidUsage, "cuda",
                "this call's first run on the communicator uploads its schedule to the GPU, "
                "which cannot happen while the stream is captured into a CUDA graph: run the "
                "same call once before capturing");
  const size_t need = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  if (chunks_.empty() || chunks_.back().size - chunks_.back().used < need)
    RINGCC_CHECK(reserve(std::max(need, chunks_.empty() ? need : 2 * chunks_.back().size)));
  Chunk& c = chunks_.back();
  Version v;
  v.bytes = bytes;
  v.device = c.device + c.used;
  unsigned char* staged = c.host + c.used;
  std::memcpy(staged, host, bytes);
  v.contents = staged;
  c.used += need;
  // From page-locked memory that stays as it is: the copy runs when the stream reaches it,
  // before the kernel queued next on the same stream.
  const CuResult r = cu_.cuMemcpyHtoDAsync(v.device, staged, bytes, stream);
  if (r != kCuSuccess) {
    char name[96];
    return fail(ncclUnhandledCudaError, "cuda", "uploading %zu bytes failed: %s", bytes,
                cuErrorName(cu_, r, name, sizeof name));
  }
  // Beyond kMaxVersions the oldest is forgotten; its memory stays (a queued kernel may read it).
  if (versions.size() == kMaxVersions) versions.erase(versions.begin());
  versions.push_back(v);
  ++uploads_;
  *out = v.device;
  return ncclSuccess;
}

}  // namespace ringcc
