#include "support/ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace ringcc::test {

void runThreads(int nranks, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

std::vector<int> runProcessesStatus(int nranks, const std::function<int(int rank)>& body,
                                    int timeoutSec) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body(r);
      } catch (...) {
        status = 2;
      }
      fflush(stdout);
      fflush(stderr);
      _exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses(pids.size(), -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  size_t remaining = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        statuses[i] = status;
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        fprintf(stderr, "rank %zu: timed out, killed\n", i);
        kill(pids[i], SIGKILL);
        waitpid(pids[i], nullptr, 0);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return statuses;
}

int runProcesses(int nranks, const std::function<int(int rank)>& body, int timeoutSec) {
  std::vector<int> statuses = runProcessesStatus(nranks, body, timeoutSec);
  int failed = 0;
  for (size_t i = 0; i < statuses.size(); ++i) {
    int status = statuses[i];
    if (status == -1) {
      ++failed;  // timed out: already reported
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %zu: %s %d\n", i, WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      ++failed;
    }
  }
  return failed;
}

ncclUniqueId newUniqueId() {
  ncclUniqueId id{};
  if (ncclGetUniqueId(&id) != ncclSuccess) fprintf(stderr, "ncclGetUniqueId failed\n");
  return id;
}

ncclResult_t waitCommReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 20000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

}  // namespace ringcc::test
