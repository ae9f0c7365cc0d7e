#include "src/exec/batch_thread.h"

#include <sched.h>

#include <utility>

#include "src/base/error.h"

namespace ringcc {
namespace {

// Polls `done` for up to `spin`, yielding the core between polls: whether it came true.
template <class Done>
bool pollFor(std::chrono::microseconds spin, Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned polls = 1;; ++polls) {
    if (done()) return true;
    if (polls % 16 == 0 && std::chrono::steady_clock::now() - start > spin) return false;
    sched_yield();
  }
}

}  // namespace

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
  if (finished_.load() != enqueued_.load())
    return fail(ncclInternalError, "enqueue", "a batch is already running");
  batch_ = batch;
  *handle = nextHandle_++;
  enqueued_.store(*handle);  // (after batch_: a polling engine thread takes it from here)
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t BatchThread::wait(EngineHandle handle) {
  if (handle != 0 && handle == inlineHandle_) return inlineResult_;  // done inside enqueue()
  if (handle == 0 || handle != enqueued_.load())
    return fail(ncclInternalError, "wait", "no batch %llu",
                static_cast<unsigned long long>(handle));
  const auto finished = [&] { return finished_.load() == handle; };
  if (!pollFor(kHandOffSpin, finished)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, finished);
  }
  return result_;
}

void BatchThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchThread::threadMain() {
  const auto ready = [this] { return exit_.load() || finished_.load() != enqueued_.load(); };
  bool justRan = false;  // poll for the next batch only right after one
  while (true) {
    if (!justRan || !pollFor(kHandOffSpin, ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, ready);
    }
    if (exit_.load()) return;
    const EngineHandle handle = enqueued_.load();
    // batch_ stays untouched until the batch is finished: enqueue() refuses a second one.
    const ncclResult_t r = run_(batch_.ops, batch_.stream);
    {
      std::lock_guard<std::mutex> lock(mu_);
      result_ = r;
      finished_.store(handle);  // (after result_: a polling wait() reads it from here)
    }
    cv_.notify_all();
    justRan = true;
  }
}

}  // namespace ringcc
