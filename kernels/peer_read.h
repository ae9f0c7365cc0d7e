// Reading another process's memory on this host (host only): the receive side of the Direct
// protocol's kRefProcess references (kernels/prims.h). Cross-memory attach
// (process_vm_readv) copies straight from the sender's pages into ours in one pass; it needs
// the right to ptrace the sender (same user, no Yama restriction), which the shm transport
// probes when it connects (peerReadWorks) before it lets the sender send references.
#pragma once

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <new>

namespace ringcc {

// Copies `bytes` from address `remote` of process `pid` to `local`. False if the kernel
// refused or the range is not mapped there (errno tells why).
inline bool peerRead(int pid, uint64_t remote, void* local, uint64_t bytes) {
  char* to = static_cast<char*>(local);
  while (bytes > 0) {
    iovec l{to, bytes};
    iovec r{reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    to += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return true;
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
