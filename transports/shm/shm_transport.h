// shm: ranks in different processes (or one process, with NCCL_P2P_DISABLE=1) on one host.
//
// The receiver creates a POSIX shared-memory segment (shm_segment.h: 0600, unique name) that
// holds the whole FIFO; the blob carries its name and size. The sender maps it and unlinks the
// name, so once both sides have mapped it nothing in /dev/shm refers to it any more, and the
// memory goes away with the last mapping, even if both processes are killed.
//
// Segment layout:
//   0        ShmHeader (magic, geometry, pids, closed flags)        one cache line
//   64       FifoControl: tail line, head line, sizes[nSlots]       64-byte aligned
//   4096*k   slots: nSlots x slotBytes                              page aligned
//
// Peer state: a side that destroys its Connector sets its closed flag (and wakes both
// counters); a side whose peer process dies is told by a pidfd (process_watch.h), provided the
// peer's pid is known in our pid namespace: spec.peer.pid for the receiver, the blob for the
// sender.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kShmBlobVersion = 1;

// The shm blob's payload.
struct ShmBlob {
  char name[64];   // shm_open name, "/ringcc-<pid>-<pidns>-<n>-<random>"
  uint64_t bytes;  // segment size
  uint32_t nSlots;
  uint32_t slotBytes;
  int32_t recvPid;
  uint32_t pad;
};

Transport& shmTransport();

}  // namespace ringcc
