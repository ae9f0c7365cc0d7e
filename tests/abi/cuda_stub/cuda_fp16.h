/* Stand-in: nccl.h includes it and uses none of it (see cuda_runtime.h here). */
#pragma once
