// mpi_allreduce_bench: MPI_Allreduce measured the way all_reduce_perf measures ncclAllReduce,
// for bench/compare.
//
// Same flags (-b -e -i -f -n -w -m -c -o -d -a -J; one rank per MPI process, so -t and -g must
// stay 1), same size sweep, same timing, same bandwidth formulas and table, same data check,
// same JSON results layout: host_allreduce_driver.h, which oneccl_allreduce_bench shares.
// Types: the ones MPI has (int8 ... double); operators: sum, prod, max, min.
#include <mpi.h>

#include <cstring>
#include <string>

#include "bench/mpi/host_allreduce_driver.h"

namespace {

using namespace ringcc::bench;

MPI_Datatype mpiType(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(OpKind op) {
  switch (op) {
    case OpKind::Sum: return MPI_SUM;
    case OpKind::Prod: return MPI_PROD;
    case OpKind::Max: return MPI_MAX;
    case OpKind::Min: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

class MpiAllReduce : public HostAllReduce {
 public:
  const char* program() const override { return "mpi_allreduce_bench"; }
  const char* libraryShort() const override { return "MPI"; }
  bool hasType(ncclDataType_t t) const override { return mpiType(t) != MPI_DATATYPE_NULL; }
  bool hasOp(OpKind op) const override { return mpiOp(op) != MPI_OP_NULL; }

  void init(int, int) override {
    MPI_Get_version(&version_, &subversion_);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int libLen = 0;
    MPI_Get_library_version(lib, &libLen);
    name_.assign(lib, strnlen(lib, sizeof(lib)));
    if (size_t nl = name_.find('\n'); nl != std::string::npos) name_.resize(nl);
  }
  std::string banner() const override {
    return "MPI " + std::to_string(version_) + "." + std::to_string(subversion_) + ": " + name_;
  }
  std::string libraryName() const override { return name_; }

  void allReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                 OpKind op) override {
    MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count),
                  mpiType(type), mpiOp(op), MPI_COMM_WORLD);
  }

 private:
  int version_ = 0, subversion_ = 0;
  std::string name_;
};

}  // namespace

int main(int argc, char** argv) {
  MpiAllReduce impl;
  return runHostAllReduce(argc, argv, impl);
}
