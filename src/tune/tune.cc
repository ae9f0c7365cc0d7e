#include "src/tune/tune.h"

#include <algorithm>

namespace ringcc {

int chooseChannels(const TuneInput& in) {
  // One engine thread drives every channel of a host communicator, so a second channel adds
  // no bandwidth (measured: none at 1-256 MiB on 2 ranks) and only costs its connections.
  // NCCL_MIN_NCHANNELS still asks for more, within NCCL_MAX_NCHANNELS.
  int maxCh = std::max(1, in.maxChannels);
  if (in.nranks == 1 || in.bytes == 0) return 1;
  return std::clamp(in.minChannels, 1, maxCh);
}

}  // namespace ringcc

namespace ringcc {

double estimateMicros(const CostModel& model, int hops, double hopBytes) {
  return hops * (model.alphaMicros + hopBytes / model.bytesPerMicro);
}

}  // namespace ringcc
