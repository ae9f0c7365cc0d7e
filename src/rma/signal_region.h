// One rank's signal counters for ncclSignal / ncclPutSignal / ncclWaitSignal (src/rma).
//
// The counters live in a small memfd of the rank that is signalled, so that a signalling peer
// on this host maps it read-write (it opens /proc/<pid>/fd/<fd>, checks the inode, maps it
// shared) and bumps a counter with one atomic add; threads of one process map it the same way,
// so a peer's mapping outlives the owner's (a late signal lands in memory nobody reads, never
// in freed memory). Peers on other hosts add to it by UCX (an atomic add the owner's UCX worker
// performs or the network does, into the region registered with UCX; it rings no bell, so a
// waiter for such a peer naps 100 us at most). Peers that take neither way, or
// where the mapping is refused, send a message that the owner's bootstrap listener turns into
// the same add (src/rma/rma_comm.h).
//
//   header (64 B: magic, geometry)   bell (FifoCounter, 64 B)   counters[sender][ctx][sigIdx]
//
// Each counter is a uint64 that only its sender adds to, so it counts that sender's signals on
// (ctx, sigIdx) since the region was made. A waiter reads counters with acquire order and naps
// on the bell (transports/fifo_host.h), which every add rings after the counter: a waiter that
// sees a count sees everything its sender wrote before the add (release), which is what makes
// a put's data visible before its signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/connector_device.h"
#include "nccl.h"

namespace ringcc {

// How many signal indices and contexts the counters cover.
struct SignalGeometry {
  int nranks = 0;
  int nCtx = 0;
  int nSig = 0;
  size_t bytes() const;
  size_t index(int sender, int ctx, int sigIdx) const {
    return (static_cast<size_t>(sender) * nCtx + ctx) * nSig + sigIdx;
  }
  // Where the counter of (sender, ctx, sigIdx) lies, in bytes from the region's start (a peer
  // that adds to it by UCX names it by the region's address plus this).
  size_t counterOffset(int sender, int ctx, int sigIdx) const;
};

// What a peer needs to map a region: exchanged over the bootstrap at the first window.
struct SignalRegionDesc {
  int32_t pid = 0;
  int32_t fd = -1;  // -1: no memfd (peers signal by message)
  uint64_t inode = 0;
  uint64_t bytes = 0;
};

// A mapping of a region (ours or a peer's): the counters and the bell.
class SignalView {
 public:
  SignalView() = default;
  SignalView(char* base, const SignalGeometry& g) : base_(base), geometry_(g) {}
  bool valid() const { return base_ != nullptr; }
  // Adds one to (sender, ctx, sigIdx) (release), then rings the bell.
  void bump(int sender, int ctx, int sigIdx) const;
  // The count of (sender, ctx, sigIdx), acquire.
  uint64_t count(int sender, int ctx, int sigIdx) const;
  FifoCounter* bell() const;
  // The counter of (sender, ctx, sigIdx) itself (CUDA communicators hand it to kernels).
  uint64_t* counter(int sender, int ctx, int sigIdx) const;
  char* base() const { return base_; }

 private:
  char* base_ = nullptr;
  SignalGeometry geometry_;
};

// The rank's own region (owner of the memfd and its mapping), or a peer's mapping.
class SignalRegion {
 public:
  ~SignalRegion();
  SignalRegion(const SignalRegion&) = delete;
  SignalRegion& operator=(const SignalRegion&) = delete;

  // A zero-filled region of this process. Without memfd it is plain memory (desc().fd -1).
  static ncclResult_t create(const SignalGeometry& g, std::unique_ptr<SignalRegion>* out);
  // Peer's region mapped here; null (no error raised) if it cannot be: gone, other file, no
  // permission, or another geometry.
  static std::unique_ptr<SignalRegion> mapPeer(const SignalRegionDesc& d, const SignalGeometry& g);

  SignalRegionDesc desc() const { return desc_; }
  SignalView view() const { return SignalView(base_, geometry_); }

 private:
  SignalRegion() = default;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;  // munmap (else free)
  int fd_ = -1;          // ours only
  SignalGeometry geometry_;
  SignalRegionDesc desc_;
};

}  // namespace ringcc
