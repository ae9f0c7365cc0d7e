// The processes of one perf run, and the few things the driver does across them without the
// library under test: combine numbers, gather text, share the unique id.
//
// Where the processes come from:
//   - ringcc-run: RINGCC_RANK / RINGCC_NRANKS / RINGCC_LOCAL_RANK / RINGCC_UNIQUE_ID, and the
//     launcher's control channel (RINGCC_CTRL_FD) for the cross-process steps;
//   - mpirun, when the tools were built with MPI (meson -Dmpi=enabled|auto) and an MPI
//     launcher's variables are present: MPI_Allreduce, MPI_Allgather, MPI_Bcast as nccl-tests;
//   - otherwise one process (all ranks are threads: -t, -g).
// One thread per process calls these (the ThreadReducer's leader, or main).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/launcher/launch_protocol.h"
#include "nccl.h"

namespace ringcc::bench {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int size() const { return size_; }
  int rank() const { return rank_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  const char* source() const { return source_; }

  // In place over all processes.
  virtual bool allreduce(double* values, size_t n, CtrlReduce op, std::string& err) = 0;
  // Everyone gets every process's string, in rank order.
  virtual bool gather(const std::string& mine, std::vector<std::string>& all,
                      std::string& err) = 0;
  // Makes every process hold `id` as process 0 holds it (`have`: whether this process
  // already holds it, e.g. from the launcher's variables).
  virtual bool shareId(ncclUniqueId& id, bool& have, std::string& err) = 0;
  // Whether every process already holds the id (from the launcher), so none must create one.
  virtual bool providesId() const { return false; }
  virtual void finalize() {}

 protected:
  int size_ = 1, rank_ = 0, localRank_ = 0, localSize_ = 1;
  const char* source_ = "single process";
};

// Picks the source as listed above. Returns null with `err` set when the environment is
// inconsistent (e.g. RINGCC_NRANKS=2 without a control channel).
std::unique_ptr<ProcessGroup> makeProcessGroup(int* argc, char*** argv, std::string& err);

// The pieces, for tests.
std::unique_ptr<ProcessGroup> makeSingleProcessGroup();
// From ringcc-run's variables; null (err empty) when RINGCC_NRANKS is not set.
std::unique_ptr<ProcessGroup> makeLauncherGroup(std::string& err);
// True when mpirun-style variables say this process was started by an MPI launcher.
bool launchedByMpi();

#if RINGCC_BENCH_MPI
std::unique_ptr<ProcessGroup> makeMpiGroup(int* argc, char*** argv);
#endif

}  // namespace ringcc::bench
