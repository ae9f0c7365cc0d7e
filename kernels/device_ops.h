// The few memory operations device code needs beyond plain loads and stores, in one place for
// both builds (device-clean; the role NCCL's op128.h plays): nvcc gets the PTX, a host build
// (the emulated driver, the SIMT test: tests/support/simt.h) gets atomics with the same
// guarantees. Everything the batch kernel's paths do to memory another thread, block, GPU or
// the host may touch at the same time goes through here, so that a host run of those paths is
// a faithful one.
//
//   ldVolatile16 / stVolatile16   one 16-byte access (an LL line). The device makes it one
//                                 ld/st.volatile.global.v4.u32; the host two 8-byte atomics,
//                                 which keeps what LL relies on: each {data, flag} half is
//                                 seen whole.
//   ldVolatile64 / stVolatile64   one 8-byte access (an LL half line)
//   ldVolatile32 / stVolatile32   a counter, a flag, a status word
//   fenceGpu / fenceSystem        order this thread's earlier accesses before its later ones,
//                                 as seen from the GPU / from the host and other GPUs too
//   atomicAddF64                  *p += v as one atomic step (Adasum's products, summed by
//                                 the blocks of a launch: kernels/adasum_tasks.h)
//   atomicAddSystemU64            *p += v as one atomic step that the host and other GPUs see
//                                 whole (a one-sided signal: kernels/rma_tasks.h)
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"

namespace ringcc {

// Four 32-bit words moved as one 16-byte access (an LlLine's layout: data0, flag0, data1,
// flag1).
struct alignas(16) Word4 {
  uint32_t x, y, z, w;
};

RINGCC_INLINE Word4 ldVolatile16(const void* p) {
  Word4 v;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
#else
  const uint64_t lo = __atomic_load_n(static_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
  const uint64_t hi = __atomic_load_n(static_cast<const uint64_t*>(p) + 1, __ATOMIC_RELAXED);
  v.x = static_cast<uint32_t>(lo);
  v.y = static_cast<uint32_t>(lo >> 32);
  v.z = static_cast<uint32_t>(hi);
  v.w = static_cast<uint32_t>(hi >> 32);
#endif
  return v;
}

RINGCC_INLINE void stVolatile16(void* p, const Word4& v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
#else
  __atomic_store_n(static_cast<uint64_t*>(p), (uint64_t)v.x | ((uint64_t)v.y << 32),
                   __ATOMIC_RELAXED);
  __atomic_store_n(static_cast<uint64_t*>(p) + 1, (uint64_t)v.z | ((uint64_t)v.w << 32),
                   __ATOMIC_RELAXED);
#endif
}

RINGCC_INLINE uint64_t ldVolatile64(const void* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const volatile uint64_t*>(p);
#else
  return __atomic_load_n(static_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
#endif
}

RINGCC_INLINE void stVolatile64(void* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  *static_cast<volatile uint64_t*>(p) = v;
#else
  __atomic_store_n(static_cast<uint64_t*>(p), v, __ATOMIC_RELAXED);
#endif
}

RINGCC_INLINE uint32_t ldVolatile32(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const volatile uint32_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

RINGCC_INLINE void stVolatile32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  *static_cast<volatile uint32_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

RINGCC_INLINE void fenceGpu() {
#if defined(__CUDA_ARCH__)
  __threadfence();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

RINGCC_INLINE void fenceSystem() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

RINGCC_INLINE void atomicAddF64(double* p, double v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(p, v);
#else
  uint64_t seen = __atomic_load_n(reinterpret_cast<uint64_t*>(p), __ATOMIC_RELAXED);
  for (;;) {
    double now;
    __builtin_memcpy(&now, &seen, sizeof now);
    now += v;
    uint64_t next;
    __builtin_memcpy(&next, &now, sizeof next);
    if (__atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p), &seen, next, true,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return;
  }
#endif
}

RINGCC_INLINE void atomicAddSystemU64(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

}  // namespace ringcc
