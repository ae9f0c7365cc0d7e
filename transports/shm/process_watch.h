// Whether another process on this host is still running, without races on pid reuse.
//
// Opens a pidfd (pidfd_open, Linux >= 5.3) while the process is known to be alive (during
// connection setup); the pidfd then keeps naming that process even if its pid is reused, and
// polls readable once it has exited (zombies count as exited). Where pidfds are missing it falls
// back to kill(pid, 0), which cannot see zombies or pid reuse, so it errs towards "alive" and
// the wait's deadline remains the backstop.
#pragma once

#include <sys/types.h>

namespace ringcc {

class ProcessWatch {
 public:
  ProcessWatch() = default;  // watches nothing: alive() is always true
  explicit ProcessWatch(pid_t pid);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Non-blocking; thread-safe.
  bool alive() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int fd_ = -1;
};

}  // namespace ringcc
