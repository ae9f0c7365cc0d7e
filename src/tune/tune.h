// The tuner: for one operation, how many channels, which protocol and which chunk size, and
// what it is expected to cost. Pure; every rank computes the same answer from the same
// inputs (the same TuneConfig, read once at communicator init from the environment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/sched/builders.h"
#include "transports/connector_device.h"

namespace ringcc {

// Protocols an operation may use: bit (1 << Protocol).
constexpr uint32_t kAllProtocols = (1u << kProtoSimple) | (1u << kProtoLL) | (1u << kProtoDirect);

const char* protocolName(Protocol p);

struct TuneConfig {
  int minChannels = 1;                 // NCCL_MIN_NCHANNELS
  int maxChannels = 4;                 // NCCL_MAX_NCHANNELS
  uint32_t protocols = kAllProtocols;  // NCCL_PROTO
  uint64_t chunkBytes = 0;             // NCCL_CHUNKSIZE; 0: one slot per chunk
  // LL is chosen up to this many bytes per rank (NCCL's count times the element size), and a
  // power of two ranks all-reduce by recursive doubling up to doublingMaxBytes: where each
  // measured faster than Simple and the ring on this project's 2-core VM (docs/benchmarks.md).
  uint64_t llMaxBytes = 256;
  uint64_t doublingMaxBytes = 2048;
  bool ringOnly = false;  // NCCL_ALGO=Ring: no recursive doubling
};

// The environment's NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, NCCL_PROTO, NCCL_ALGO and
// NCCL_CHUNKSIZE (RINGCC_ twins win), each checked: a value that cannot be used gets a WARN
// naming the variable, the value, what is valid and what is used instead.
TuneConfig tuneConfigFromEnv();

// Parses a protocol list as NCCL does: names separated by commas, case-insensitive, a leading
// '^' excludes the names instead. Known: Simple, LL, Direct (ringcc's); LL128 is NCCL's and
// not provided here.
// Unknown or unsupported names are ignored and listed in *unknown (comma separated); an empty
// or all-excluding list yields kAllProtocols (and says so in *unknown).
uint32_t parseProtocols(const std::string& value, std::string* unknown);

struct TuneChoice {
  int nChannels;
  Protocol protocol;
  Algo algo;
};

// Channels and protocol for `coll` moving `bytes` bytes per rank over `nranks` ranks.
// Channels: NCCL_MIN_NCHANNELS (default 1) within NCCL_MAX_NCHANNELS, one for a single rank
// (one host thread drives every channel, so more channels add no bandwidth there). Protocol:
// LL up to llMaxBytes, Direct above (Simple if Direct is not allowed), within the allowed set.
// Algorithm: Doubling for an all-reduce of a power of two ranks up to doublingMaxBytes (unless
// NCCL_ALGO says Ring), else Ring.
TuneChoice chooseTune(const TuneConfig& config, Coll coll, uint64_t bytes, int nranks);

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
