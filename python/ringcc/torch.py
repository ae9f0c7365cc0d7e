"""`import ringcc.torch` registers the `ringcc` backend of torch.distributed (CPU tensors):

    import torch.distributed as dist
    import ringcc.torch
    dist.init_process_group("ringcc", init_method="env://")

Importing loads ringcc's libnccl.so.2 (RINGCC_LIB, else the build tree, else the install
prefix) and fails if it cannot, so a wrong library never gets as far as a collective.
"""

import torch.distributed as dist

from . import library, library_path, version
from ._torch_pg import ProcessGroupRingcc

BACKEND = "ringcc"

__all__ = ["BACKEND", "ProcessGroupRingcc", "library_path", "version"]


def _create(store, rank, size, timeout):
    return ProcessGroupRingcc(store, rank, size, timeout)


library()  # load (and check) the library now, not at the first init_process_group
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)
