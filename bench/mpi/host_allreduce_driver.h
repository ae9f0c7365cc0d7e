// The driver of bench/compare's reference all-reduces (mpi_allreduce_bench,
// oneccl_allreduce_bench): an all-reduce measured the way all_reduce_perf measures
// ncclAllReduce, one rank per process under mpirun.
//
// Same flags (-b -e -i -f -n -w -m -c -o -d -a -J; -t and -g must stay 1), same size sweep,
// same timing (warm-up over the size classes, one synchronising operation and a barrier, then
// -n iterations timed together; the per-rank time combined as -a says), same bandwidth
// formulas and table, same data check, same JSON results layout. MPI carries everything that
// is not measured (barriers, the time combination, the error counts); a backend supplies only
// the measured operation.
#pragma once

#include <cstddef>
#include <string>

#include "bench/perf/datatypes.h"
#include "nccl.h"

namespace ringcc::bench {

class HostAllReduce {
 public:
  virtual ~HostAllReduce() = default;
  // The program's name ("mpi_allreduce_bench") and the library's short one ("MPI"), for
  // messages.
  virtual const char* program() const = 0;
  virtual const char* libraryShort() const = 0;
  virtual bool hasType(ncclDataType_t type) const = 0;
  virtual bool hasOp(OpKind op) const = 0;
  // Called once after MPI_Init, before any operation, on every rank.
  virtual void init(int rank, int nranks) = 0;
  // The banner's parenthesis ("MPI 3.1: Open MPI v4.1.4, ...") and the JSON's "library".
  virtual std::string banner() const = 0;
  virtual std::string libraryName() const = 0;
  // The measured operation; send == recv: in place. Returns when recv holds the result.
  virtual void allReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                         OpKind op) = 0;
  // Called once before MPI_Finalize.
  virtual void finalize() {}
};

// The whole program: parses argv, MPI_Init, runs the sweep, MPI_Finalize. Returns the exit
// status (0; 7 when the data check found wrong results).
int runHostAllReduce(int argc, char** argv, HostAllReduce& impl);

}  // namespace ringcc::bench
