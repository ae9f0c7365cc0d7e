// p2p: ranks in one process. The receiver allocates the FIFO on the heap and the blob carries
// its address; the sender uses the very same memory. Host memory only (CUDA peer mappings will
// be their own transport).
//
// The block is reference counted by the two Connectors, so whichever side is destroyed last
// frees it: a peer that is still waiting after the other side closed (abort) reads valid
// memory, sees PeerState::Closed and fails cleanly instead of touching freed memory.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kP2pBlobVersion = 1;

// The p2p blob's payload.
struct P2pBlob {
  uint64_t block;  // address of the P2pBlock, meaningful in process `pid` only
  int32_t pid;
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t pad;
};

Transport& p2pTransport();

}  // namespace ringcc
