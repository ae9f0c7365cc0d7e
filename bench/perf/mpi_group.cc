// The MPI process group (built only when meson finds MPI): nccl-tests' way of running one
// rank set per process under mpirun.
#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "bench/perf/process_group.h"

namespace ringcc::bench {
namespace {

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup(int* argc, char*** argv) {
    MPI_Init(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    // Processes on the same host, by host name (nccl-tests hashes hostname + boot id).
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    std::string all(static_cast<size_t>(size_) * sizeof(host), '\0');
    MPI_Allgather(host, sizeof(host), MPI_CHAR, all.data(), sizeof(host), MPI_CHAR,
                  MPI_COMM_WORLD);
    localRank_ = 0;
    localSize_ = 0;
    for (int p = 0; p < size_; ++p) {
      if (std::strncmp(all.data() + p * sizeof(host), host, sizeof(host)) != 0) continue;
      if (p < rank_) ++localRank_;
      ++localSize_;
    }
    source_ = "MPI";
  }
  bool allreduce(double* v, size_t n, CtrlReduce op, std::string& err) override {
    MPI_Op mop = op == CtrlReduce::Sum ? MPI_SUM : op == CtrlReduce::Min ? MPI_MIN : MPI_MAX;
    if (MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, mop, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
      err = "MPI_Allreduce failed";
      return false;
    }
    return true;
  }
  bool gather(const std::string& mine, std::vector<std::string>& all,
              std::string& err) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), offs(size_);
    if (MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS) {
      err = "MPI_Allgather failed";
      return false;
    }
    int total = 0;
    for (int p = 0; p < size_; ++p) {
      offs[p] = total;
      total += lens[p];
    }
    std::string buf(static_cast<size_t>(total), '\0');
    if (MPI_Allgatherv(mine.data(), len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR,
                       MPI_COMM_WORLD) != MPI_SUCCESS) {
      err = "MPI_Allgatherv failed";
      return false;
    }
    all.clear();
    for (int p = 0; p < size_; ++p) all.push_back(buf.substr(offs[p], lens[p]));
    return true;
  }
  bool shareId(ncclUniqueId& id, bool& have, std::string& err) override {
    if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
      err = "MPI_Bcast of the unique id failed";
      return false;
    }
    have = true;
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
  }
  void finalize() override { MPI_Finalize(); }
};

}  // namespace

std::unique_ptr<ProcessGroup> makeMpiGroup(int* argc, char*** argv) {
  return std::make_unique<MpiGroup>(argc, argv);
}

}  // namespace ringcc::bench
