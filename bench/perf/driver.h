// The perf tools' engine: one call runs a whole nccl-tests-style benchmark of one collective.
//
// Ranks: each process runs -t threads, each thread drives -g communicators (through
// ncclGroupStart/End when more than one); processes come from ringcc-run or mpirun (see
// process_group.h). Global rank = (process * nThreads + thread) * nGpus + i.
// Per size it times out-of-place and in-place operations (-w warm-up, -n timed iterations of
// -m grouped operations), combines the time over ranks as -a says, checks the data (-c) and
// prints one row; rank 0's first thread prints, and writes -J's JSON.
//
// Buffers: host memory for host communicators (every call has completed when it returns);
// device memory and a stream per rank for CUDA ones, where the CUDA driver has GPUs
// (perf_cuda.h). A communicator that reports device memory (ringccCommMemoryKind) when the
// tool has no driver stops the run with a CUDA error saying so.
#pragma once

#include <cstdio>

#include "bench/perf/coll_spec.h"
#include "bench/perf/comm_api.h"

namespace ringcc {
struct CudaDriver;
}

namespace ringcc::bench {

// Exit codes, nccl-tests' testResult_t; 255 for a bad command line.
enum PerfExit {
  kPerfSuccess = 0,
  kPerfInternalError = 1,
  kPerfCudaError = 2,
  kPerfNcclError = 3,
  kPerfTimeout = 4,
  kPerfNotImplemented = 5,
  kPerfInvalidUsage = 6,
  kPerfWrongData = 7,  // out-of-bounds values, or average bus bandwidth under NCCL_TESTS_MIN_BW
  kPerfBadArguments = 255,
};

struct PerfIo {
  FILE* out = stdout;
  FILE* err = stderr;
  // The CUDA driver to use for device buffers; null: libcuda.so.1 if it loads (perf_cuda.h).
  const CudaDriver* cuda = nullptr;
};

// Runs the tool for `kind` with the command line argc/argv (argv[0]: program name). May call
// MPI_Init/Finalize through argc/argv on MPI builds under mpirun.
int runPerf(CollKind kind, int argc, char** argv, const CommApi& api, PerfIo io = {});

}  // namespace ringcc::bench
