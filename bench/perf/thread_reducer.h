// Combines one value from each of a process's benchmark threads into one result every thread
// receives; with a value nobody needs, it is a barrier.
//
// The last thread to arrive runs an optional `leader` step on the combined value before anyone
// returns: the place where one thread per process joins the other processes (nccl-tests does
// its MPI_Allreduce there). abort() releases every waiting thread (reduce returns false) and
// makes later calls return false at once, so a failed or timed-out run never leaves threads
// blocked here.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

namespace ringcc::bench {

enum class ReduceOp { Sum, Min, Max, First };  // First: thread 0's value

class ThreadReducer {
 public:
  explicit ThreadReducer(int nThreads) : nThreads_(nThreads) {}

  // `thread` is the caller's index in [0, nThreads). Replaces `value` with the combination.
  bool reduce(int thread, double& value, ReduceOp op,
              const std::function<bool(double&)>& leader = {});
  bool barrier(int thread) {
    double v = 0;
    return reduce(thread, v, ReduceOp::Sum);
  }
  void abort();
  bool aborted() const;

 private:
  const int nThreads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  double acc_ = 0;
  double result_ = 0;
  bool resultOk_ = true;
  bool aborted_ = false;
};

}  // namespace ringcc::bench
