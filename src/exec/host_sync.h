// The host's Sync policy for ProgramRunner (kernels/prims.h): how counters are read and
// published between CPU threads and processes, and who gets woken.
//
// load: acquire. publish: a sequentially consistent store, then a load of `waiters`; a futex
// wake only if someone sleeps there. A sleeper (transports/fifo_host.h: waitForCounter,
// napOnCounter) increments `waiters` with a seq_cst RMW before it re-checks the counter and
// sleeps, so either it sees the new value or the publisher sees it waiting: no lost wake-up,
// and no system call while nobody sleeps.
#pragma once

#include <cstdint>

#include "kernels/connector_device.h"
#include "transports/fifo_host.h"

namespace ringcc {

struct HostSync {
  uint32_t load(const uint32_t* word) const { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

  void publish(FifoCounter* c, uint32_t value) const {
    __atomic_store_n(&c->value, value, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST) != 0) wakeCounter(c);
  }
};

}  // namespace ringcc
