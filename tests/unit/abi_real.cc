// NVIDIA's nccl.h, by absolute path: the reference our header must match. Only this file
// sees it (tests/unit/meson.build builds it only where the header is installed).
#include "/usr/local/cuda/include/nccl.h"
#define ABI_NS abi_real
#include "unit/abi_table.inc"
