// oneccl_allreduce_bench: Intel oneCCL's ccl::allreduce on host buffers, measured the way
// all_reduce_perf measures ncclAllReduce, for bench/compare.
//
// The measuring program is mpi_allreduce_bench's (bench/mpi/host_allreduce_driver.h: same
// flags, sweep, timing, busbw, table, data check and JSON); it runs under OpenMPI's mpirun, one
// rank per process. MPI carries what is not measured: rank 0's oneCCL key-value store address
// (ccl::create_main_kvs) goes to the others with MPI_Bcast, the barriers and the time and error
// combination use MPI_COMM_WORLD. The measured call is
// ccl::allreduce(send, recv, count, type, op, comm).wait() (send == recv: in place).
//
// Transport: oneCCL's MPI layer needs an MPICH-ABI libmpi (libmpi.so.12), which OpenMPI is
// not, so the OFI layer is used (libfabric, the system's libfabric.so.1), with libfabric's shm
// provider between the ranks of one host. Unless already set: CCL_ATL_TRANSPORT=ofi and
// CCL_ATL_SHM=1 (oneCCL's default, 0, sends everything through tcp;ofi_rxm); and how a rank
// waits, by whether this host has a CPU for each of its ranks:
//   yes: CCL_WORKER_OFFLOAD=0, the calling thread drives the operation, as MPI_Allreduce's and
//        ringcc's callers do (oneCCL's default, 1, hands each call to a worker thread; with
//        mpirun binding each rank to one core, caller and worker share it and a call costs
//        4-15 ms of scheduler ticks; a blocking benchmark gains nothing from the overlap);
//   no:  the worker (CCL_WORKER_OFFLOAD=1) with CCL_YIELD=sched_yield and CCL_SPIN_COUNT=10:
//        the calling thread's own polling never yields, so with more ranks than CPUs a call
//        costs ~4 ms (a tick per rank) instead of ~70 us.
// The banner says what was used. See docs/benchmarks.md.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "bench/mpi/host_allreduce_driver.h"
#include "oneapi/ccl.hpp"

namespace {

using namespace ringcc::bench;

std::optional<ccl::datatype> cclType(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return ccl::datatype::int8;
    case ncclUint8: return ccl::datatype::uint8;
    case ncclInt32: return ccl::datatype::int32;
    case ncclUint32: return ccl::datatype::uint32;
    case ncclInt64: return ccl::datatype::int64;
    case ncclUint64: return ccl::datatype::uint64;
    case ncclFloat16: return ccl::datatype::float16;
    case ncclFloat32: return ccl::datatype::float32;
    case ncclFloat64: return ccl::datatype::float64;
    case ncclBfloat16: return ccl::datatype::bfloat16;
    default: return std::nullopt;
  }
}

std::optional<ccl::reduction> cclOp(OpKind op) {
  switch (op) {
    case OpKind::Sum: return ccl::reduction::sum;
    case OpKind::Prod: return ccl::reduction::prod;
    case OpKind::Max: return ccl::reduction::max;
    case OpKind::Min: return ccl::reduction::min;
    default: return std::nullopt;
  }
}

std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

[[noreturn]] void fatal(int rank, const char* what, const std::exception& e) {
  std::fprintf(stderr, "oneccl_allreduce_bench: rank %d: %s: %s\n", rank, what, e.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

class OneCclAllReduce : public HostAllReduce {
 public:
  const char* program() const override { return "oneccl_allreduce_bench"; }
  const char* libraryShort() const override { return "oneCCL"; }
  bool hasType(ncclDataType_t t) const override { return cclType(t).has_value(); }
  bool hasOp(OpKind op) const override { return cclOp(op).has_value(); }

  void init(int rank, int nranks) override {
    rank_ = rank;
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &localRanks_);
    MPI_Comm_free(&local);
    cpus_ = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    bool oversubscribed = localRanks_ > cpus_;
    // Before ccl::init, which reads the environment.
    setenv("CCL_ATL_TRANSPORT", "ofi", 0);
    setenv("CCL_ATL_SHM", "1", 0);
    setenv("CCL_WORKER_OFFLOAD", oversubscribed ? "1" : "0", 0);
    if (oversubscribed) {
      setenv("CCL_YIELD", "sched_yield", 0);
      setenv("CCL_SPIN_COUNT", "10", 0);
    }
    try {
      ccl::init();
      ccl::shared_ptr_class<ccl::kvs> kvs;
      ccl::kvs::address_type address{};
      if (rank == 0) {
        kvs = ccl::create_main_kvs();
        address = kvs->get_address();
      }
      MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
      if (rank != 0) kvs = ccl::create_kvs(address);
      comm_.emplace(ccl::create_communicator(nranks, rank, kvs));
    } catch (const std::exception& e) {
      fatal(rank, "oneCCL communicator setup failed", e);
    }
    if (comm_->size() != nranks || comm_->rank() != rank) {
      std::fprintf(stderr, "oneccl_allreduce_bench: rank %d: oneCCL says rank %d of %d\n", rank,
                   comm_->rank(), comm_->size());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    ccl::library_version v = ccl::get_library_version();
    version_ = std::to_string(v.major) + "." + std::to_string(v.minor) + "." +
               std::to_string(v.update);
    full_ = v.full ? v.full : "";
  }
  std::string banner() const override {
    std::string provider = envOr("FI_PROVIDER", "auto");
    return "oneCCL " + version_ + ": " + full_ + "; CCL_ATL_TRANSPORT " +
           envOr("CCL_ATL_TRANSPORT", "?") + ", CCL_ATL_SHM " + envOr("CCL_ATL_SHM", "?") +
           ", FI_PROVIDER " + provider + ", CCL_WORKER_OFFLOAD " +
           envOr("CCL_WORKER_OFFLOAD", "?") + ", CCL_YIELD " + envOr("CCL_YIELD", "default") +
           ", CCL_SPIN_COUNT " + envOr("CCL_SPIN_COUNT", "default") + ", CCL_ALLREDUCE " +
           envOr("CCL_ALLREDUCE", "default") + "; " + std::to_string(localRanks_) +
           " ranks on this host, " + std::to_string(cpus_) + " CPUs";
  }
  std::string libraryName() const override { return "oneCCL " + full_; }

  void allReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                 OpKind op) override {
    try {
      ccl::allreduce(send, recv, count, *cclType(type), *cclOp(op), *comm_).wait();
    } catch (const std::exception& e) {
      fatal(rank_, "ccl::allreduce failed", e);
    }
  }

  void finalize() override { comm_.reset(); }

 private:
  int rank_ = 0;
  int localRanks_ = 1, cpus_ = 1;
  std::optional<ccl::communicator> comm_;
  std::string version_, full_;
};

}  // namespace

int main(int argc, char** argv) {
  OneCclAllReduce impl;
  return runHostAllReduce(argc, argv, impl);
}
