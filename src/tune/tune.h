// The tuner: how many channels (and later which algorithm and protocol) an operation uses.
// Pure; every rank computes the same answer from the same inputs (and the same environment).
#pragma once

#include <cstddef>

namespace ringcc {

struct TuneInput {
  size_t bytes;       // the largest buffer the operation moves per rank
  int nranks;
  int maxChannels;    // channels the engine may use (NCCL_MAX_NCHANNELS)
  int minChannels;    // NCCL_MIN_NCHANNELS
};

// Channels for one collective. The host engine drives all channels of a communicator from
// one thread, so extra channels only add per-slice overhead there: one channel unless
// NCCL_MIN_NCHANNELS asks for more, or the message is large enough that splitting keeps
// several connections' FIFOs busy at once.
int chooseChannels(const TuneInput& in);

}  // namespace ringcc
