// Portability macros for headers shared by host code and CUDA kernels ("device-clean"):
// no STL, no exceptions, no host-only calls. Compiled by g++ for the host executor and by
// nvcc for the kernels, so both run the very same arithmetic and schedules.
#pragma once

#if defined(__CUDACC__)
#define RINGCC_HOST_DEVICE __host__ __device__
#define RINGCC_INLINE __host__ __device__ __forceinline__
#else
#define RINGCC_HOST_DEVICE
#define RINGCC_INLINE inline __attribute__((always_inline))
#endif
