// ringcc's extensions (include/ringcc.h).
#include "ringcc.h"

#include <vector>

#include "kernels/dtypes.h"
#include "src/adasum/adasum.h"
#include "src/api/api.h"
#include "src/exec/group.h"

using namespace ringcc;

extern "C" __attribute__((visibility("default"))) ncclResult_t ringccGetVersion(int* version) {
  RINGCC_CHECK(checkNotNull(version, "version", "ringccGetVersion"));
  *version = RINGCC_VERSION_CODE;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t ringccCommMemoryKind(
    ncclComm_t comm, ringccMemKind_t* kind) {
  ApiGuard guard;
  RINGCC_CHECK(guard.enter(comm, "ringccCommMemoryKind"));
  RINGCC_CHECK(checkNotNull(kind, "kind", "ringccCommMemoryKind"));
  *kind = comm->memKind == MemoryKind::Cuda ? ringccMemCuda : ringccMemHost;
  return ncclSuccess;
}

namespace {

// ncclInvalidArgument unless segments[0..nsegments) is a list of counts summing to count.
ncclResult_t checkSegments(const size_t* segments, int nsegments, size_t count,
                           const char* where) {
  if (nsegments < 0)
    return fail(ncclInvalidArgument, where, "nsegments is %d; it must be >= 0", nsegments);
  if (nsegments == 0) return ncclSuccess;
  RINGCC_CHECK(checkNotNull(segments, "segments (with nsegments > 0)", where));
  size_t sum = 0;
  for (int k = 0; k < nsegments; ++k)
    if (__builtin_add_overflow(sum, segments[k], &sum))
      return fail(ncclInvalidArgument, where, "segments: the counts overflow size_t at [%d]", k);
  if (sum != count)
    return fail(ncclInvalidArgument, where,
                "segments: the %d counts sum to %zu elements, not count (%zu)", nsegments, sum,
                count);
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) ncclResult_t ringccAllReduceAdasum(
    const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    const size_t* segments, int nsegments, ncclComm_t comm, cudaStream_t stream) {
  const char* where = "ringccAllReduceAdasum";
  ApiGuard guard;
  RINGCC_CHECK(guard.enterReady(comm, where));
  const int type = static_cast<int>(datatype);
  if (type != ncclFloat16 && type != ncclBfloat16 && type != ncclFloat32 && type != ncclFloat64)
    return fail(ncclInvalidArgument, where,
                "datatype %d: Adasum takes ncclFloat16, ncclBfloat16, ncclFloat32 or "
                "ncclFloat64",
                type);
  RINGCC_CHECK(checkSegments(segments, nsegments, count, where));
  size_t bytes;
  if (__builtin_mul_overflow(count, dataTypeSize(datatype), &bytes))
    return fail(ncclInvalidArgument, where, "count %zu overflows the addressable size", count);
  if (count > 0) {
    RINGCC_CHECK(checkNotNull(sendbuff, "sendbuff", where));
    RINGCC_CHECK(checkNotNull(recvbuff, "recvbuff", where));
    RINGCC_CHECK(comm->checkedBuffers.check(comm->memKind, sendbuff, recvbuff, where));
  }
  if (!groupActive())
    return adasumAllReduce(sendbuff, recvbuff, count, datatype, segments, nsegments, comm, stream);
  // In a group it runs at ncclGroupEnd, after the group's operations; the caller may free
  // its segment list as soon as this returns (as NCCL lets a PreMulSum scalar go).
  std::vector<size_t> segs(segments, segments + nsegments);
  CollArgs like;  // what ncclGroupSimulateEnd counts: an all-reduce of the same size
  like.kind = Coll::AllReduce;
  like.count = count;
  like.datatype = datatype;
  like.comm = comm;
  return enqueueAfterOps(like, [=, segs = std::move(segs)] {
    return adasumAllReduce(sendbuff, recvbuff, count, datatype, segs.data(),
                           static_cast<int>(segs.size()), comm, stream);
  });
}
