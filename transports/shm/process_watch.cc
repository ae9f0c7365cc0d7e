#include "transports/shm/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace ringcc {

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid) {
  if (pid <= 0 || pid == getpid()) {
    pid_ = 0;  // ourselves: alive as long as anyone can ask
    return;
  }
#ifdef SYS_pidfd_open
  fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd_ < 0 && errno == ESRCH) fd_ = -2;  // already gone
#endif
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) close(fd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)), fd_(std::exchange(other.fd_, -1)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    pid_ = std::exchange(other.pid_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool ProcessWatch::alive() const {
  if (pid_ == 0) return true;
  if (fd_ == -2) return false;
  if (fd_ >= 0) {
    struct pollfd p = {fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 0;
  }
  return !(kill(pid_, 0) != 0 && errno == ESRCH);
}

}  // namespace ringcc
