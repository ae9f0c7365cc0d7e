// The Direct protocol's part of the runner (kernels/prims.h), device-clean: slices sent by
// reference instead of copied, and how a receiver reads them.
//
// A Direct step whose elements lie in a user buffer (its output, or its input when it sends the
// input as it is) publishes a SlotRef to them in the slot instead of the elements, where the
// receiver declared it can read references (FifoControl::refKind):
//   kRefPointer  same address space: the receiver reads through the pointer;
//   kRefProcess  another process on this host (host only): process_vm_readv;
//   kRefMapped   another process (host only): the receiver maps the sender's shareable buffer
//                (ncclMemAlloc's) and reads it in place; other buffers are copied;
//   kRefNetwork  a network proxy sends the elements from there.
// The receiver's head moving past the slot releases the reference; before the runner reports
// done, the sender waits until every reference it sent was released (RefTracker::drain),
// since the caller may reuse its buffers as soon as the operation returns.
#pragma once

#include <stdint.h>

#include "kernels/connector_device.h"
#include "kernels/device_clean.h"
#include "kernels/program.h"
#include "kernels/run_error.h"
#if !defined(__CUDA_ARCH__)
#include "kernels/peer_read.h"
#endif

namespace ringcc {

// Smallest slice sent by reference to another process: below it, a system call per slice
// costs more than the copy it saves (docs/benchmarks.md). References within one process
// have no such cost and no floor. The same floor for the network (kRefNetwork): a small
// slice's copy costs little, and a reference holds the operation until the proxy's send of it
// has completed.
constexpr uint32_t kRefMinBytes = 16384;

// Whether a slice of `bytes` goes by reference to a receiver that declared `kind`.
RINGCC_INLINE bool refWorthIt(uint32_t kind, uint32_t bytes) {
  return kind == kRefPointer ||
         ((kind == kRefProcess || kind == kRefNetwork || kind == kRefMapped) &&
          bytes >= kRefMinBytes);
}

// How a host runner reaches a peer's shareable buffers (kRefMapped): supplied by the executor
// that owns the mappings (the host engine hands in the shm transport's), so that kernels/ names
// no transport. Null where references are never mapped (kernels, the simulator): a Mapped
// reference is then copied by the sender, and refused by a receiver (kRunErrRefKind).
struct PeerMapper {
  // Whether [p, p + bytes) lies in one of this process's shareable buffers; its region if so.
  bool (*findMappable)(const void* p, uint64_t bytes, RefRegion* region);
  // Where the sender `pid`'s region is mapped in this process (mapped on first use); null if
  // it cannot be.
  const char* (*mapPeerRegion)(int pid, const RefRegion& region);
};

// The mapper's answers for one operation: its slices all lie in the same few buffers, so the
// last region found (sender) and the last region mapped (receiver) answer the next slice
// without the mapper's lock and list scan. Cleared when the runner starts an operation: a
// buffer may be freed between operations, never during one (the caller owns it until the
// operation returns, and the peer's until its own does, which waits for our release).
class MappedRefCache {
 public:
  RINGCC_HOST_DEVICE void clear() {
    haveOwn_ = false;
    havePeer_ = false;
  }

  // Sender: whether [p, p + bytes) lies in one of our shareable buffers, its region if so.
  RINGCC_HOST_DEVICE bool find(const PeerMapper* m, const void* p, uint64_t bytes,
                               RefRegion* region) {
    const uint64_t a = (uint64_t)(uintptr_t)p;
    if (!(haveOwn_ && a >= own_.base && a + bytes <= own_.base + own_.bytes)) {
      if (!m || !m->findMappable(p, bytes, &own_)) return false;
      haveOwn_ = true;
    }
    *region = own_;
    return true;
  }

  // Receiver: where the sender `pid`'s region is mapped here, or null.
  RINGCC_HOST_DEVICE const char* map(const PeerMapper* m, int pid, const RefRegion& r) {
    if (havePeer_ && pid == peerPid_ && sameRegion(r, peer_)) return peerBase_;
    const char* base = m ? m->mapPeerRegion(pid, r) : nullptr;
    if (!base) return nullptr;
    havePeer_ = true;
    peerPid_ = pid;
    peer_ = r;
    peerBase_ = base;
    return base;
  }

 private:
  RINGCC_INLINE static bool sameRegion(const RefRegion& a, const RefRegion& b) {
    return a.base == b.base && a.bytes == b.bytes && a.ino == b.ino && a.fd == b.fd;
  }

