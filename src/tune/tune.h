// The tuner: how many channels (and later which algorithm and protocol) an operation uses.
// Pure; every rank computes the same answer from the same inputs (and the same environment).
#pragma once

#include <cstddef>

namespace ringcc {

struct TuneInput {
  size_t bytes;  // the largest buffer the operation moves per rank
  int nranks;
  int maxChannels;  // channels the engine may use (NCCL_MAX_NCHANNELS)
  int minChannels;  // NCCL_MIN_NCHANNELS
};

// Channels for one collective: NCCL_MIN_NCHANNELS (default 1) within NCCL_MAX_NCHANNELS, and
// one for a single rank. The host engine drives all channels of a communicator from one
// thread, so more channels do not add bandwidth there.
int chooseChannels(const TuneInput& in);

}  // namespace ringcc

namespace ringcc {

// Alpha-beta estimate of one ring collective on the host engine, in microseconds:
// hops * (alpha + bytes per hop / bandwidth). The constants were measured on the shm
// transport; they rank choices, they do not promise a time.
struct CostModel {
  double alphaMicros = 4.0;    // per ring hop: slot hand-off and wake-up
  double bytesPerMicro = 4e3;  // 4 GB/s per hop (one reduce-copy through shared memory)
};

// `bytesPerRank` as in TuneInput; `hops` and `hopBytes` follow the collective's ring schedule.
double estimateMicros(const CostModel& model, int hops, double hopBytes);

}  // namespace ringcc
