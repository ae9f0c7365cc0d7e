/* Stand-in for the CUDA runtime's header, for compiling NVIDIA's reference nccl.h without a CUDA
 * toolkit (tests/abi, tests/unit/abi_real.cc): only what nccl.h uses, with CUDA's own typedefs,
 * so sizes and layouts are those of the real header. */
#pragma once
#include <stddef.h> /* the real one brings size_t */
#define CUDART_VERSION 12080
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
