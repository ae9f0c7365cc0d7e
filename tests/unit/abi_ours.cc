#include "nccl.h"
#define ABI_NS abi_ours
#include "unit/abi_table.inc"
