// Helpers of the fault tests: per-rank reports that forked ranks write into shared memory, one
// clock for every process, exact all-reduce data, and the ringcc shm segments a set of
// processes left in /dev/shm.
//
// Every fault scenario runs its ranks in forked children (runProcesses), even the ones that
// use threads: a child that hangs is killed at the scenario's time limit, so a bug shows up as
// a failed check, never as a hung suite. Children cannot use Catch2; they fill a RankReport
// and the parent checks it.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "nccl.h"

namespace ringcc::test {

// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine, so a
// survivor's return time compares with the moment its peer died.
int64_t nowNs();
inline double msBetween(int64_t fromNs, int64_t toNs) { return (toNs - fromNs) / 1e6; }

// What one rank of a scenario did. Times are nowNs(); 0 means "did not happen".
struct RankReport {
  int pid;
  int initResult;
  int iterations;   // collectives that succeeded with exact results
  int badResults;   // collectives that succeeded with wrong results
  int failResult;   // the first collective that failed: its code (0: none failed)
  int asyncError;   // ncclCommGetAsyncError after that failure
  int laterResult;  // a collective attempted after the failure or revoke
  int endResult;    // ncclCommAbort / ncclCommDestroy
  int extraResult;  // scenario-specific (shrink, second communicator)
  int extraIterations;
  int64_t failStartNs, failEndNs;  // the failing call
  int64_t endStartNs, endEndNs;    // abort / destroy
  int64_t eventNs;                 // the fault: the victim's death, the abort or revoke call
};

// n zero-filled T in an anonymous shared mapping: made before fork, written by children, read
// by the parent once they have exited.
template <typename T>
class SharedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit SharedArray(size_t n) : n_(n) {
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<T*>(p);
  }
  ~SharedArray() {
    if (data_) munmap(data_, bytes());
  }
  SharedArray(const SharedArray&) = delete;
  SharedArray& operator=(const SharedArray&) = delete;

  bool ok() const { return data_ != nullptr; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return n_; }

 private:
  size_t bytes() const { return n_ * sizeof(T) > 0 ? n_ * sizeof(T) : 1; }
  size_t n_;
  T* data_ = nullptr;
};

// Names in /dev/shm of ringcc segments created by any of `pids` ("ringcc-<pid>-...").
std::vector<std::string> shmSegmentsOf(const std::vector<int>& pids);
// The same, as one line for a failure message ("nothing" if none).
std::string describeSegments(const std::vector<std::string>& names);

// Rank `rank`'s all-reduce input for iteration `iter`: small integers as floats, so sums are
// exact in any order.
void fillInput(std::vector<float>& buf, int rank, int iter);
// Whether `out` is the ncclSum of fillInput over ranks 0..nranks-1 for `iter`.
bool isSumOfInputs(const std::vector<float>& out, int nranks, int iter);

// The shm segments of the scenario's ranks (reports[i].pid) and of this process.
std::vector<int> scenarioPids(const RankReport* reports, int n);

// Sleeps `ms` milliseconds.
void sleepMs(int ms);

}  // namespace ringcc::test
