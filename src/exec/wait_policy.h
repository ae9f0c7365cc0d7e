// How the host engine's thread waits when no runner can move (HostEngine::runJobs): spin
// briefly, then yield the core between polls, then nap on a counter it waits for.
//
//   - Spin: the peer usually answers within a microsecond, and a poll notices it soonest.
//   - Yield: after `pollsBeforeYield` idle polls (0 when the host's ranks outnumber its cores,
//     see pollsBeforeYield below) each poll gives the core away first; on an idle core
//     sched_yield returns at once.
//   - Nap: after NCCL_SPIN_COUNT idle rounds, or 2 ms of yielding on a loaded machine, the spin
//     is over: the engine looks at its peers and the deadline, then sleeps on the futex of a
//     counter a lane waits on (nap), for at most a millisecond.
//
// A class of its own so that runJobs reads as "advance, else wait" and the policy's knobs and
// reasons sit in one place. spin() runs on every idle poll, whose cost adds to a small
// operation's latency: it is inline, and only the rarer steps (the yield with its time bound,
// the nap) are calls.
#pragma once

#include <chrono>
#include <cstdint>

#include "transports/fifo_host.h"

struct ncclComm;

namespace ringcc {

// Idle polls before the engine starts yielding for `comm`'s ranks on this host: 0 if they
// outnumber the cores they can run on, else a few dozen (wait_policy.cc says why).
int pollsBeforeYield(const ncclComm* comm);

class WaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  WaitPolicy(int spinCount, int pollsBeforeYield)
      : spinCount_(spinCount), pollsBeforeYield_(pollsBeforeYield) {}

  // A runner moved: the next idle round starts a new spin.
  void progressed() {
    idleRounds_ = 0;
    staleNaps_ = 0;
    spinStart_ = Clock::time_point{};
  }

  // Counts one idle round. True while the round is part of the spin (the caller polls again
  // at once, having yielded the core if the spin is past its first polls); false once the
  // spin is over and the caller takes the slow path (checks, then nap()).
  bool spin() {
    if (++idleRounds_ >= spinCount_) return false;
    if (idleRounds_ > pollsBeforeYield_) yield();
    return true;
  }

  // Whether this slow round is the first since the last progress: the wait has become a stall.
  bool stallStarts() const { return idleRounds_ == spinCount_; }

  // Sleeps on `counter` until it leaves `value` or `micros` pass. If the counter is past
  // `value` round after round, whatever the lane waits for beyond it is not coming (a
  // mismatched call wrote fewer lines than announced): naps on its current value instead.
  void nap(FifoCounter* counter, uint32_t value, int micros);

 private:
  // sched_yield, and the spin's time bound: on a loaded machine one yield can take
  // milliseconds, and peer checks and the deadline must still start within ~2 ms.
  void yield();

  const int spinCount_;            // NCCL_SPIN_COUNT: idle rounds before the slow path
  const int pollsBeforeYield_;     // idle rounds before each poll yields the core
  int idleRounds_ = 0;             // since the last progress
  int staleNaps_ = 0;              // slow rounds whose counter was past the awaited value
  Clock::time_point spinStart_{};  // when the current spin started yielding (read lazily)
};

}  // namespace ringcc
