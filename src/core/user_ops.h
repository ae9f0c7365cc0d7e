// Reduction operators made by ncclRedOpCreatePreMulSum: a per-communicator table whose
// index, offset by ncclNumOps, is the ncclRedOp_t handle handed to the user.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "nccl.h"

namespace ringcc {

struct UserOp {
  bool live = false;
  ncclDataType_t datatype = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char scalar[8] = {};     // host-immediate: the value, copied at creation
  const void* scalarPtr = nullptr;  // device-resident: read when the collective runs
};

class UserOpTable {
 public:
  ncclRedOp_t add(const UserOp& op);
  // False if `handle` is not a live operator of this table.
  bool remove(ncclRedOp_t handle);
  // The operator behind a live handle, or false.
  bool find(ncclRedOp_t handle, UserOp* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<UserOp> ops_;
};

}  // namespace ringcc
