#pragma once
// One object per process that a forked child must not share with its parent.

#include <sys/types.h>
#include <unistd.h>

#include <mutex>

namespace ringcc {

// Re-initializes `mu` (unlocked) in every child forked from now on: a thread of the parent
// may hold it at fork(), and that thread does not exist in the child. For mutexes that live
// as long as the process; what they protect must stay consistent on its own (ProcessLocal's
// does: a child never trusts its parent's object).
void resetInForkedChild(std::mutex* mu);

// The process's T, made on first use and made again in a forked child. Threads do not survive
// fork, so a child cannot use what its parent's threads serve (the proxy's thread, the UCX
// worker and its sockets, the hang watcher's pipe and thread): it makes its own and leaves the
// inherited one alone, never destroyed (a destructor would join a thread the child does not
// have, or close what the parent still uses). This is the one home of that rule: the proxy
// (transports/proxy), the UCX worker (transports/ucx) and the hang watcher (src/monitor) use
// it. (The bootstrap root registry acts at fork time instead, closing the sockets it inherited:
// src/bootstrap/root.cc.)
template <typename T>
class ProcessLocal {
 public:
  ProcessLocal() { resetInForkedChild(&mu_); }
  ProcessLocal(const ProcessLocal&) = delete;
  ProcessLocal& operator=(const ProcessLocal&) = delete;

  // This process's T: the one made before in this process, else make()'s (a new T*, kept for
  // the process; null: none made, and the next call tries again).
  template <typename Make>
  T* get(Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    const pid_t self = ::getpid();
    if (obj_ == nullptr || pid_ != self) {
      obj_ = make();
      pid_ = self;
    }
    return obj_;
  }

  // This process's T if one was made in this process, else null; makes nothing.
  T* ifMade() {
    std::lock_guard<std::mutex> lock(mu_);
    return pid_ == ::getpid() ? obj_ : nullptr;
  }

 private:
  std::mutex mu_;
  T* obj_ = nullptr;
  pid_t pid_ = 0;
};

}  // namespace ringcc
