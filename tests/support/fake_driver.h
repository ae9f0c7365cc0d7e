// How a test fakes the CUDA driver: the stand-in libcuda.so.1 (tests/support/fake_libcuda)
// answers every driver call with `table`'s entry (null: CUDA_ERROR_NOT_INITIALIZED, as a driver
// not yet initialized). The stand-in is loaded by its path on the first call and stays loaded
// for the process; from then on the library under test finds it as "libcuda.so.1", as it would
// find the real driver, and no hook of the shipped library is involved. `table` must outlive
// its installation. Aborts, saying why, where a real libcuda.so.1 is already in the process.
#pragma once

#include "src/base/cuda_driver.h"

namespace ringcc::test {

void installFakeCudaDriver(const CudaDriver* table);

}  // namespace ringcc::test
