#include "src/tune/tune.h"

#include <algorithm>

namespace ringcc {
namespace {

double hopsCost(const CostModel& model, int hops, double hopBytes) {
  return hops * (model.alphaMicros + hopBytes / model.bytesPerMicro);
}

}  // namespace

int chooseChannels(const TuneInput& in) {
  // One engine thread drives every channel of a host communicator, so a second channel adds
  // no bandwidth (measured: none at 1-256 MiB on 2 ranks) and only costs its connections.
  // NCCL_MIN_NCHANNELS still asks for more, within NCCL_MAX_NCHANNELS.
  int maxCh = std::max(1, in.maxChannels);
  if (in.nranks == 1) return 1;
  return std::clamp(in.minChannels, 1, maxCh);
}

double estimateCollMicros(const CostModel& model, Coll coll, double bytes, int nranks) {
  const int n = nranks;
  if (n == 1) return hopsCost(model, 1, bytes);
  switch (coll) {
    case Coll::AllReduce:
      return hopsCost(model, 2 * (n - 1), bytes / n);
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return hopsCost(model, n - 1, bytes);
    case Coll::Gather:
    case Coll::Scatter:
      return hopsCost(model, 1, bytes * (n - 1));
    case Coll::Send:
    case Coll::Recv:
      return hopsCost(model, 1, bytes);
    default:
      return hopsCost(model, n - 1, bytes);  // chains: broadcast, reduce
  }
}

}  // namespace ringcc
