#include "bench/perf/coll_spec.h"

#include "src/trace/bus_bw.h"

namespace ringcc::bench {
namespace {

const CollSpec kSpecs[] = {
    {CollKind::AllReduce, "AllReduce", "all_reduce_perf", true, false},
    {CollKind::AllGather, "AllGather", "all_gather_perf", false, false},
    {CollKind::Broadcast, "Broadcast", "broadcast_perf", false, true},
    {CollKind::Reduce, "Reduce", "reduce_perf", true, true},
    {CollKind::ReduceScatter, "ReduceScatter", "reduce_scatter_perf", true, false},
    {CollKind::AlltoAll, "AlltoAll", "alltoall_perf", false, false},
    {CollKind::SendRecv, "SendRecv", "sendrecv_perf", true, false},
};

// Each rank's share of `count`, rounded down to whole 16-byte groups.
size_t alignedShare(size_t count, size_t eltSize, int nranks) {
  size_t perRank = count / static_cast<size_t>(nranks);
  size_t group = eltSize >= 16 ? 1 : 16 / eltSize;
  return perRank - perRank % group;
}

}  // namespace

const CollSpec& collSpec(CollKind kind) { return kSpecs[static_cast<int>(kind)]; }

std::optional<CollKind> collByProgram(std::string_view program) {
  for (const CollSpec& s : kSpecs)
    if (program == s.program) return s.kind;
  return std::nullopt;
}

CollCounts collCounts(CollKind kind, size_t count, size_t eltSize, int nranks) {
  CollCounts c;
  size_t n = static_cast<size_t>(nranks);
  switch (kind) {
    case CollKind::AllGather: {
      size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = base;
      c.recvCount = base * n;
      c.paramCount = base;
      c.sendInplaceOffset = base;
      break;
    }
    case CollKind::ReduceScatter: {
      size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = base * n;
      c.recvCount = base;
      c.paramCount = base;
      c.recvInplaceOffset = base;
      break;
    }
    case CollKind::AlltoAll: {
      size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = base * n;
      c.recvCount = base * n;
      c.paramCount = base;
      break;
    }
    default:  // all-reduce, broadcast, reduce, send/recv: the whole buffer everywhere
      c.sendCount = c.recvCount = c.paramCount = count;
      break;
  }
  return c;
}

// nccl-tests' conventions (src/trace/bus_bw.h, shared with the library's trace records).
static ringcc::BwShape bwShape(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce:
      return ringcc::BwShape::AllReduce;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AlltoAll:
      return ringcc::BwShape::Shares;
    default:
      return ringcc::BwShape::Plain;
  }
}

double busBwFactor(CollKind kind, int nranks) { return ringcc::busBwFactor(bwShape(kind), nranks); }

Bandwidth bandwidth(CollKind kind, size_t paramCount, size_t typeSize, double seconds, int nranks) {
  const double bytes = bwBytes(
      bwShape(kind), static_cast<double>(paramCount) * static_cast<double>(typeSize), nranks);
  Bandwidth bw;
  bw.algBw = bytes / 1.0e9 / seconds;
  bw.busBw = bw.algBw * busBwFactor(kind, nranks);
  return bw;
}

}  // namespace ringcc::bench
