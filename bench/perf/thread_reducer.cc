#include "bench/perf/thread_reducer.h"

#include <algorithm>

namespace ringcc::bench {

bool ThreadReducer::reduce(int thread, double& value, ReduceOp op,
                           const std::function<bool(double&)>& leader) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) return false;
  if (arrived_ == 0) {
    acc_ = (op == ReduceOp::First && thread != 0) ? 0 : value;
  } else {
    switch (op) {
      case ReduceOp::Sum: acc_ += value; break;
      case ReduceOp::Min: acc_ = std::min(acc_, value); break;
      case ReduceOp::Max: acc_ = std::max(acc_, value); break;
      case ReduceOp::First:
        if (thread == 0) acc_ = value;
        break;
    }
  }
  if (++arrived_ == nThreads_) {
    double v = acc_;
    bool ok = true;
    if (leader) {
      // The leader step may block on other processes; others keep waiting on the condition.
      lock.unlock();
      ok = leader(v);
      lock.lock();
    }
    result_ = v;
    resultOk_ = ok;
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    value = v;
    return ok && !aborted_;
  }
  unsigned long gen = generation_;
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) return false;  // aborted
  value = result_;
  return resultOk_;
}

void ThreadReducer::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

bool ThreadReducer::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

}  // namespace ringcc::bench
