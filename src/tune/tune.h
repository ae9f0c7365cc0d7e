// The tuner: how many channels (and later which algorithm and protocol) an operation uses,
// and what it is expected to cost. Pure; every rank computes the same answer from the same
// inputs (and the same environment).
#pragma once

#include <cstddef>

#include "src/sched/builders.h"

namespace ringcc {

struct TuneInput {
  int nranks;
  int maxChannels;  // channels the engine may use (NCCL_MAX_NCHANNELS)
  int minChannels;  // NCCL_MIN_NCHANNELS
};

// Channels for one collective: NCCL_MIN_NCHANNELS (default 1) within NCCL_MAX_NCHANNELS, and
// one for a single rank. The host engine drives all channels of a communicator from one
// thread, so more channels do not add bandwidth there.
int chooseChannels(const TuneInput& in);

// Alpha-beta model of the host engine: hops * (alpha + bytes per hop / bandwidth). The
// constants were measured on the shm transport; they rank choices, they do not promise a time.
struct CostModel {
  double alphaMicros = 4.0;    // per ring hop: slot hand-off and wake-up
  double bytesPerMicro = 4e3;  // 4 GB/s per hop (one reduce-copy through shared memory)
};

// Estimated microseconds of `coll` moving `bytes` (NCCL's count times the element size) over
// `nranks` ranks, with the hops and bytes per hop of its ring or chain schedule.
double estimateCollMicros(const CostModel& model, Coll coll, double bytes, int nranks);

}  // namespace ringcc
