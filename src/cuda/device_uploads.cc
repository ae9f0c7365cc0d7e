#include "src/cuda/device_uploads.h"

#include <cstring>

#include "src/base/error.h"

namespace ringcc {

DeviceUploads::~DeviceUploads() {
  for (auto& [host, versions] : copies_)
    for (Version& v : versions) cu_.cuMemFree(v.device);
  for (CuDevicePtr p : retired_) cu_.cuMemFree(p);
}

ncclResult_t DeviceUploads::get(const void* host, size_t bytes, CuStream stream, CuDevicePtr* out) {
  std::vector<Version>& versions = copies_[host];
  for (Version& v : versions) {
    if (v.contents.size() == bytes && std::memcmp(v.contents.data(), host, bytes) == 0) {
      *out = v.device;
      return ncclSuccess;
    }
  }
  char name[96];
  int capture = kCuStreamCaptureStatusNone;
  CuResult r = cu_.cuStreamIsCapturing(stream, &capture);
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "cuda", "cuStreamIsCapturing failed: %s",
                cuErrorName(cu_, r, name, sizeof name));
  if (capture != kCuStreamCaptureStatusNone)
    return fail(ncclInvalidUsage, "cuda",
                "this call's first run on the communicator uploads its schedule to the GPU, "
                "which cannot happen while the stream is captured into a CUDA graph: run the "
                "same call once before capturing");
  Version v;
  r = cu_.cuMemAlloc(&v.device, bytes);
  if (r != kCuSuccess)
    return fail(ncclUnhandledCudaError, "cuda", "cuMemAlloc of %zu bytes failed: %s", bytes,
                cuErrorName(cu_, r, name, sizeof name));
  r = cu_.cuMemcpyHtoDAsync(v.device, host, bytes, copyStream_);
  if (r == kCuSuccess) r = cu_.cuStreamSynchronize(copyStream_);
  if (r != kCuSuccess) {
    cu_.cuMemFree(v.device);
    return fail(ncclUnhandledCudaError, "cuda", "uploading %zu bytes failed: %s", bytes,
                cuErrorName(cu_, r, name, sizeof name));
  }
  v.contents.assign(static_cast<const unsigned char*>(host),
                    static_cast<const unsigned char*>(host) + bytes);
  if (versions.size() == kMaxVersions) {
    retired_.push_back(versions.front().device);  // a queued kernel may still read it
    versions.erase(versions.begin());
  }
  versions.push_back(std::move(v));
  ++uploads_;
  *out = versions.back().device;
  return ncclSuccess;
}

}  // namespace ringcc
