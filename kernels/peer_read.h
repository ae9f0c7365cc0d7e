// Reading and writing another process's memory on this host (host only): the receive side of the
// Direct protocol's kRefProcess references (kernels/prims.h), and one-sided puts (src/rma).
// Cross-memory attach (process_vm_readv) copies straight from the sender's pages into ours in
// one pass; it needs the right to ptrace the sender (same user, no Yama restriction), which the
// shm transport probes when it connects (peerReadWorks) before it lets the sender send
// references.
#pragma once

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <new>

namespace ringcc {

// One cross-memory-attach copy of `bytes` between our `local` and address `remote` of process
// `pid`, resumed after partial copies and EINTR: `op` is process_vm_readv (read the peer) or
// process_vm_writev (write it). False if the kernel refused or the range is not mapped there
// (errno tells why).
template <typename Op>
inline bool peerCopy(Op op, int pid, uint64_t remote, char* local, uint64_t bytes) {
  while (bytes > 0) {
    iovec l{local, bytes};
    iovec r{reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = op(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    local += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return true;
}

// Copies `bytes` from address `remote` of process `pid` to `local`.
inline bool peerRead(int pid, uint64_t remote, void* local, uint64_t bytes) {
  return peerCopy(process_vm_readv, pid, remote, static_cast<char*>(local), bytes);
}

// Copies `bytes` from `local` to address `remote` of process `pid` (one-sided puts, src/rma).
inline bool peerWrite(int pid, uint64_t remote, const void* local, uint64_t bytes) {
  return peerCopy(process_vm_writev, pid, remote,
                  const_cast<char*>(static_cast<const char*>(local)), bytes);
}

// Staging for a reduction whose peer elements are read from another process: small enough to
// stay in a core's cache between the read and the reduce-copy.
constexpr uint64_t kPeerReadStageBytes = 64 * 1024;

// This thread's staging buffer (allocated at first use, 64-byte aligned; null if out of
// memory). A pointer in thread-local storage, not the buffer itself, so a library loaded
// with dlopen does not ask for 64 KiB of static TLS.
inline char* peerReadStage() {
  struct Free {
    void operator()(char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  static thread_local std::unique_ptr<char[], Free> stage;
  if (!stage)
    stage.reset(static_cast<char*>(
        ::operator new[](kPeerReadStageBytes, std::align_val_t{64}, std::nothrow)));
  return stage.get();
}

// Whether this process may read `pid`'s memory: reads 8 bytes at `addr` there and compares
// them with `expect` (the peer told us what lies there).
inline bool peerReadWorks(int pid, uint64_t addr, uint64_t expect) {
  uint64_t got = 0;
  return pid > 0 && addr != 0 && peerRead(pid, addr, &got, sizeof(got)) && got == expect;
}

}  // namespace ringcc
