// Calls as their signatures (kernels/connector_device.h: OpSig) tell them, in words, for the
// error a rank reports when its peers made another call than it did.
#pragma once

#include <span>
#include <string>

#include "kernels/connector_device.h"
#include "src/plan/coll_args.h"
#include "transports/transport.h"

namespace ringcc {

// The signature of one call (count: NCCL's count): the collective, the root of rooted ones,
// the op of reducing ones (built-in ops by their value; every PreMulSum made by the user as
// ncclNumOps, since handles may be numbered differently on each rank). Inline: every call
// computes it, on the path a repeated small collective takes.
inline uint8_t callSigOp(const CollArgs& a) {
  return collReduces(a.kind) ? static_cast<uint8_t>(a.op < ncclNumOps ? a.op : ncclNumOps)
                             : kSigNoOp;
}
inline OpSig callSig(const CollArgs& a) {
  OpSig sig{};
  sig.count = a.count;
  sig.coll = static_cast<uint8_t>(a.kind);
  sig.type = static_cast<uint8_t>(a.datatype);
  sig.root = collRooted(a.kind) ? a.root : -1;
  sig.op = callSigOp(a);
  return sig;
}

// What a batch posts on its connections: the call of a lone collective, else kSigGroup.
inline OpSig batchSig(std::span<const CollArgs> ops) {
  if (ops.size() == 1 && ops[0].kind != Coll::Send && ops[0].kind != Coll::Recv)
    return callSig(ops[0]);
  OpSig sig{};
  sig.coll = kSigGroup;
  return sig;
}

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
