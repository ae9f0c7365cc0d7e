// Collective, point-to-point and group entry points: check the arguments, pack a CollArgs,
// hand it to the group layer. A refused call leaves the communicator usable.
#include <cstring>

#include "kernels/dtypes.h"
#include "src/api/api.h"
#include "src/base/mem_kind.h"
#include "src/exec/group.h"
#include "src/plan/coll_args.h"
#include "src/trace/trace.h"

using namespace ringcc;

namespace {

// Which buffers a rank must supply, given its role.
struct BufferNeeds {
  bool send;
  bool recv;
};

BufferNeeds buffersNeeded(Coll kind, bool isRoot) {
  switch (kind) {
    case Coll::Broadcast:
      return {isRoot, true};
    case Coll::Reduce:
      return {true, isRoot};
    case Coll::Gather:
      return {true, isRoot};
    case Coll::Scatter:
      return {isRoot, true};
    case Coll::Send:
      return {true, false};
    case Coll::Recv:
      return {false, true};
    default:
      return {true, true};
  }
}

bool hasRootOrPeer(Coll kind) {
  switch (kind) {
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::Gather:
    case Coll::Scatter:
    case Coll::Send:
    case Coll::Recv:
      return true;
    default:
      return false;
  }
}

// The integer a caller passed as an enum. C callers may pass any int; loading it as the C++
// enum type is undefined when it lies outside the enumerators' range, so checks read the bytes.
template <typename Enum>
int rawEnum(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "NCCL's enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// `args` by value: the entry point builds it in place, and it is completed here (operator,
// call time) without another copy.
ncclResult_t checkAndEnqueue(CollArgs args, const char* where) {
  const CollArgs& a = args;
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(a.comm, where));
  const ncclComm* comm = a.comm;
  const int datatype = rawEnum(a.datatype);
  if (datatype < 0 || datatype >= ncclNumTypes)
    return fail(ncclInvalidArgument, where, "datatype %d is not a valid ncclDataType_t", datatype);
  // Traced calls inside a group note when they were made; a lone call's is when it starts.
  if (comm->tracer && groupActive()) [[unlikely]]
    args.callUs = traceNowUs();
  if (!collReduces(a.kind)) {
    args.redOp = makeRedOp(ncclSum, a.datatype, comm->nranks);
  } else {
    if (rawEnum(a.op) < 0)
      return fail(ncclInvalidArgument, where, "op %d is not a valid ncclRedOp_t", rawEnum(a.op));
    if (a.op >= ncclNumOps) {
      UserOp userOp;
      if (!comm->userOps.find(a.op, &userOp))
        return fail(ncclInvalidArgument, where,
                    "op %d is neither a built-in operator nor a live operator of this "
                    "communicator",
                    static_cast<int>(a.op));
      if (userOp.datatype != a.datatype)
        return fail(ncclInvalidArgument, where, "op %d was created for datatype %d, not %d",
                    static_cast<int>(a.op), static_cast<int>(userOp.datatype),
                    static_cast<int>(a.datatype));
      args.redOp = makePreMulSum(
          a.datatype, userOp.residence == ncclScalarDevice ? userOp.scalarPtr : userOp.scalar,
          userOp.residence == ncclScalarDevice);
    } else {
      args.redOp = makeRedOp(a.op, a.datatype, comm->nranks);
    }
  }
  if (hasRootOrPeer(a.kind) && (a.root < 0 || a.root >= comm->nranks)) {
    const char* what = (a.kind == Coll::Send || a.kind == Coll::Recv) ? "peer" : "root";
    return fail(ncclInvalidArgument, where, "%s %d is out of range [0, %d)", what, a.root,
                comm->nranks);
  }
  // Overflow: the largest buffer any rank touches is count * nranks elements.
  size_t bytes;
  if (__builtin_mul_overflow(a.count, dataTypeSize(a.datatype), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<size_t>(comm->nranks), &bytes) ||
      bytes > (SIZE_MAX >> 2))
    return fail(ncclInvalidArgument, where, "count %zu overflows the addressable size", a.count);
  if (a.count > 0) {
    BufferNeeds needs = buffersNeeded(a.kind, comm->rank == a.root);
    if (needs.send && a.sendbuff == nullptr)
      return fail(ncclInvalidArgument, where, "sendbuff is NULL with count %zu", a.count);
    if (needs.recv && a.recvbuff == nullptr)
      return fail(ncclInvalidArgument, where, "recvbuff is NULL with count %zu", a.count);
    RINGCC_CHECK(comm->checkedBuffers.check(comm->memKind, needs.send ? a.sendbuff : nullptr,
                                            needs.recv ? a.recvbuff : nullptr, where));
  }
  return enqueueOp(args);
}

CollArgs makeArgs(Coll kind, const void* sendbuff, void* recvbuff, size_t count,
                  ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                  cudaStream_t stream) {
  CollArgs a;
  a.kind = kind;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.count = count;
  a.datatype = datatype;
  a.op = op;
  a.root = root;
  a.comm = comm;
  a.stream = stream;
  return a;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream),
      "ncclAllReduce");
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
      "ncclBroadcast");
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Broadcast, buff, buff, count, datatype, ncclSum, root, comm, stream),
      "ncclBcast");
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream),
      "ncclReduce");
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream),
      "ncclAllGather");
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream),
      "ncclReduceScatter");
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::AllToAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream),
      "ncclAlltoAll");
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
      "ncclGather");
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
      "ncclScatter");
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Send, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream),
      "ncclSend");
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return checkAndEnqueue(
      makeArgs(Coll::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream),
      "ncclRecv");
}

NCCL_API(ncclResult_t, ncclGroupStart, void) { return groupStart(); }

NCCL_API(ncclResult_t, ncclGroupEnd, void) { return groupEnd(); }

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  RINGCC_CHECK(checkNotNull(simInfo, "simInfo", "ncclGroupSimulateEnd"));
  if (simInfo->magic != 0x74685283)
    return fail(ncclInvalidArgument, "ncclGroupSimulateEnd",
                "simInfo: magic is 0x%x; initialize it with NCCL_SIM_INFO_INITIALIZER",
                simInfo->magic);
  return groupSimulateEnd(&simInfo->estimatedTime);
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* where = "ncclRedOpCreatePreMulSum";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  RINGCC_CHECK(checkNotNull(op, "op (output pointer)", where));
  RINGCC_CHECK(checkNotNull(scalar, "scalar", where));
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes)
    return fail(ncclInvalidArgument, where, "datatype %d is not a valid ncclDataType_t",
                static_cast<int>(datatype));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return fail(ncclInvalidArgument, where, "residence %d is not a ncclScalarResidence_t",
                static_cast<int>(residence));
  UserOp u;
  u.datatype = datatype;
  u.residence = residence;
  if (residence == ncclScalarHostImmediate)
    std::memcpy(u.scalar, scalar, dataTypeSize(datatype));
  else
    u.scalarPtr = scalar;
  *op = comm->userOps.add(u);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  const char* where = "ncclRedOpDestroy";
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, where));
  if (op < ncclNumOps)
    return fail(ncclInvalidArgument, where, "op %d is a built-in operator", static_cast<int>(op));
  if (!comm->userOps.remove(op))
    return fail(ncclInvalidArgument, where, "op %d is not a live operator of this communicator",
                static_cast<int>(op));
  return ncclSuccess;
}
