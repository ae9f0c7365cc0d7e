// The device's Sync policy for ProgramRunner (kernels/prims.h), device-clean so that the SIMT
// test (tests/simt) runs it on host threads too. Counters live in memory the GPU, the host or a
// peer GPU see. A poll is one relaxed (volatile) load; the fence that makes what the counter
// announced visible comes once, when a slice can move (ProgramRunner calls acquired()), not
// after every fruitless poll. A publish that must follow the slot's data fences first, at GPU
// scope when both sides of the connection are on this GPU (ConnectorView::oneGpu), at system
// scope otherwise; LL's publishes need no fence (the flags ride with the data). Nobody is woken
// from a kernel: host threads that wait on GPU connections nap with a timeout
// (transports/fifo_host.h), never forever.
#pragma once

#include <stdint.h>

#include "kernels/connector_device.h"
#include "kernels/device_clean.h"
#include "kernels/device_ops.h"

namespace ringcc {

struct DeviceSync {
  RINGCC_INLINE uint32_t load(const uint32_t* word) const { return ldVolatile32(word); }
  RINGCC_INLINE void acquired(bool system) const {
    if (system)
      fenceSystem();
    else
      fenceGpu();
  }
  RINGCC_INLINE void publish(const ConnectorView& v, FifoCounter* c, uint32_t value,
                             bool ordered) const {
    if (ordered) {
      if (v.oneGpu)
        fenceGpu();
      else
        fenceSystem();
    }
    stVolatile32(&c->value, value);
  }
  // Without a view (no caller in the runner uses it): as ordered as it gets.
  RINGCC_INLINE void publish(FifoCounter* c, uint32_t value) const {
    fenceSystem();
    stVolatile32(&c->value, value);
  }
};

}  // namespace ringcc
