#include "transports/shm/mapped_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace ringcc {
namespace {

constexpr size_t kPageBytes = 4096;

struct PeerMapping {
  int pid;
  RefRegion region;  // as the peer described it
  const char* local;
};

// Few regions (a process allocates a handful of communication buffers), so plain vectors.
struct Registry {
  std::mutex mu;
  std::vector<RefRegion> own;
  std::vector<PeerMapping> peers;
  RefRegion probe{};
  bool probeTried = false;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: runners may look up during exit
  return *r;
}

std::atomic<uint64_t> gPeerMaps{0};

size_t roundUp(size_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

// A memfd of `bytes`, mapped shared: the region, or false with errno set.
bool makeRegion(size_t bytes, RefRegion* region) {
  const int fd = memfd_create("ringcc-mem", MFD_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0 && fstat(fd, &st) == 0)
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return false;
  }
  *region =
      RefRegion{reinterpret_cast<uint64_t>(p), bytes, static_cast<uint64_t>(st.st_ino), fd, 0};
  return true;
}

bool overlaps(const RefRegion& a, const RefRegion& b) {
  return a.base < b.base + b.bytes && b.base < a.base + a.bytes;
}

}  // namespace

void* allocMappable(size_t bytes) {
  if (bytes == 0) {
    errno = EINVAL;
    return nullptr;
  }
  RefRegion r;
  if (!makeRegion(roundUp(bytes), &r)) return nullptr;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.own.push_back(r);
  return reinterpret_cast<void*>(r.base);
}

bool freeMappable(void* p) {
  Registry& reg = registry();
  RefRegion r;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.own.begin();
    while (it != reg.own.end() && it->base != reinterpret_cast<uint64_t>(p)) ++it;
    if (it == reg.own.end()) return false;
    r = *it;
    reg.own.erase(it);
  }
  munmap(p, r.bytes);
  close(r.fd);
  return true;
}

bool findMappable(const void* p, uint64_t bytes, RefRegion* region) {
  const auto at = reinterpret_cast<uint64_t>(p);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (const RefRegion& r : reg.own)
    if (at >= r.base && at + bytes <= r.base + r.bytes) {
      *region = r;
      return true;
    }
  return false;
}

const char* mapPeerRegion(int pid, const RefRegion& region) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (const PeerMapping& m : reg.peers)
    if (m.pid == pid && m.region.ino == region.ino && m.region.base == region.base &&
        m.region.bytes == region.bytes)
      return m.local;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, region.fd);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* p = MAP_FAILED;
  // The fd number may have been closed and reused since: the inode and size say it is the
  // region the peer described.
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == region.ino &&
      static_cast<uint64_t>(st.st_size) >= region.bytes)
    p = mmap(nullptr, region.bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return nullptr;
  // A region of this peer that the new one overlaps was freed (the peer reused its range):
  // nothing can read it any more (see the header).
  for (size_t i = 0; i < reg.peers.size();) {
    if (reg.peers[i].pid == pid && overlaps(reg.peers[i].region, region)) {
      munmap(const_cast<char*>(reg.peers[i].local), reg.peers[i].region.bytes);
      reg.peers.erase(reg.peers.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  reg.peers.push_back(PeerMapping{pid, region, static_cast<const char*>(p)});
  gPeerMaps.fetch_add(1, std::memory_order_relaxed);
  return static_cast<const char*>(p);
}

bool mappedProbe(RefRegion* region) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (!reg.probeTried) {
    reg.probeTried = true;
    RefRegion r;
    if (makeRegion(kPageBytes, &r)) {
      std::memcpy(reinterpret_cast<void*>(r.base), &kMappedProbeValue, sizeof(kMappedProbeValue));
      reg.probe = r;
    }
  }
  if (reg.probe.base == 0) return false;
  *region = reg.probe;
  return true;
}

bool mappedReadWorks(int pid, const RefRegion& probe) {
  if (pid <= 0 || probe.base == 0 || probe.bytes < sizeof(uint64_t)) return false;
  const char* p = mapPeerRegion(pid, probe);
  uint64_t got = 0;
  if (p) std::memcpy(&got, p, sizeof(got));
  return got == kMappedProbeValue;
}

uint64_t mappedPeerRegions() { return gPeerMaps.load(std::memory_order_relaxed); }

}  // namespace ringcc
