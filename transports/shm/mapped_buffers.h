// Buffers that other processes on this host can map: the host memory of ncclMemAlloc.
//
// Each allocation is its own memfd, mapped shared here and kept open for its life. A peer
// process that is handed a reference into one (a SlotRef carrying the RefRegion: our fd
// number, the file's inode, the mapping's base and size) opens /proc/<our pid>/fd/<fd>, checks
// the inode, and maps the file read-only: from then on the Direct protocol's receiver reads
// the sender's elements in place, one copy, as threads of one process do (kRefMapped,
// kernels/connector_device.h). Opening another process's fd needs the same access as
// reading its /proc entries (same user); the shm transport tries a probe region at connect
// time and falls back to copies through the segment where that fails.
//
// Peer mappings are cached per (pid, inode) for the life of the process: a mapping keeps the
// peer's pages even after the peer frees them, so an entry whose peer range is taken over by a
// newer region of the same peer (freed, then reallocated) is unmapped when the newer one is
// mapped. No operation can still read it then: the peer frees a buffer only after the
// operations that referenced it returned, and each of those waited for our release. Other
// mappings (a peer's buffers still alive, or those of a peer that exited) stay until exit.
//
// Unlike malloc's, this memory is shared, not copied on write, with a child forked after
// ncclMemAlloc (as NCCL's GPU memory is not copied either).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/connector_device.h"

namespace ringcc {

// A new shareable buffer of `bytes` (page aligned), or null with errno set.
void* allocMappable(size_t bytes);

// Frees a buffer of allocMappable; false if `p` is not the start of one.
bool freeMappable(void* p);

// The region of this process's shareable buffers that holds [p, p + bytes), if any.
bool findMappable(const void* p, uint64_t bytes, RefRegion* region);

// Process `pid`'s region mapped read-only here (mapped at the first call, then cached): our
// address of its base, or null if it cannot be mapped (gone, not the same file any more, no
// permission).
const char* mapPeerRegion(int pid, const RefRegion& region);

// A small region of this process whose first 8 bytes hold kMappedProbeValue, made at the first
// call (false if it cannot be): what a peer maps to find out whether it can (mappedReadWorks).
bool mappedProbe(RefRegion* region);
constexpr uint64_t kMappedProbeValue = 0x72696e6763632d6dULL;  // "ringcc-m"

// Whether this process can map process `pid`'s regions: maps its probe and reads the value.
bool mappedReadWorks(int pid, const RefRegion& probe);

// How many peer regions this process has mapped so far (tests: proof that references were
// read in place).
uint64_t mappedPeerRegions();

}  // namespace ringcc
