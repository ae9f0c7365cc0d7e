// Calls as their signatures (transports/connector_device.h: OpSig) tell them, in words, for the
// error a rank reports when its peers made another call than it did.
#pragma once

#include <span>
#include <string>

#include "src/exec/coll_args.h"
#include "transports/connector_device.h"
#include "transports/transport.h"

namespace ringcc {

// The signature of one call (count: NCCL's count): the collective, the root of rooted ones,
// the op of reducing ones (built-in ops by their value; every PreMulSum made by the user as
// ncclNumOps, since handles may be numbered differently on each rank).
OpSig callSig(const CollArgs& a);

// What a batch posts on its connections: the call of a lone collective, else kSigGroup.
OpSig batchSig(std::span<const CollArgs> ops);

// Posts this side's batch number and call on `conn` (FifoControl::posted).
void postCall(const Connector& conn, uint64_t seq, const OpSig& sig);

// The call the other side of `conn` posted; false if it posted none or is writing it now.
bool peerPostedCall(const Connector& conn, PostedCall* out);

// "float32" for ncclFloat32; "unknown type" out of range.
const char* typeName(uint8_t type);
// "sum" for ncclSum, "a PreMulSum" for ncclNumOps (any user operator); "unknown op" beyond.
const char* opName(uint8_t op);

// "AllReduce(1000 x float32, sum)", "Broadcast(16 x int8, root 2)", "send/recv of 400 bytes".
std::string describeCall(const OpSig& sig);

}  // namespace ringcc
