// Test helper: moves a byte stream through one FIFO connection, slot by slot, the way the
// primitives will (wait, copy, size, publish), with deterministic, varying chunk sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/connector_device.h"
#include "transports/fifo_host.h"

namespace ringcc::test {

// Byte `i` of stream `seed`: every byte differs from its neighbours and from other seeds.
inline uint8_t streamByte(uint64_t i, uint32_t seed) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t{seed} << 32);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint8_t>(x >> 56);
}

inline std::vector<uint8_t> makeStream(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = streamByte(i, seed);
  return v;
}

// Sends `n` bytes; *tail is the sender's counter (starts at the FIFO's initial tail).
inline ncclResult_t sendStream(const ConnectorView& v, uint32_t* tail, const uint8_t* data,
                               size_t n, const WaitOptions& o) {
  uint64_t rng = 12345;
  size_t sent = 0;
  while (sent < n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    size_t chunk = std::min<size_t>(n - sent, 1 + (rng >> 33) % v.slotBytes);
    ncclResult_t r = waitSlotFree(v, *tail, o);
    if (r != ncclSuccess) return r;
    std::memcpy(fifoSlotData(v, *tail), data + sent, chunk);
    v.control->meta[fifoSlot(v, *tail)].size = static_cast<uint32_t>(chunk);
    publishCounter(&v.control->tail, *tail + 1);
    ++*tail;
    sent += chunk;
  }
  return ncclSuccess;
}

// Receives exactly `n` bytes; *step is the receiver's counter. ncclInternalError if a slot
// would overflow `n` or claims more than a slot holds.
inline ncclResult_t recvStream(const ConnectorView& v, uint32_t* step, uint8_t* out, size_t n,
                               const WaitOptions& o) {
  size_t got = 0;
  while (got < n) {
    ncclResult_t r = waitSlotFilled(v, *step, o);
    if (r != ncclSuccess) return r;
    uint32_t size = v.control->meta[fifoSlot(v, *step)].size;
    if (size == 0 || size > v.slotBytes || got + size > n) return ncclInternalError;
    std::memcpy(out + got, fifoSlotData(v, *step), size);
    publishCounter(&v.control->head, *step + 1);
    ++*step;
    got += size;
  }
  return ncclSuccess;
}

// Receives up to `count` slots, appending their bytes to *out; stops at the first failure.
inline ncclResult_t recvSlots(const ConnectorView& v, uint32_t* step, size_t count,
                              std::vector<uint8_t>* out, const WaitOptions& o) {
  for (size_t i = 0; i < count; ++i) {
    ncclResult_t r = waitSlotFilled(v, *step, o);
    if (r != ncclSuccess) return r;
    uint32_t size = v.control->meta[fifoSlot(v, *step)].size;
    if (size == 0 || size > v.slotBytes) return ncclInternalError;
    const char* data = fifoSlotData(v, *step);
    out->insert(out->end(), data, data + size);
    publishCounter(&v.control->head, *step + 1);
    ++*step;
  }
  return ncclSuccess;
}

// Options for tests: default spin, a deadline `seconds` from now.
inline WaitOptions testWaitOptions(const Connector* conn, double seconds = 20) {
  WaitOptions o;
  o.conn = conn;
  o.deadline = WaitClock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  return o;
}

}  // namespace ringcc::test
