// ProcessLocal (src/base/process_local.h): one object per process, a new one in a forked child,
// even when the parent forked while another of its threads was making the object.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "src/base/process_local.h"

namespace ringcc {
namespace {

struct Thing {
  pid_t madeIn = ::getpid();
};

// Waits for the child at most `seconds` (a child stuck on an inherited lock is killed): its
// exit status, or -1 if it had to be killed.
int waitChild(pid_t child, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (;;) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_CASE("ProcessLocal: one object per process, made once", "[process_local]") {
  // Static, as the library's are: a ProcessLocal's lock is re-initialized in every later child.
  static ProcessLocal<Thing> local;
  CHECK(local.ifMade() == nullptr);
  int made = 0;
  Thing* first = local.get([&] { ++made; return new Thing(); });
  Thing* again = local.get([&] { ++made; return new Thing(); });
  CHECK(first == again);
  CHECK(made == 1);
  CHECK(local.ifMade() == first);

  // A failed make leaves nothing, and the next call tries again.
  static ProcessLocal<Thing> failing;
  CHECK(failing.get([] { return static_cast<Thing*>(nullptr); }) == nullptr);
  CHECK(failing.ifMade() == nullptr);
  CHECK(failing.get([] { return new Thing(); }) != nullptr);
}

TEST_CASE("ProcessLocal: a forked child makes its own, even if the lock was held at fork",
          "[process_local]") {
  static ProcessLocal<Thing> local;
  Thing* parents = local.get([] { return new Thing(); });

  // Another thread is inside get() (making nothing yet: it sleeps holding the lock) when this
  // thread forks: the child inherits the lock held by a thread it does not have.
  static ProcessLocal<Thing> busy;
  std::atomic<bool> inside{false};
  std::thread maker([&] {
    busy.get([&] {
      inside.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return new Thing();
    });
  });
  while (!inside.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Exit codes say which check failed (Catch2 cannot report from a child).
    if (local.ifMade() != nullptr) ::_exit(2);  // the parent's is not the child's
    Thing* mine = local.get([] { return new Thing(); });
    if (mine == parents || mine->madeIn != ::getpid()) ::_exit(3);
    Thing* other = busy.get([] { return new Thing(); });  // would block on the held lock
    if (other == nullptr || other->madeIn != ::getpid()) ::_exit(4);
    ::_exit(0);
  }
  CHECK(waitChild(child, 10) == 0);
  maker.join();
  CHECK(local.ifMade() == parents);  // the parent keeps its own
  CHECK(busy.ifMade() != nullptr);
  CHECK(busy.ifMade()->madeIn == ::getpid());
}

}  // namespace
}  // namespace ringcc
