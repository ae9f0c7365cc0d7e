// Makes a CUDA context current on the calling thread for a scope's life, then restores the
// previous one: the user's thread keeps the device it had. Used wherever ringcc calls the
// driver on a communicator's behalf (its engine, its one-sided operations).
#pragma once

#include "src/base/cuda_driver.h"

namespace ringcc {

class ContextScope {
 public:
  ContextScope(const CudaDriver& cu, CuContext ctx) : cu_(cu), ctx_(ctx) {
    if (cu_.cuCtxGetCurrent(&previous_) != kCuSuccess) previous_ = nullptr;
    if (previous_ != ctx_) cu_.cuCtxSetCurrent(ctx_);
  }
  ~ContextScope() {
    if (previous_ != ctx_) cu_.cuCtxSetCurrent(previous_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const CudaDriver& cu_;
  CuContext ctx_;
  CuContext previous_ = nullptr;
};

}  // namespace ringcc
