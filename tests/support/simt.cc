// The SIMT emulation's barriers and threads (tests/support/simt.h).
#include "support/simt.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace ringcc::simt {

namespace {

using Clock = std::chrono::steady_clock;

// Thrown in every thread once the grid failed, so that each unwinds out of the kernel.
struct Abandoned {};

const char* kindName(int k) {
  return k == Thread::kAnd ? "__syncthreads_and" : k == Thread::kOr ? "__syncthreads_or"
                                                                    : "__syncthreads";
}

}  // namespace

class Grid {
 public:
  explicit Grid(double timeout) : timeout_(timeout) {}
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records the first error and makes every thread give up; throws Abandoned.
  [[noreturn]] void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.empty()) error_ = why;
    }
    failed_.store(true, std::memory_order_release);
    throw Abandoned{};
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  Clock::duration timeout() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }

 private:
  double timeout_;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::string error_;
};

// A block's barrier and its __shared__ variables.
struct BlockShared {
  Grid* grid = nullptr;
  uint32_t index = 0;
  uint32_t threads = 0;
  std::mutex mu;
  std::condition_variable cv;
  uint32_t arrived = 0;     // threads at the barrier now
  uint32_t exited = 0;      // threads that left the kernel
  uint64_t generation = 0;  // barriers completed
  int kind = Thread::kPlain;
  bool all = true, any = false;        // the votes of the barrier filling up ...
  bool lastAll = true, lastAny = false;  // ... and of the last one completed
  Slice slice{};
  int word = 0;

  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& why) {
    lock.unlock();
    grid->fail("block " + std::to_string(index) + ": " + why);
  }

  // Thread t left the kernel.
  void exit(uint32_t t) {
    std::unique_lock<std::mutex> lock(mu);
    if (arrived > 0)
      fail(lock, "divergent barrier: thread " + std::to_string(t) + " left the kernel while " +
                     std::to_string(arrived) + " of " + std::to_string(threads) +
                     " threads wait at " + kindName(kind) + " #" + std::to_string(generation));
    exited++;
  }
};

uint32_t Thread::index() const { return block_->index; }
uint32_t Thread::threads() const { return block_->threads; }
Slice* Thread::slice() { return &block_->slice; }
int* Thread::word() { return &block_->word; }

uint64_t Thread::nanos() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// Polls spin a little, then yield, then sleep: thousands of emulated threads share two cores.
void Thread::nap(unsigned polls) const {
  if (block_->grid->failed()) throw Abandoned{};
  if (polls > 256)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  else if (polls > 4)
    sched_yield();
}

bool Thread::meet(Kind kind, bool p) {
  BlockShared& b = *block_;
  std::unique_lock<std::mutex> lock(b.mu);
  if (b.grid->failed()) throw Abandoned{};
  if (b.exited > 0)
    b.fail(lock, "divergent barrier: thread " + std::to_string(thread_) + " reached " +
                     kindName(kind) + " #" + std::to_string(b.generation) + " after " +
                     std::to_string(b.exited) + " thread(s) of its block left the kernel");
  if (b.arrived == 0) {
    b.kind = kind;
    b.all = true;
    b.any = false;
  } else if (b.kind != kind) {
    b.fail(lock, "divergent barrier: thread " + std::to_string(thread_) + " reached " +
                     kindName(kind) + " while " + std::to_string(b.arrived) +
                     " thread(s) wait at " + kindName(b.kind) + " #" +
                     std::to_string(b.generation));
  }
  b.all = b.all && p;
  b.any = b.any || p;
  if (++b.arrived == b.threads) {
    b.lastAll = b.all;
    b.lastAny = b.any;
    b.arrived = 0;
    b.generation++;
    b.cv.notify_all();
  } else {
    const uint64_t gen = b.generation;
    const Clock::time_point deadline = Clock::now() + b.grid->timeout();
    while (b.generation == gen) {
      // Short waits: a failure elsewhere in the grid wakes nobody here.
      b.cv.wait_for(lock, std::chrono::milliseconds(50));
      if (b.generation != gen) break;
      if (b.grid->failed()) throw Abandoned{};
      if (Clock::now() > deadline)
        b.fail(lock, "barrier timeout: " + std::to_string(b.arrived) + " of " +
                         std::to_string(b.threads) + " threads reached " + kindName(b.kind) +
                         " #" + std::to_string(gen) + " (a thread skipped it, or waits elsewhere)");
    }
  }
  // lastAll/lastAny stay until the next barrier completes, which needs this thread too.
  return kind == kAnd ? b.lastAll : kind == kOr ? b.lastAny : true;
}

std::string runGrid(const std::vector<Launch>& launches, double barrierTimeoutSeconds) {
  Grid grid(barrierTimeoutSeconds);
  std::vector<std::unique_ptr<BlockShared>> blocks;
  std::vector<std::thread> threads;
  for (const Launch& l : launches) {
    for (uint32_t b = 0; b < l.blocks; ++b) {
      blocks.push_back(std::make_unique<BlockShared>());
      BlockShared* shared = blocks.back().get();
      shared->grid = &grid;
      shared->index = b;
      shared->threads = l.threads;
      for (uint32_t t = 0; t < l.threads; ++t) {
        threads.emplace_back([&grid, &l, shared, t] {
          try {
            Thread self(shared, t);
            l.kernel(self);
            shared->exit(t);
          } catch (const Abandoned&) {
          } catch (const std::exception& e) {
            try {
              grid.fail("block " + std::to_string(shared->index) + " thread " +
                        std::to_string(t) + ": " + e.what());
            } catch (const Abandoned&) {
            }
          }
        });
      }
    }
  }
  for (std::thread& t : threads) t.join();
  return grid.error();
}

}  // namespace ringcc::simt
