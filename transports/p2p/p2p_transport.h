// p2p: ranks in one process. The receiver allocates the FIFO (on the heap for host
// communicators, in its GPU's memory for CUDA ones: transports/p2p/fifo_memory.h) and its info
// carries the address; the sender uses the very same memory. The sender's info carries only
// its pid, memory kind and device, which the receiver checks (the geometry comes in every
// info's header: transports/transport.h). A CUDA sender on
// another GPU than its receiver enables peer access to the receiver's context first. No
// progress thread: both sides share the memory, and the doorbell is null.
//
// The block is reference counted by the two sides (PendingConnection, then Connector), so
// whichever side is released last frees it: a peer that is still waiting after the other side
// closed (abort) reads valid memory, sees PeerState::Closed and fails cleanly instead of
// touching freed memory.
//
// A receiver's info may outlive its receiver: a rank that aborts, or fails an operation and
// closes its connections, while its info still waits in a peer's bootstrap inbox. So the
// sender never follows the address on trust: it looks the block's serial number up in the
// process's table of blocks whose receiver still lives, and takes its reference under that
// table's lock. A stale info is ncclRemoteError, as attaching to a closed shm segment is.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kP2pInfoVersion = 6;

// The receiver's info: where its FIFO is.
struct P2pRecvInfo {
  uint64_t block;    // address of the P2pBlock, meaningful in process `pid` only
  uint64_t serial;   // names the block while its receiver lives (addresses get reused)
  uint64_t context;  // CUDA: the receiver's context (CuContext), for peer access
  int32_t pid;
  uint32_t memory;  // MemoryKind of the FIFO
  int32_t cudaDev;  // CUDA: the receiver's device, else -1
  uint32_t pinned;  // CUDA: 1 when the FIFO is pinned host memory (the GPUs lack peer access)
};

// The sender's info: who it is.
struct P2pSendInfo {
  int32_t pid;
  uint32_t memory;  // MemoryKind of the sender's communicator
  int32_t cudaDev;
  uint32_t pad;
};

Transport& p2pTransport();

}  // namespace ringcc
