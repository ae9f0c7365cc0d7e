#include "src/core/user_ops.h"

namespace ringcc {

ncclRedOp_t UserOpTable::add(const UserOp& op) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t slot = 0;
  while (slot < ops_.size() && ops_[slot].live) ++slot;  // reuse destroyed handles
  if (slot == ops_.size()) ops_.emplace_back();
  ops_[slot] = op;
  ops_[slot].live = true;
  return static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(slot));
}

bool UserOpTable::remove(ncclRedOp_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t slot = static_cast<size_t>(handle) - ncclNumOps;
  if (handle < ncclNumOps || slot >= ops_.size() || !ops_[slot].live) return false;
  ops_[slot].live = false;
  return true;
}

bool UserOpTable::find(ncclRedOp_t handle, UserOp* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t slot = static_cast<size_t>(handle) - ncclNumOps;
  if (handle < ncclNumOps || slot >= ops_.size() || !ops_[slot].live) return false;
  *out = ops_[slot];
  return true;
}

}  // namespace ringcc
