// NVIDIA's 2.32.3 nccl.h, by absolute path (RINGCC_REFERENCE_NCCL_H, tests/meson.build): the
// reference our header must match. Only this file sees it, compiled on its own with the CUDA
// stand-ins of tests/abi/cuda_stub (no CUDA toolkit needed).
#include RINGCC_REFERENCE_NCCL_H
#define ABI_NS abi_real
#include "unit/abi_table.inc"
