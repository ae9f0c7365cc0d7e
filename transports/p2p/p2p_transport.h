// p2p: ranks in one process. The receiver allocates the FIFO on the heap and the blob carries
// its address; the sender uses the very same memory. Host memory only (CUDA peer mappings will
// be their own transport).
//
// The block is reference counted by the two Connectors, so whichever side is destroyed last
// frees it: a peer that is still waiting after the other side closed (abort) reads valid
// memory, sees PeerState::Closed and fails cleanly instead of touching freed memory.
//
// A blob may outlive its receiver: a rank that aborts, or fails an operation and closes its
// connections, while its offer still waits in a peer's bootstrap inbox. So the sender never
// follows the address on trust: it looks the block's serial number up in the process's table
// of blocks whose receiver still lives, and takes its reference under that table's lock. A
// stale blob is ncclRemoteError, as attaching to a closed shm segment is.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kP2pBlobVersion = 2;

// The p2p blob's payload.
struct P2pBlob {
  uint64_t block;   // address of the P2pBlock, meaningful in process `pid` only
  uint64_t serial;  // names the block while its receiver lives (addresses get reused)
  int32_t pid;
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t pad;
};

Transport& p2pTransport();

}  // namespace ringcc