  bool haveOwn_ = false;
  RefRegion own_ = {};
  bool havePeer_ = false;
  int peerPid_ = 0;
  RefRegion peer_ = {};
  const char* peerBase_ = nullptr;
};

// The references a sender has out, per port, until the receiver's head releases them.
class RefTracker {
 public:
  RINGCC_HOST_DEVICE void reset(int nPorts) {
    draining_ = false;
    drainPort_ = kNoPort;
    for (int i = 0; i < nPorts; i++) out_[i] = 0;
  }

  // A reference went out in slot c of `port`.
  RINGCC_INLINE void sent(uint8_t port, uint32_t c) {
    out_[port] = 1;
    end_[port] = c + 1;
    draining_ = true;
  }

  RINGCC_INLINE bool draining() const { return draining_; }
  // While draining: the send port whose references are still out, else kNoPort.
  RINGCC_INLINE uint8_t drainPort() const { return draining_ ? drainPort_ : kNoPort; }
  // The counter the drain waits on, and the value it stays blocked at.
  RINGCC_INLINE FifoCounter* waitOn() const { return waitOn_; }
  RINGCC_INLINE uint32_t waitValue() const { return waitValue_; }

  // True once every reference sent was released (the receiver's head passed it); else
  // remembers the first counter still waited on.
  template <class Sync>
  RINGCC_HOST_DEVICE bool drain(Sync& sync, const ConnectorView* ports, int nPorts) {
    if (!draining_) return true;
    for (int i = 0; i < nPorts; i++) {
      if (!out_[i]) continue;
      FifoCounter* head = &ports[i].control->head;
      const uint32_t h = sync.load(&head->value);
      if (!counterReached(h, end_[i])) {
        drainPort_ = (uint8_t)i;
        waitOn_ = head;
        waitValue_ = h;
        return false;
      }
      out_[i] = 0;
    }
    draining_ = false;
    drainPort_ = kNoPort;
    return true;
  }

 private:
  bool draining_ = false;  // references are out: wait for their release before done
  uint8_t drainPort_ = kNoPort;
  FifoCounter* waitOn_ = nullptr;
  uint32_t waitValue_ = 0;
  uint8_t out_[kMaxPorts];   // a reference was sent on this port in this run ...
  uint32_t end_[kMaxPorts];  // ... and the head value that releases the last one
};

// A received SlotRef, on a connection whose receiving side declared v.control->refKind: where
// the sender's elements are (*peer: in our address space, or, with *peerPid set, in that
// process: kRefProcess). kRunErrRefKind if this side cannot read it, kRunErrRefRead if mapping
// the sender's buffer failed.
RINGCC_HOST_DEVICE inline RunError takeRef(const ConnectorView& v, const SlotRef* ref,
                                           const PeerMapper* mapper, MappedRefCache& cache,
                                           const void** peer, int32_t* peerPid) {
  *peer = (const void*)(uintptr_t)ref->addr;
  const uint32_t kind = v.control->refKind;  // this side's own word
  if (kind == kRefPointer) return kRunOk;
#if !defined(__CUDA_ARCH__)
  if (kind == kRefProcess && v.refPid > 0) {
    *peerPid = v.refPid;
    return kRunOk;
  }
  if (kind == kRefMapped && v.refPid > 0 && mapper) {
    const char* base = cache.map(mapper, v.refPid, ref->region);
    if (!base || ref->addr < ref->region.base) return kRunErrRefRead;
    *peer = base + (ref->addr - ref->region.base);
    return kRunOk;
  }
#endif
  return kRunErrRefKind;
}

#if !defined(__CUDA_ARCH__)
// A share of n elements of es bytes whose received elements lie at `from` in process `pid`
// (kRefProcess): a copy reads them straight into the output; anything else stages them
// through a small buffer that stays in cache, so they cross memory once.
// range(local, peer, out, send, k) is the runner's reduce-copy of k elements.
template <class Range>
RunError reduceCopyFromProcess(int pid, uint64_t from, uint32_t es, const char* local, char* out,
                               char* send, uint64_t n, bool post, Range range) {
  if (!local && !send && out && !post)
    return peerRead(pid, from, out, n * es) ? kRunOk : kRunErrRefRead;
  char* stage = peerReadStage();
  if (!stage) return kRunErrRefRead;
  const uint64_t per = kPeerReadStageBytes / es;
  for (uint64_t at = 0; at < n; at += per) {
    const uint64_t k = n - at < per ? n - at : per;
    if (!peerRead(pid, from + at * es, stage, k * es)) return kRunErrRefRead;
    range(local ? local + at * es : nullptr, stage, out ? out + at * es : nullptr,
          send ? send + at * es : nullptr, k);
  }
  return kRunOk;
}
#endif

}  // namespace ringcc
