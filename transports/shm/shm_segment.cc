#include "transports/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/base/log.h"

namespace ringcc {
namespace {

std::atomic<uint32_t> gSegmentCounter{0};

uint64_t randomWord() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
    // Only the O_EXCL retry depends on it being unpredictable; the clock is good enough then.
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = static_cast<uint64_t>(ts.tv_nsec) * 0x9e3779b97f4a7c15ull ^
        static_cast<uint64_t>(ts.tv_sec);
  }
  return r;
}

// The inode of this process's pid namespace: pids in segment names mean something only
// within it (several namespaces may share one /dev/shm, and their pids collide).
unsigned long long pidNamespaceTag() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

std::string namePrefix(int pid) {
  char prefix[48];
  std::snprintf(prefix, sizeof(prefix), "ringcc-%d-%llx-", pid, pidNamespaceTag());
  return prefix;
}

}  // namespace

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    std::memcpy(name_, other.name_, sizeof(name_));
    nameLinked_ = std::exchange(other.nameLinked_, false);
  }
  return *this;
}

void ShmSegment::release() {
  unlinkName();
  if (base_) munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

void ShmSegment::unlinkName() {
  if (!nameLinked_) return;
  nameLinked_ = false;
  if (shm_unlink(name_) != 0 && errno != ENOENT)
    LOG_WARN("shm: could not unlink /dev/shm%s: %s", name_, strerror(errno));
}

ncclResult_t ShmSegment::create(size_t bytes, int peer, ShmSegment* out) {
  ShmSegment seg;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    std::snprintf(seg.name_, sizeof(seg.name_), "/%s%u-%016llx",
                  namePrefix(static_cast<int>(getpid())).c_str(), gSegmentCounter.fetch_add(1),
                  static_cast<unsigned long long>(randomWord()));
    fd = shm_open(seg.name_, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno != EEXIST)
      return failPeer(ncclSystemError, peer, "shm create", "shm_open(%s): %s", seg.name_,
                      strerror(errno));
  }
  if (fd < 0)
    return failPeer(ncclSystemError, peer, "shm create", "no unused segment name after 8 tries");
  seg.nameLinked_ = true;  // from here on, seg's destructor removes the name on failure

  // The umask may have taken bits away from 0600 (never added any); restore exactly 0600.
  if (fchmod(fd, 0600) != 0) {
    int e = errno;
    close(fd);
    return failPeer(ncclSystemError, peer, "shm create", "fchmod(%s, 0600): %s", seg.name_,
                    strerror(e));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    return failPeer(ncclSystemError, peer, "shm create", "ftruncate(%s, %zu): %s", seg.name_, bytes,
                    strerror(e));
  }
  int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (e != 0 && e != EOPNOTSUPP && e != EINVAL) {
    close(fd);
    return failPeer(ncclSystemError, peer, "shm create",
                    "cannot reserve %zu bytes in /dev/shm for %s: %s (enlarge /dev/shm, e.g. "
                    "docker --shm-size, or lower NCCL_BUFFSIZE)",
                    bytes, seg.name_, strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  e = errno;
  close(fd);
  if (base == MAP_FAILED)
    return failPeer(ncclSystemError, peer, "shm create", "mmap(%s, %zu): %s", seg.name_, bytes,
                    strerror(e));
  seg.base_ = base;
  seg.bytes_ = bytes;
  *out = std::move(seg);
  return ncclSuccess;
}

int ShmSegment::removeNamesOf(int pid) {
  if (pid <= 0) return 0;
  const std::string prefix = namePrefix(pid);
  std::vector<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (struct dirent* e = readdir(dir))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.push_back(e->d_name);
    closedir(dir);
  }
  int removed = 0;
  for (const std::string& n : names) {
    if (shm_unlink(("/" + n).c_str()) != 0) continue;  // gone already (its peer attached)
    ++removed;
    LOG_INFO(kLogShm,
             "shm: removed /dev/shm/%s, left by process %d, which exited before its "
             "peer attached",
             n.c_str(), pid);
  }
  return removed;
}

ncclResult_t ShmSegment::attach(const char* name, size_t bytes, int peer, ShmSegment* out) {
  ShmSegment seg;
  std::snprintf(seg.name_, sizeof(seg.name_), "%s", name);
  int fd = shm_open(seg.name_, O_RDWR, 0);
  if (fd < 0)
    return failPeer(ncclRemoteError, peer, "shm attach",
                    "shm_open(%s): %s (the receiver closed or died before we attached?)", seg.name_,
                    strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return failPeer(ncclSystemError, peer, "shm attach", "fstat(%s): %s", seg.name_, strerror(e));
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return failPeer(ncclInvalidUsage, peer, "shm attach",
                    "segment %s has %lld bytes, the connection's geometry needs %zu", seg.name_,
                    static_cast<long long>(st.st_size), bytes);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED)
    return failPeer(ncclSystemError, peer, "shm attach", "mmap(%s, %zu): %s", seg.name_, bytes,
                    strerror(e));
  seg.base_ = base;
  seg.bytes_ = bytes;
  // Both sides have it mapped now: the name has done its job.
  seg.nameLinked_ = true;
  seg.unlinkName();
  *out = std::move(seg);
  return ncclSuccess;
}

}  // namespace ringcc
