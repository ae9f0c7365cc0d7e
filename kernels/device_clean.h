// Portability macros for headers shared by host code and CUDA kernels ("device-clean"):
// no STL, no exceptions, no host-only calls. Compiled by g++ for the host executor and by
// nvcc for the kernels, so both run the very same arithmetic and schedules.
#pragma once

#if defined(__CUDACC__)
#define RINGCC_HOST_DEVICE __host__ __device__
#define RINGCC_INLINE __host__ __device__ __forceinline__
// Hot loops: inlined on the device; on the host kept out of line (below).
#define RINGCC_LOOP __host__ __device__ inline
// Kept out of line on both sides: code called from an unrolled loop, once, not once per copy.
#define RINGCC_NOINLINE __host__ __device__ __noinline__
#else
#define RINGCC_HOST_DEVICE
#define RINGCC_INLINE inline __attribute__((always_inline))
// A host loop over restrict-qualified parameters stays its own function: GCC forgets
// `restrict` when it inlines, and at -O2 it will not add run-time alias checks, so an
// inlined loop would not vectorize.
#define RINGCC_LOOP inline __attribute__((noinline))
#define RINGCC_NOINLINE __attribute__((noinline))
#endif

// A host loop bound by arithmetic rather than by memory (Adasum's products and combination in
// double: kernels/adasum.h): as RINGCC_LOOP, built twice on x86-64, for the baseline (SSE2,
// two doubles per instruction) and for x86-64-v3 (AVX2 and FMA, four), and the loader picks
// the one the CPU runs (GCC's target_clones, an ifunc). Elsewhere, and on the device, a plain
// RINGCC_LOOP. GCC only: clang 14 (the fuzz build) refuses target_clones beside noinline and
// on templates. Not under ThreadSanitizer: the ifunc's resolver runs while the loader
// relocates, before TSan's runtime is up, and its instrumented entry crashes the process.
#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define RINGCC_LOOP_WIDE \
  inline __attribute__((noinline, target_clones("arch=x86-64-v3", "default")))
#else
#define RINGCC_LOOP_WIDE RINGCC_LOOP
#endif

// A loop of a compile-time trip count, unrolled so that its loads can all be in flight.
#if defined(__CUDACC__)
#define RINGCC_UNROLL _Pragma("unroll")
#else
#define RINGCC_UNROLL _Pragma("GCC unroll 16")
#endif
