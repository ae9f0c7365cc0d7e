// ncclMemAlloc/ncclMemFree and buffer registration.
//
// On host communicators memory is page-aligned host memory that processes on this host can
// map from each other (a memfd per allocation, transports/shm/mapped_buffers.h): the Direct
// protocol then reads it in place between processes, one copy instead of two through the shm
// segment. Where a memfd cannot be made it is ordinary memory. Registration has nothing to
// pin, so a registration handle only records the range (and is checked on deregistration).
// Windows (ncclCommWindowRegister) are checked here and made by src/rma (rma_ops.h).
#include <cstdlib>
#include <mutex>
#include <unordered_set>

#include "src/api/api.h"
#include "src/rma/rma_ops.h"
#include "transports/shm/mapped_buffers.h"

using namespace ringcc;

namespace {

struct Registration {
  const ncclComm* comm;
  void* buff;
  size_t size;
};

std::mutex gMu;
// The live posix_memalign fallbacks. Mappable allocations are tracked once, by the table that
// maps them (transports/shm/mapped_buffers.h), which also frees them.
std::unordered_set<void*>& fallbacks() {
  static std::unordered_set<void*> set;
  return set;
}

constexpr size_t kPageBytes = 4096;

}  // namespace

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  RINGCC_CHECK(checkNotNull(ptr, "ptr", "ncclMemAlloc"));
  *ptr = nullptr;
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc", "size is 0");
  void* p = allocMappable(size);
  if (p == nullptr) {
    if (posix_memalign(&p, kPageBytes, size) != 0)
      return fail(ncclSystemError, "ncclMemAlloc", "cannot allocate %zu bytes", size);
    std::lock_guard<std::mutex> lock(gMu);
    fallbacks().insert(p);
  }
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  if (freeMappable(ptr)) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(gMu);
    if (fallbacks().erase(ptr) == 0)
      return fail(ncclInvalidArgument, "ncclMemFree", "ptr %p was not allocated by ncclMemAlloc",
                  ptr);
  }
  free(ptr);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size,
         void** handle) {
  const char* where = "ncclCommRegister";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(buff, "buff", where));
  RINGCC_CHECK(checkNotNull(handle, "handle", where));
  if (size == 0) return fail(ncclInvalidArgument, where, "size is 0");
  *handle = new Registration{comm, buff, size};
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  const char* where = "ncclCommDeregister";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(handle, "handle", where));
  auto* reg = static_cast<Registration*>(handle);
  if (reg->comm != comm)
    return fail(ncclInvalidArgument, where, "handle was registered with another communicator");
  delete reg;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
         ncclWindow_t* win, int winFlags) {
  const char* where = "ncclCommWindowRegister";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  RINGCC_CHECK(checkNotNull(win, "win", where));
  *win = nullptr;
  RINGCC_CHECK(checkNotNull(buff, "buff", where));
  if (size == 0) return fail(ncclInvalidArgument, where, "size is 0");
  constexpr int kKnownFlags =
      NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED;
  if ((winFlags & ~kKnownFlags) != 0)
    return fail(ncclInvalidArgument, where, "winFlags 0x%x has unknown bits 0x%x", winFlags,
                winFlags & ~kKnownFlags);
  return rmaWindowRegister(comm, buff, size, winFlags, win);
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  const char* where = "ncclCommWindowDeregister";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  return rmaWindowDeregister(comm, win);
}
