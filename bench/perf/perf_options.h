// Command line of the perf tools: nccl-tests' flags, meanings and defaults.
//
// parsePerfArgs is pure (no globals, no output): it fills PerfOptions or says why it cannot.
// Flags nccl-tests has for GPUs only (-G, -R, -x, -D, -V, -M, -S, -u) are accepted and listed
// in `ignored`, so scripts written for nccl-tests run unchanged.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nccl.h"

namespace ringcc::bench {

enum class Average { Rank0 = 0, Avg = 1, Min = 2, Max = 3 };

struct PerfOptions {
  int nThreads = 1;                  // -t  threads per process
  int nGpus = 1;                     // -g  ranks (communicators) per thread
  size_t minBytes = 32u << 20;       // -b
  size_t maxBytes = 32u << 20;       // -e
  size_t stepBytes = 1u << 20;       // -i  used when stepFactor <= 1
  size_t stepFactor = 1;             // -f  multiply when > 1
  int iters = 20;                    // -n
  int aggIters = 1;                  // -m  operations grouped per iteration
  int warmupIters = 1;               // -w
  int runCycles = 1;                 // -N  0: repeat forever
  int parallelInit = 0;              // -p  threads create their own communicators
  int check = 1;                     // -c  data-check iterations (0: off)
  std::vector<int> ops;              // -o  OpKind values; empty: the default (sum)
  std::vector<ncclDataType_t> types; // -d  empty: the default (float)
  int root = 0;                      // -r  -1: every rank in turn
  int blocking = 0;                  // -z  1: barrier after each operation
  int streamNull = 0;                // -y  (host communicators always use a NULL stream)
  int timeoutSec = 0;                // -T  0: none
  int reportCpuTime = 0;             // -C
  int localRegister = 0;             // -R  1, 2: host buffers from ncclMemAlloc
  Average average = Average::Avg;    // -a
  std::string jsonFile;              // -J  "" none
  std::vector<std::string> ignored;  // accepted GPU-only flags, as given ("-G 1")
};

enum class ParseStatus { Run, Help, Error };

struct ParseResult {
  ParseStatus status = ParseStatus::Run;
  std::string error;  // for Error: one line naming the flag
};

// argv[0] is the program name. Accepts "-b 8", "-b8", "--minbytes 8", "--minbytes=8".
ParseResult parsePerfArgs(int argc, const char* const* argv, PerfOptions& opts);

// nccl-tests' sizes: a number (fractions allowed) with an optional K, M or G (binary, either
// case). nullopt if malformed or negative.
std::optional<size_t> parseSize(std::string_view text);

// The usage text printed by -h.
std::string perfUsage(const char* program);

// Sizes a run measures: minBytes, then times stepFactor (when > 1) or plus stepBytes, while
// <= maxBytes. With a factor, 0 is followed by 1 (0 times anything stays 0). A zero stepBytes
// without a factor yields minBytes alone. Stops before overflowing.
std::vector<size_t> sizeSweep(size_t minBytes, size_t maxBytes, size_t stepBytes,
                              size_t stepFactor);

}  // namespace ringcc::bench
