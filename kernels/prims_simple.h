// The Simple protocol's part of the runner (kernels/prims.h), device-clean: a slot's elements
// lie in the connection's slots; its size and the sender's signature in control->meta[slot],
// written before tail moves, so that a receiver that sees tail past the slot sees both. Direct
// uses the same slots (a slot then holds a SlotRef: kernels/prims_direct.h).
#pragma once

#include <stdint.h>

#include "kernels/connector_device.h"
#include "kernels/device_clean.h"

namespace ringcc {

// The data of the slot that counter value c names.
RINGCC_INLINE char* simpleSlot(const ConnectorView& v, uint32_t c) {
  return v.slots + (size_t)(c & (v.nSlots - 1)) * v.slotBytes;
}

// Receive: whether slot c is filled, i.e. tail is past c, not merely different from it: tail
// may lag behind our head. An LL receive takes a slot by its lines' flags, so a receiver can
// finish an LL call (head c) before the sender's store of tail c reaches it (a sender preempted
// between its lines and that store, say); a Simple or Direct call right after on the same
// connection then reads tail c - 1, and taking "tail != head" for a filled slot read slot c's
// stale size and signature. *seen caches the tail last read: it is re-read only when the
// cached value is used up.
template <class Sync>
RINGCC_HOST_DEVICE bool simpleFilled(Sync& sync, const ConnectorView& v, uint32_t c,
                                     uint32_t* seen) {
  if (counterReached(*seen, c + 1)) return true;
  *seen = sync.load(&v.control->tail.value);
  return counterReached(*seen, c + 1);
}

// The size word and signature the sender of slot c wrote.
RINGCC_INLINE const SlotMeta& simpleMeta(const ConnectorView& v, uint32_t c) {
  return v.control->meta[c & (v.nSlots - 1)];
}

// Signs slot c: its size word (bytes, kSlotRefBit for a reference) and the sender's call.
RINGCC_INLINE void simpleSign(const ConnectorView& v, uint32_t c, uint32_t size,
                              const OpSig& sig) {
  SlotMeta& meta = v.control->meta[c & (v.nSlots - 1)];
  meta.size = size;
  meta.sig = sig;
}

}  // namespace ringcc
