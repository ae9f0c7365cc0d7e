#include "src/exec/batch_thread.h"

#include <utility>

#include "src/core/error.h"

namespace ringcc {

BatchThread::BatchThread(Run run, Wrap wrapThread) : run_(std::move(run)) {
  thread_ = std::thread([this, wrap = std::move(wrapThread)] {
    if (wrap)
      wrap([this] { threadMain(); });
    else
      threadMain();
  });
}

ncclResult_t BatchThread::enqueue(const EngineBatch& batch, EngineHandle* handle) {
  if (batch.runInline) {
    // Nothing else must progress meanwhile: run here, without the thread hand-offs and
    // without the engine thread's lock (one batch at a time: that thread is idle).
    inlineResult_ = run_(batch.ops, batch.stream);
    inlineHandle_ = *handle = nextHandle_++;
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ != enqueued_)
    return fail(ncclInternalError, "enqueue", "a batch is already running");
  batch_ = batch;
  enqueued_ = *handle = nextHandle_++;
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t BatchThread::wait(EngineHandle handle) {
  if (handle != 0 && handle == inlineHandle_) return inlineResult_;  // done inside enqueue()
  std::unique_lock<std::mutex> lock(mu_);
  if (handle == 0 || handle != enqueued_)
    return fail(ncclInternalError, "wait", "no batch %llu",
                static_cast<unsigned long long>(handle));
  cv_.wait(lock, [&] { return finished_ == handle; });
  return result_;
}

void BatchThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchThread::threadMain() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return exit_ || finished_ != enqueued_; });
    if (exit_) return;
    const EngineHandle handle = enqueued_;
    lock.unlock();
    // batch_ stays untouched until the batch is finished: enqueue() refuses a second one.
    const ncclResult_t r = run_(batch_.ops, batch_.stream);
    lock.lock();
    result_ = r;
    finished_ = handle;
    cv_.notify_all();
  }
}

}  // namespace ringcc
