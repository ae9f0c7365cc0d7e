// What travels on bootstrap sockets: fixed-size headers, their kinds and limits.
//
// Every connection starts with a header that carries the rendezvous magic; a peer that does
// not send it in time, or sends something else, is dropped and logged, never believed.
// Lengths announced by a peer are checked against the limits here before anything is
// allocated. Integers are in host byte order (ranks share it; the magic check fails when
// they do not).
//
//   rank -> root   RootHello
//   root -> rank   RootReply, then (status kOk) nranks x WireAddress, indexed by rank
//   rank -> rank   PeerHeader{kRingHello} opens the ring link prev -> me; after it, ring
//                  steps flow as PeerHeader{kRingStep} + data.
//                  PeerHeader{kMessage} + size bytes: one tagged send/recv message; a
//                  connection carries any number of them, from one rank, in order.
#pragma once

#include <cstdint>
#include <type_traits>

#include "src/bootstrap/socket.h"

namespace ringcc::wire {

inline constexpr uint32_t kHello = 0x48454c4f;      // "HELO"
inline constexpr uint32_t kRingHello = 0x52494e47;  // "RING"
inline constexpr uint32_t kRingStep = 0x53544550;   // "STEP"
inline constexpr uint32_t kMessage = 0x4d534720;    // "MSG "

// Most ranks one rendezvous accepts (bounds the root's tables).
inline constexpr int32_t kMaxRanks = 1 << 20;
// Largest tagged message, and most bytes of unclaimed messages a Bootstrap holds.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxQueuedBytes = uint64_t{256} << 20;
// Most connections that have not yet proven the magic, per listener.
inline constexpr size_t kMaxPendingConnections = 256;

struct RootHello {
  uint64_t magic;
  uint32_t kind;  // kHello
  int32_t rank;
  int32_t nranks;
  uint32_t reserved;
  WireAddress listen;  // where this rank accepts peer connections
};
static_assert(sizeof(RootHello) == 48);

enum RootStatus : uint32_t {
  kOk = 0,
  kBadNranks = 1,       // nranks out of range
  kNranksMismatch = 2,  // differs from the ranks that came first
  kBadRank = 3,         // rank out of [0, nranks)
  kDuplicateRank = 4,   // another live connection already is this rank
  kBadAddress = 5,      // listen address malformed
  kRootTimeout = 6,     // the root gave up waiting for the other ranks
  kIdConsumed = 7,      // a single-use rendezvous (a grow id) that already completed
};

struct RootReply {
  uint64_t magic;
  uint32_t status;  // RootStatus
  int32_t nranks;   // nranks of the rendezvous (0 if not known yet)
  int32_t arrived;  // ranks present when the root replied
  uint32_t reserved;
};
static_assert(sizeof(RootReply) == 24);

struct PeerHeader {
  uint64_t magic;
  uint32_t kind;  // kRingHello, kRingStep, kMessage
  int32_t from;   // sender's rank
  int32_t to;     // receiver's rank
  int32_t tag;    // kMessage: the tag; kRingStep: the operation's sequence number
  uint64_t size;  // bytes that follow this header
};
static_assert(sizeof(PeerHeader) == 32);

static_assert(std::is_trivially_copyable_v<RootHello> && std::is_trivially_copyable_v<RootReply> &&
              std::is_trivially_copyable_v<PeerHeader>);

const char* rootStatusText(uint32_t status);

}  // namespace ringcc::wire
