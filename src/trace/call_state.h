// What a communicator is doing, readable from any thread: the numbers of the calls of the
// batch it runs (or ran last) and their signature. The engine writes it at the start and end
// of every batch (a few relaxed stores; always on, so that a hang report needs no tracing);
// the hang report's watcher thread reads it to tell the other ranks where this rank is.
//
// Calls are numbered per communicator from 1 in call order (a group's calls in the order they
// were made), the same on every rank that makes the same calls: the numbers of the trace
// records (src/trace/trace.h) and of the hang report.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/connector_device.h"

namespace ringcc {

// One reading of a CallState.
struct CallSnapshot {
  bool inCall = false;
  uint64_t firstSeq = 0, lastSeq = 0;  // the batch's calls: [firstSeq, lastSeq]; 0: none yet
  OpSig sig = {};                      // the batch's call (kSigGroup for a group)
};

class CallState {
 public:
  // A batch of calls [firstSeq, lastSeq] starts (engine thread).
  void enter(uint64_t firstSeq, uint64_t lastSeq, const OpSig& sig) {
    uint64_t w[2];
    std::memcpy(w, &sig, sizeof(w));
    sig_[0].store(w[0], std::memory_order_relaxed);
    sig_[1].store(w[1], std::memory_order_relaxed);
    firstSeq_.store(firstSeq, std::memory_order_relaxed);
    lastSeq_.store(lastSeq, std::memory_order_relaxed);
    inCall_.store(true, std::memory_order_release);
  }
  void leave() { inCall_.store(false, std::memory_order_release); }

  // Fields may come from two neighbouring batches when read while one starts; a report taken
  // while a rank waits (the case it is for) reads a state that does not change.
  CallSnapshot snapshot() const {
    CallSnapshot s;
    s.inCall = inCall_.load(std::memory_order_acquire);
    s.firstSeq = firstSeq_.load(std::memory_order_relaxed);
    s.lastSeq = lastSeq_.load(std::memory_order_relaxed);
    uint64_t w[2] = {sig_[0].load(std::memory_order_relaxed),
                     sig_[1].load(std::memory_order_relaxed)};
    std::memcpy(&s.sig, w, sizeof(w));
    return s;
  }

  // A hang report asks the engine to log what its lanes wait for: the engine compares this
  // number with the last one it answered while it waits.
  void askLanes() { lanesAsked_.fetch_add(1, std::memory_order_relaxed); }
  uint32_t lanesAsked() const { return lanesAsked_.load(std::memory_order_relaxed); }

 private:
  static_assert(sizeof(OpSig) == 2 * sizeof(uint64_t));
  std::atomic<bool> inCall_{false};
  std::atomic<uint64_t> firstSeq_{0}, lastSeq_{0};
  std::atomic<uint64_t> sig_[2] = {};
  std::atomic<uint32_t> lanesAsked_{0};
};

}  // namespace ringcc
