// One named POSIX shared-memory segment, mapped into this process.
//
// The creator makes it with O_CREAT|O_EXCL and mode 0600 (forced with fchmod, whatever the
// umask), reserves its pages with fallocate (so a full /dev/shm is an error now, not a SIGBUS
// later) and maps it. Another process opens it by name, maps it, and unlinks the name at once:
// from then on only the two mappings keep the memory, so a crash of either side leaves nothing
// behind. The creator also unlinks on destruction if the name is still there (ENOENT ignored),
// which covers a peer that never attached. A creator that dies before its peer attached
// leaves the name; its name carries its pid and pid namespace, so that whoever learns of the
// death can remove it (removeNamesOf).
#pragma once

#include <cstddef>

#include "nccl.h"

namespace ringcc {

class ShmSegment {
 public:
  static constexpr size_t kNameBytes = 64;

  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // New zero-filled segment of `bytes` named /ringcc-<pid>-<pidns>-<counter>-<random> (pidns:
  // the pid namespace's inode, in hex). `peer` names the rank in error messages.
  static ncclResult_t create(size_t bytes, int peer, ShmSegment* out);

  // Unlinks every name that process `pid` of this pid namespace created. Only for a process
  // known to have exited: a live one may still be waiting for its peer to attach. Returns how
  // many names it removed.
  static int removeNamesOf(int pid);

  // Maps the segment `name`, which must be exactly `bytes` long, then unlinks the name.
  static ncclResult_t attach(const char* name, size_t bytes, int peer, ShmSegment* out);

  // Removes the name if this process still may (idempotent; the mapping stays).
  void unlinkName();

  void* base() const { return base_; }
  size_t size() const { return bytes_; }
  const char* name() const { return name_; }

 private:
  void release();

  void* base_ = nullptr;
  size_t bytes_ = 0;
  char name_[kNameBytes] = {};
  bool nameLinked_ = false;  // this object still has to unlink name_
};

}  // namespace ringcc
