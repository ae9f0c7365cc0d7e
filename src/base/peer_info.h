// Who a rank is, as far as transports and the layers above care: plain data, exchanged by the
// communicator's allgather at init, and the few questions two of them answer (same host, same
// process). In the base layer because every layer from the transports up speaks of peers.
#pragma once

#include <stdint.h>

#include <type_traits>

namespace ringcc {

enum class MemoryKind : uint32_t { Host = 0, Cuda = 1 };

struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;      // hash of host name + boot id: equal means same running kernel
  uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid (0 if unknown): pids compare within one
  MemoryKind memory = MemoryKind::Host;
  int32_t cudaDev = -1;  // -1 for host memory
  int64_t busId = -1;    // PCI bus id of cudaDev, -1 for host memory
  int32_t numaNode = -1;  // NUMA node the rank's thread ran on at init (-1: unknown)
  uint64_t topoHash = 0;  // hash of the rank's host topology (src/topo/detect.h)
};
static_assert(std::is_trivially_copyable_v<PeerInfo>);

// This process's PeerInfo for `rank` (hostHash, pid, pid namespace filled in).
PeerInfo localPeerInfo(int rank, MemoryKind memory = MemoryKind::Host, int cudaDev = -1,
                       int64_t busId = -1);

// Hash of this machine's host name and boot id (same value in every process of this boot).
uint64_t localHostHash();

// Same running kernel (so /dev/shm and futexes are shared).
bool sameHost(const PeerInfo& a, const PeerInfo& b);

// Same process: same host, same pid namespace, same pid.
bool sameProcess(const PeerInfo& a, const PeerInfo& b);

}  // namespace ringcc
