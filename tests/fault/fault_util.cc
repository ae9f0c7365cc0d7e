#include "fault/fault_util.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace ringcc::test {

int64_t nowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::vector<std::string> shmSegmentsOf(const std::vector<int>& pids) {
  std::vector<std::string> found;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (struct dirent* e = readdir(dir)) {
    for (int pid : pids) {
      std::string prefix = "ringcc-" + std::to_string(pid) + "-";
      if (pid > 0 && std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        found.push_back(e->d_name);
    }
  }
  closedir(dir);
  return found;
}

std::string describeSegments(const std::vector<std::string>& names) {
  if (names.empty()) return "nothing";
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void fillInput(std::vector<float>& buf, int rank, int iter) {
  for (size_t i = 0; i < buf.size(); ++i)
    buf[i] = static_cast<float>((rank + 1) + static_cast<int>((i + iter) % 13));
}

bool isSumOfInputs(const std::vector<float>& out, int nranks, int iter) {
  const int base = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != static_cast<float>(base + nranks * static_cast<int>((i + iter) % 13)))
      return false;
  return true;
}

std::vector<int> scenarioPids(const RankReport* reports, int n) {
  std::vector<int> pids{static_cast<int>(getpid())};
  for (int r = 0; r < n; ++r)
    if (reports[r].pid > 0) pids.push_back(reports[r].pid);
  return pids;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace ringcc::test
