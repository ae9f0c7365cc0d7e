// PeerInfo of this process, and what two PeerInfos have in common.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "src/base/param.h"
#include "src/base/peer_info.h"

namespace ringcc {
namespace {

// FNV-1a: stable across processes and builds, unlike std::hash.
uint64_t fnv1a(uint64_t h, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

uint64_t localHostHash() {
  uint64_t h = 0xcbf29ce484222325ull;
  // NCCL_HOSTID names the host instead (as in NCCL): network namespaces on one machine become
  // hosts of their own, and a user can declare two machines one host (at their own risk).
  const std::string id = paramString("HOSTID");
  if (!id.empty()) return fnv1a(h, id.data(), id.size());
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  h = fnv1a(h, host, std::strlen(host));
  // shm needs one running kernel (the boot id names it) and one /dev/shm; containers on one
  // kernel usually get their own host name and their own /dev/shm, so both go into the hash.
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = "";
    size_t n = std::fread(boot, 1, sizeof(boot) - 1, f);
    std::fclose(f);
    h = fnv1a(h, "|", 1);
    h = fnv1a(h, boot, n);
  }
  return h;
}

PeerInfo localPeerInfo(int rank, MemoryKind memory, int cudaDev, int64_t busId) {
  PeerInfo p;
  p.rank = rank;
  p.pid = static_cast<int32_t>(getpid());
  p.hostHash = localHostHash();
  struct stat st;
  p.pidNamespace = stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  p.memory = memory;
  p.cudaDev = cudaDev;
  p.busId = busId;
  return p;
}

bool sameHost(const PeerInfo& a, const PeerInfo& b) { return a.hostHash == b.hostHash; }

bool sameProcess(const PeerInfo& a, const PeerInfo& b) {
  return sameHost(a, b) && a.pidNamespace == b.pidNamespace && a.pid == b.pid;
}

}  // namespace ringcc
