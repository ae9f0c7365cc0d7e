// ncclUniqueId: what a rendezvous is known by.
//
// An id packs {format tag, flags, random 64-bit magic, root address} into the first bytes of
// the 128-byte ncclUniqueId (the rest is zero). The magic is the rendezvous' shared secret:
// every bootstrap connection must present it. Ids are produced two ways:
//   - bootstrapGetUniqueId (ncclGetUniqueId): without NCCL_COMM_ID, a fresh random magic and
//     a root started here, listening on an ephemeral port of the bootstrap interface (see
//     interfaces.h); with NCCL_COMM_ID=host:port, that address, a magic every process
//     computes by itself (fixed, or mixed from RINGCC_COMM_SECRET) and no root: rank 0's
//     Bootstrap::create starts it (NCCL's semantics).
//   - bootstrapNewRoot: always a fresh root here, whatever NCCL_COMM_ID says (sub-groups use
//     it, so a split never collides with the NCCL_COMM_ID port).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nccl.h"
#include "src/bootstrap/socket.h"

namespace ringcc {

// Magic of ids made from NCCL_COMM_ID without RINGCC_COMM_SECRET: public, so such a job is
// open to anyone who can reach its ports and knows ringcc (as NCCL's own jobs are).
inline constexpr uint64_t kCommIdMagic = 0x72696e6763632d31ull;  // "ringcc-1"

// The magic of an NCCL_COMM_ID job: kCommIdMagic without a secret, else 64 bits mixed from the
// secret (RINGCC_COMM_SECRET, the same string on every rank), never 0 or kCommIdMagic. Every
// process computes it by itself, as it does the root address.
uint64_t commIdMagic(const std::optional<std::string>& secret);

struct BootstrapId {
  uint64_t magic = 0;
  SocketAddress root;
  bool fromCommId = false;  // the root is started by rank 0 at Bootstrap::create
  int growFrom = 0;         // a grow id (ncclCommGetUniqueId): the size of the grown comm
};

// ncclGetUniqueId: see above. Bad NCCL_COMM_ID is ncclInvalidArgument.
ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id);

// A fresh random magic and a root started in this process.
ncclResult_t bootstrapNewRoot(ncclUniqueId* id);

// The id of ncclCommGetUniqueId: a fresh root as bootstrapNewRoot's, but single-use (it
// refuses a second rendezvous, root.h), and the id records `growFrom`, the size of the
// communicator that grows, so that a new rank can check its rank before it joins.
ncclResult_t bootstrapNewGrowRoot(int growFrom, ncclUniqueId* id);

// Packs an id (tests use it to point ranks at roots of their own making).
void bootstrapMakeId(const BootstrapId& fields, ncclUniqueId* id);

// Unpacks and checks an id: ncclInvalidArgument (naming "unique id") if it was not made by
// bootstrapMakeId or its address is malformed.
ncclResult_t bootstrapParseId(const ncclUniqueId& id, BootstrapId* out);

// 64 random bits from getrandom (or /dev/urandom).
ncclResult_t bootstrapRandom64(uint64_t* out);

}  // namespace ringcc
