#include "src/base/process_local.h"

#include <pthread.h>

#include <new>
#include <vector>

namespace ringcc {
namespace {

// Registered mutexes (each lives as long as the process or the library). Touched by
// the child handler without its lock: the child has one thread, and the lock itself may be
// inherited held, so it is re-initialized first.
struct ForkList {
  std::mutex mu;
  std::vector<std::mutex*> mutexes;
};

// A static, not a heap object: a library loaded with dlopen and closed again would leave the
// latter behind (LeakSanitizer reports it; test_abi does exactly that).
ForkList& forkList() {
  static ForkList list;
  return list;
}

void onForkChild() {
  ForkList& list = forkList();
  new (&list.mu) std::mutex();
  for (std::mutex* mu : list.mutexes) new (mu) std::mutex();
}

}  // namespace

void resetInForkedChild(std::mutex* mu) {
  ForkList& list = forkList();
  std::lock_guard<std::mutex> lock(list.mu);
  static const bool registered = pthread_atfork(nullptr, nullptr, onForkChild) == 0;
  (void)registered;
  list.mutexes.push_back(mu);
}

}  // namespace ringcc
