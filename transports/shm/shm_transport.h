// shm: ranks in different processes (or one process, with NCCL_P2P_DISABLE=1) on one host.
//
// The receiver creates a POSIX shared-memory segment (shm_segment.h: 0600, unique name) that
// holds the whole FIFO; its info carries the name and size. The sender maps it and unlinks the
// name, so once both sides have mapped it nothing in /dev/shm refers to it any more, and the
// memory goes away with the last mapping, even if both processes are killed. The sender's
// info carries its pid and geometry, which the receiver checks and watches. No progress
// thread: both sides map the memory, and the doorbell is null.
//
// CUDA ranks: each side registers the whole segment for its GPU (transports/host_mapped.h)
// and its view holds the device addresses; the kernels poll and copy over PCIe. No references.
// Where the sender's GPU can write into the receiver's (the same GPU, or peers), the slots
// leave the segment for the receiver's GPU memory, shared through a CUDA IPC handle in the
// receiver's info (device_slots.h): the segment then holds the header and control block only.
//
// References (Direct protocol), host memory only. By default, for buffers from ncclMemAlloc:
// the sender's info names its mapping probe (transports/shm/mapped_buffers.h); a receiver that
// can map it sets the FIFO's refKind to kRefMapped, and the sender then publishes large slices
// of such buffers by reference (other buffers still go through the slots), which the receiver
// maps and reads in place: one copy. RINGCC_SHM_MAP=0 turns that off. With RINGCC_SHM_REFS=1
// instead, any buffer: the info also names a word of the sender's memory, and a receiver that
// can read it with process_vm_readv (kernels/peer_read.h) sets kRefProcess. Off by default:
// cross-memory attach copied at ~4 GB/s on the VM this was measured on, where memcpy does ~7,
// so two copies through the segment won (docs/benchmarks.md).
//
// Segment layout:
//   0        ShmHeader (magic, geometry, offsets, pids, closed flags)  one cache line
//   64       FifoControl: tail, head, posted calls, meta[nSlots]       64-byte aligned
//   4096*k   Simple slots: nSlots x slotBytes                          page aligned
//   4096*m   LL slots: nSlots x llSlotBytes (absent if 0)              page aligned
// (no slots when the header's flags say they are in the receiver's GPU)
//
// Peer state: a side that destroys its Connector (or its unconnected PendingConnection) sets
// its closed flag and wakes both counters; a side whose peer process dies is told by a pidfd
// (process_watch.h), provided the peer's pid is known in our pid namespace: each side takes it
// from the other side's info.
#pragma once

#include <cstdint>

#include "src/base/cuda_driver.h"
#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kShmInfoVersion = 6;

// The receiver's info: where its FIFO is. Its size, and that of the slots in a GPU, follow from
// the geometry, which every info's header carries (transports/transport.h).
struct ShmRecvInfo {
  char name[64];  // shm_open name, "/ringcc-<pid>-<pidns>-<n>-<random>"
  int32_t recvPid;
  uint32_t deviceSlots;      // 1: the slots are in the receiver's GPU, shared by ipcHandle
  CuIpcMemHandle ipcHandle;  // zeros when deviceSlots is 0
};

// The sender's info: who it is.
struct ShmSendInfo {
  int32_t sendPid;
  uint32_t pad;
  uint64_t probeAddr;   // an address in the sender's memory ...
  uint64_t probeValue;  // ... and what lies there: the receiver checks that it can read it
  RefRegion probeRegion;  // the sender's mapping probe (mapped_buffers.h), base 0 if none
};

Transport& shmTransport();

}  // namespace ringcc
