// The device's Sync policy for ProgramRunner (kernels/prims.h): counters live in memory both
// the GPU and the host (or a peer GPU) see, so a publish fences at system scope before its
// store, and a load is volatile then fenced. Nobody is woken from a kernel: host threads that
// wait on GPU connections nap with a timeout (transports/fifo_host.h), never forever.
#pragma once

#include <stdint.h>

#include "kernels/connector_device.h"

namespace ringcc {

struct DeviceSync {
  __device__ uint32_t load(const uint32_t* word) const {
    uint32_t v = *(const volatile uint32_t*)word;
    __threadfence_system();
    return v;
  }
  __device__ void publish(FifoCounter* c, uint32_t value) const {
    __threadfence_system();
    *(volatile uint32_t*)&c->value = value;
  }
};

}  // namespace ringcc
