// Where one FIFO lies in one allocation (host side): after a transport's own header come the
// control block (counters and per-slot sizes, kernels/connector_device.h), the Simple
// slots and the LL lines. p2p (a heap block) and shm (a shared segment) lay it out alike and
// differ only in their header and in how far they align the slot arrays.
#pragma once

#include <cstdint>

#include "kernels/connector_device.h"
#include "transports/transport.h"

namespace ringcc {

struct FifoLayout {
  uint64_t controlOffset;
  uint64_t slotsOffset;
  uint64_t llSlotsOffset;
  uint64_t total;  // bytes up to the end of the last array (LL lines, or Simple slots)
};

inline uint64_t alignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// The control block starts on a cache line after `headerBytes`; both slot arrays start on a
// multiple of `slotAlign` (64 on the heap, a page in shared memory).
inline FifoLayout fifoLayout(const ConnGeometry& g, uint64_t headerBytes, uint64_t slotAlign) {
  FifoLayout l;
  l.controlOffset = alignUp(headerBytes, 64);
  l.slotsOffset = alignUp(l.controlOffset + fifoControlBytes(g.nSlots), slotAlign);
  const uint64_t slotsEnd = l.slotsOffset + uint64_t{g.nSlots} * g.slotBytes;
  l.llSlotsOffset = alignUp(slotsEnd, slotAlign);
  const uint64_t llBytes = uint64_t{g.nSlots} * g.llSlotBytes;
  l.total = llBytes > 0 ? l.llSlotsOffset + llBytes : slotsEnd;
  return l;
}

// The view of the FIFO at `base` (no LL memory when g.llSlotBytes is 0). The doorbell stays
// null: for FIFOs in shared memory the peer sleeps on the counters themselves.
inline ConnectorView fifoView(char* base, const FifoLayout& l, const ConnGeometry& g) {
  ConnectorView v{};
  v.control = reinterpret_cast<FifoControl*>(base + l.controlOffset);
  v.slots = base + l.slotsOffset;
  v.nSlots = g.nSlots;
  v.slotBytes = g.slotBytes;
  v.llSlots = g.llSlotBytes > 0 ? base + l.llSlotsOffset : nullptr;
  v.llSlotBytes = g.llSlotBytes;
  return v;
}

}  // namespace ringcc
