#include "src/rma/signal_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"
#include "transports/fifo_host.h"

namespace ringcc {
namespace {

constexpr uint64_t kMagic = 0x72696e6763632d73ULL;  // "ringcc-s"
constexpr size_t kHeaderBytes = 64;
constexpr size_t kBellOffset = kHeaderBytes;
constexpr size_t kCountersOffset = kBellOffset + sizeof(FifoCounter);

struct Header {
  uint64_t magic;
  int32_t nranks, nCtx, nSig;
};
static_assert(sizeof(Header) <= kHeaderBytes);

bool sameGeometry(const char* base, const SignalGeometry& g) {
  Header h;
  std::memcpy(&h, base, sizeof(h));
  return h.magic == kMagic && h.nranks == g.nranks && h.nCtx == g.nCtx && h.nSig == g.nSig;
}

}  // namespace

size_t SignalGeometry::bytes() const {
  return kCountersOffset + static_cast<size_t>(nranks) * nCtx * nSig * sizeof(uint64_t);
}

size_t SignalGeometry::counterOffset(int sender, int ctx, int sigIdx) const {
  return kCountersOffset + index(sender, ctx, sigIdx) * sizeof(uint64_t);
}

void SignalView::bump(int sender, int ctx, int sigIdx) const {
  std::atomic_ref<uint64_t>(*counter(sender, ctx, sigIdx)).fetch_add(1, std::memory_order_release);
  FifoCounter* b = bell();
  std::atomic_ref<uint32_t>(b->value).fetch_add(1, std::memory_order_release);
  wakeCounter(b);
}

uint64_t SignalView::count(int sender, int ctx, int sigIdx) const {
  return std::atomic_ref<uint64_t>(*counter(sender, ctx, sigIdx)).load(std::memory_order_acquire);
}

uint64_t* SignalView::counter(int sender, int ctx, int sigIdx) const {
  return reinterpret_cast<uint64_t*>(base_ + geometry_.counterOffset(sender, ctx, sigIdx));
}

FifoCounter* SignalView::bell() const {
  return reinterpret_cast<FifoCounter*>(base_ + kBellOffset);
}

SignalRegion::~SignalRegion() {
  if (mapped_) {
    munmap(base_, bytes_);
  } else {
    std::free(base_);
  }
  if (fd_ >= 0) close(fd_);
}

ncclResult_t SignalRegion::create(const SignalGeometry& g, std::unique_ptr<SignalRegion>* out) {
  std::unique_ptr<SignalRegion> r(new SignalRegion());
  r->geometry_ = g;
  r->bytes_ = g.bytes();
  r->desc_.pid = getpid();
  r->desc_.bytes = r->bytes_;
  const int fd = memfd_create("ringcc-signals", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(r->bytes_)) == 0) {
    void* p = mmap(nullptr, r->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    struct stat st;
    if (p != MAP_FAILED && fstat(fd, &st) == 0) {
      r->base_ = static_cast<char*>(p);
      r->mapped_ = true;
      r->fd_ = fd;
      r->desc_.fd = fd;
      r->desc_.inode = st.st_ino;
    } else if (p != MAP_FAILED) {
      munmap(p, r->bytes_);
    }
  }
  if (r->base_ == nullptr) {
    if (fd >= 0) close(fd);
    // Peers on this host then signal by message too: slower, still correct.
    r->base_ = static_cast<char*>(std::calloc(1, r->bytes_));
    if (r->base_ == nullptr)
      return fail(ncclSystemError, "ncclCommWindowRegister", "cannot allocate %zu bytes of signals",
                  r->bytes_);
  }
  const Header h{kMagic, g.nranks, g.nCtx, g.nSig};
  std::memcpy(r->base_, &h, sizeof(h));
  *out = std::move(r);
  return ncclSuccess;
}

std::unique_ptr<SignalRegion> SignalRegion::mapPeer(const SignalRegionDesc& d,
                                                    const SignalGeometry& g) {
  if (d.fd < 0 || d.pid <= 0 || d.bytes != g.bytes()) return nullptr;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", d.pid, d.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_ino == d.inode && static_cast<uint64_t>(st.st_size) == d.bytes)
    p = mmap(nullptr, d.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return nullptr;
  if (!sameGeometry(static_cast<char*>(p), g)) {
    munmap(p, d.bytes);
    return nullptr;
  }
  std::unique_ptr<SignalRegion> r(new SignalRegion());
  r->base_ = static_cast<char*>(p);
  r->bytes_ = d.bytes;
  r->mapped_ = true;
  r->geometry_ = g;
  r->desc_ = d;
  return r;
}

}  // namespace ringcc
