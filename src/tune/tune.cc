#include "src/tune/tune.h"

#include <algorithm>

namespace ringcc {

int chooseChannels(const TuneInput& in) {
  int maxCh = std::max(1, in.maxChannels);
  int minCh = std::clamp(in.minChannels, 1, maxCh);
  // Below this, a single connection's FIFO already hides the per-slot hand-off.
  constexpr size_t kBytesPerExtraChannel = size_t{8} << 20;
  int bySize = static_cast<int>(std::min<size_t>(maxCh, 1 + in.bytes / kBytesPerExtraChannel));
  if (in.nranks == 1) bySize = 1;
  return std::clamp(bySize, minCh, maxCh);
}

}  // namespace ringcc

namespace ringcc {

double estimateMicros(const CostModel& model, int hops, double hopBytes) {
  return hops * (model.alphaMicros + hopBytes / model.bytesPerMicro);
}

}  // namespace ringcc
