// The bootstrap root of a test's unique id, in a process of its own, so that the test process
// starts no thread for it and stays fit to fork its ranks (tests/support/ranks.h says why).
// Started by newUniqueId() with fd 3 open for writing and RINGCC_TEST_ROOT_PARENT naming the
// test process: writes one status byte (1: made) and the id to fd 3, then serves the root
// until it has served its ranks or given up, or until the test process is gone.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "nccl.h"
#include "src/bootstrap/root.h"

int main() {
  const char* parentText = getenv("RINGCC_TEST_ROOT_PARENT");
  const pid_t parent = parentText ? static_cast<pid_t>(atol(parentText)) : 0;
  ncclUniqueId id{};
  const char made = ncclGetUniqueId(&id) == ncclSuccess ? 1 : 0;
  bool sent = write(3, &made, 1) == 1 && write(3, &id, sizeof(id)) == sizeof(id);
  close(3);
  if (!made || !sent) return 1;
  // The root ends by itself (root.h); a parent that is gone will never start the ranks.
  while (ringcc::runningRoots() > 0 && getppid() == parent)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  _exit(0);  // the root thread, if still running, is not joined: its rendezvous is abandoned
}
