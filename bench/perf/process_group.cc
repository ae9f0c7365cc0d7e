#include "bench/perf/process_group.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ringcc::bench {
namespace {

class SingleProcessGroup : public ProcessGroup {
 public:
  bool allreduce(double*, size_t, CtrlReduce, std::string&) override { return true; }
  bool gather(const std::string& mine, std::vector<std::string>& all, std::string&) override {
    all = {mine};
    return true;
  }
  bool shareId(ncclUniqueId&, bool&, std::string&) override { return true; }
};

class LauncherGroup : public ProcessGroup {
 public:
  LauncherGroup(int size, int rank, int localRank, int localSize, int fd,
                std::optional<ncclUniqueId> id)
      : client_(fd), id_(id) {
    size_ = size;
    rank_ = rank;
    localRank_ = localRank;
    localSize_ = localSize;
    source_ = "ringcc-run";
  }
  bool allreduce(double* v, size_t n, CtrlReduce op, std::string& err) override {
    if (size_ == 1) return true;
    return client_.allreduce(v, n, op, err);
  }
  bool gather(const std::string& mine, std::vector<std::string>& all,
              std::string& err) override {
    if (size_ == 1) {
      all = {mine};
      return true;
    }
    return client_.gather(mine, all, err);
  }
  bool providesId() const override { return id_.has_value(); }
  bool shareId(ncclUniqueId& id, bool& have, std::string&) override {
    if (id_) {
      id = *id_;
      have = true;
    }
    return true;
  }

 private:
  ControlClient client_;
  std::optional<ncclUniqueId> id_;
};

bool envInt(const char* name, long lo, long hi, long& out, std::string& err) {
  const char* s = std::getenv(name);
  if (!s) {
    err = std::string(name) + " is not set";
    return false;
  }
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    err = std::string("invalid ") + name + "='" + s + "'";
    return false;
  }
  out = v;
  return true;
}

}  // namespace

std::unique_ptr<ProcessGroup> makeSingleProcessGroup() {
  return std::make_unique<SingleProcessGroup>();
}

std::unique_ptr<ProcessGroup> makeLauncherGroup(std::string& err) {
  err.clear();
  if (!std::getenv(kEnvNranks)) return nullptr;
  long size = 0, rank = 0, localRank = 0, localSize = 0, fd = -1;
  if (!envInt(kEnvNranks, 1, 1 << 20, size, err)) return nullptr;
  if (!envInt(kEnvRank, 0, size - 1, rank, err)) return nullptr;
  localRank = rank;
  localSize = size;
  if (std::getenv(kEnvLocalRank) && !envInt(kEnvLocalRank, 0, size - 1, localRank, err))
    return nullptr;
  if (std::getenv(kEnvLocalSize) && !envInt(kEnvLocalSize, 1, size, localSize, err))
    return nullptr;
  std::optional<ncclUniqueId> id;
  if (const char* hex = std::getenv(kEnvUniqueId)) {
    id = uniqueIdFromHex(hex);
    if (!id) {
      err = std::string("invalid ") + kEnvUniqueId + " (expected 256 hex digits)";
      return nullptr;
    }
  }
  if (size > 1) {
    if (!id) {
      err = std::string(kEnvUniqueId) + " is not set (start multi-process runs with ringcc-run)";
      return nullptr;
    }
    if (!envInt(kEnvCtrlFd, 0, 1 << 20, fd, err)) {
      err += " (start multi-process runs with ringcc-run, or with mpirun on an MPI build)";
      return nullptr;
    }
  }
  return std::make_unique<LauncherGroup>(static_cast<int>(size), static_cast<int>(rank),
                                         static_cast<int>(localRank),
                                         static_cast<int>(localSize), static_cast<int>(fd), id);
}

bool launchedByMpi() {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE",
                        "MPI_LOCALNRANKS"};
  for (const char* v : vars)
    if (std::getenv(v)) return true;
  return false;
}

std::unique_ptr<ProcessGroup> makeProcessGroup(int* argc, char*** argv, std::string& err) {
  (void)argc;
  (void)argv;
  std::unique_ptr<ProcessGroup> group = makeLauncherGroup(err);
  if (group || !err.empty()) return group;
#if RINGCC_BENCH_MPI
  if (launchedByMpi()) return makeMpiGroup(argc, argv);
#endif
  return makeSingleProcessGroup();
}

}  // namespace ringcc::bench
