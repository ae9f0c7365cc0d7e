// The tuner: for one operation, which algorithm, how many channels, which protocol and which
// chunk size, and what it is expected to cost (by the cost model, src/tune/cost_model.h). Pure;
// every rank computes the same answer from the same inputs (the same TuneConfig, read once at
// communicator init from the environment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/connector_device.h"
#include "src/sched/builders.h"
#include "src/tune/cost_model.h"

namespace ringcc {

// Protocols an operation may use: bit (1 << Protocol).
constexpr uint32_t kAllProtocols = (1u << kProtoSimple) | (1u << kProtoLL) | (1u << kProtoDirect);

const char* protocolName(Protocol p);

// Algorithms an operation may use: bit (1 << Algo).
constexpr uint32_t algoBit(Algo a) { return 1u << static_cast<unsigned>(a); }
constexpr uint32_t kAllAlgos = algoBit(Algo::Ring) | algoBit(Algo::Doubling) | algoBit(Algo::Tree);

struct TuneConfig {
  int minChannels = 1;                 // NCCL_MIN_NCHANNELS
  int maxChannels = 4;                 // NCCL_MAX_NCHANNELS
  uint32_t protocols = kAllProtocols;  // NCCL_PROTO
  uint32_t algos = kAllAlgos;          // NCCL_ALGO
  uint64_t chunkBytes = 0;             // NCCL_CHUNKSIZE; 0: one slot per chunk
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

// Parses an algorithm list as NCCL does (names separated by commas, case-insensitive, a
// leading '^' excludes them). Known: Ring, Tree, Doubling (ringcc's recursive doubling). NCCL's
// CollNetDirect, CollNetChain, NVLS, NVLSTree and PAT are not provided: listed in *unknown with
// the other unusable names; an empty or all-excluding list yields kAllAlgos.
uint32_t parseAlgos(const std::string& value, std::string* unknown);

struct TuneChoice {
  int nChannels = 1;
  Protocol protocol = kProtoSimple;
  Algo algo = Algo::Ring;
  double micros = 0;  // the model's estimate
  // Set when the allowed algorithms cannot run this operation (NCCL_ALGO=Tree for an
  // all-gather): Ring is used instead, and this says why (the caller WARNs once).
  const char* fallback = nullptr;
};

// The cheapest allowed (algorithm, protocol, channel count) for `coll` moving `bytes` bytes per
// rank (NCCL's count times the element size) over `nranks` ranks, by the cost model
// (src/tune/cost_model.h) on `links`. Channels within [NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS]
// (one for a single rank); protocols and algorithms within NCCL_PROTO and NCCL_ALGO. Ties go
// to the earlier algorithm (Ring, Doubling, Tree), protocol (Simple, LL, Direct), fewer
// channels. Doubling only up to 2 KiB per rank (where it was measured), unless NCCL_ALGO leaves
// nothing else.
TuneChoice chooseTune(const TuneConfig& config, const LinkFigures& links, Coll coll, uint64_t bytes,
                      int nranks);

}  // namespace ringcc
