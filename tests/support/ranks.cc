#include "support/ranks.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ringcc::test {

namespace {

// Root helpers (newUniqueId) not reaped yet.
std::mutex gHelpersMu;
std::vector<pid_t> gHelpers;

void reapHelpers() {
  std::lock_guard<std::mutex> lock(gHelpersMu);
  std::erase_if(gHelpers, [](pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == pid; });
}

// Reads exactly n bytes from fd within timeoutMs; false on EOF, error or timeout.
bool readAll(int fd, void* buf, size_t n, int timeoutMs) {
  auto* p = static_cast<char*>(buf);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd pfd{fd, POLLIN, 0};
    if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) <= 0) return false;
    ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

std::string otherThreads() {
  std::string names;
  const pid_t self = gettid();
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return "(cannot read /proc/self/task)";
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
    std::string name;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::getline(comm, name);
    names += (names.empty() ? "" : ", ") + std::string("thread ") + e->d_name + " '" + name + "'";
  }
  closedir(dir);
  return names;
}

// Threads that are ending (a root that served its ranks, a detached thread on its way out)
// may still be listed for a moment: wait up to ~2 s for them to go.
std::string otherThreadsAfterSettling() {
  std::string others = otherThreads();
  for (int i = 0; i < 200 && !others.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    others = otherThreads();
  }
  return others;
}

void runThreads(int nranks, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

std::vector<int> runProcessesStatus(int nranks, const std::function<int(int rank)>& body,
                                    int timeoutSec) {
  reapHelpers();
  if (std::string others = otherThreadsAfterSettling(); !others.empty())
    FAIL("runProcesses: this process runs other threads ("
         << others
         << "); a forked rank "
            "could inherit a lock one of them holds and block forever (tests/support/ranks.h). "
            "Fork before starting communicators or threads in the test process, or give the "
            "test case its own tag.");
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
  reapHelpers();
  ncclUniqueId id{};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fprintf(stderr, "newUniqueId: pipe2 failed: %s\n", strerror(errno));
    return id;
  }
  // The helper's environment is ours, less NCCL_DEBUG_FILE: it would reopen (truncate) the
  // file this process logs to. Its log goes to stderr, beside the test's output.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (strncmp(*e, "NCCL_DEBUG_FILE=", 16) != 0) env.emplace_back(*e);
  env.push_back("RINGCC_TEST_ROOT_PARENT=" + std::to_string(getpid()));
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "ringcc_test_root";
  char* argv[] = {arg0, nullptr};
  // The write end goes to the helper's fd 3; were it fd 3 already, dup2 would be a no-op that
  // leaves it close-on-exec, so it is moved above 3 first.
  if (fds[1] <= 3) {
    const int moved = fcntl(fds[1], F_DUPFD_CLOEXEC, 4);
    close(fds[1]);
    fds[1] = moved;
    if (moved < 0) {
      fprintf(stderr, "newUniqueId: fcntl(F_DUPFD) failed: %s\n", strerror(errno));
      close(fds[0]);
      return id;
    }
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 3);
  // posix_spawn, not fork: it is safe from a process that runs threads (it runs no code of
  // ours, nor malloc, between clone and exec).
  pid_t pid = -1;
  int rc = posix_spawn(&pid, RINGCC_TEST_ROOT_HELPER, &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    fprintf(stderr, "newUniqueId: cannot start %s: %s\n", RINGCC_TEST_ROOT_HELPER, strerror(rc));
    close(fds[0]);
    return id;
  }
  {
    std::lock_guard<std::mutex> lock(gHelpersMu);
    gHelpers.push_back(pid);
  }
  char made = 0;
  if (!readAll(fds[0], &made, 1, 30000) || !made || !readAll(fds[0], &id, sizeof(id), 30000)) {
    fprintf(stderr, "newUniqueId: the root helper (pid %d) made no id\n", static_cast<int>(pid));
    id = ncclUniqueId{};
  }
  close(fds[0]);
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
