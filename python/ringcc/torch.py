"""`import ringcc.torch` registers the `ringcc` backend of torch.distributed (CPU tensors):

    import torch
    import torch.distributed as dist
    import ringcc.torch
    dist.init_process_group("ringcc", init_method="env://")

Importing loads ringcc's libnccl.so.2 (RINGCC_LIB, else the build tree, else the install
prefix) and fails if it cannot, so a wrong library never gets as far as a collective. It also
fails (ImportError naming the version) on a torch the backend cannot serve: it runs on torch
1.13 and 2.x (_torch_compat says how each is served).
"""

import datetime

import torch
import torch.distributed as dist

from . import library, library_path, version
from ._torch_compat import TORCH2, register, source_rank_lookup
from ._torch_pg import ProcessGroupRingcc

BACKEND = "ringcc"

__all__ = ["BACKEND", "ProcessGroupRingcc", "adasum_hook", "all_reduce_adasum", "library_path",
           "monitored_barrier", "version"]


def _create(store, rank, size, timeout):
    if TORCH2 and dist.get_debug_level() == dist.DebugLevel.DETAIL:
        # torch 2.x would wrap us in its ProcessGroupWrapper, which asks the backend's name
        # in C++ (getBackendName), where a Python backend cannot answer: the first
        # collective would fail on an internal assert.
        raise RuntimeError("ringcc: TORCH_DISTRIBUTED_DEBUG=DETAIL is not supported on torch "
                           f"{torch.__version__} (its ProcessGroupWrapper cannot ask a Python "
                           "backend its name); use INFO or unset it")
    return ProcessGroupRingcc(store, rank, size, timeout)


library()  # load (and check) the library now, not at the first init_process_group
register(BACKEND, _create)
source_rank_lookup()


def _ringcc_group(group, name):
    """The ProcessGroupRingcc behind `group` (None: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupRingcc) and hasattr(pg, "_get_backend"):
        pg = pg._get_backend(torch.device("cpu"))  # torch 2.x: the backend under the group
    if not isinstance(pg, ProcessGroupRingcc):
        raise ValueError(f"ringcc {name}: the group is not a ringcc group ({type(pg).__name__})")
    return pg


def all_reduce_adasum(tensor, group=None, segments=None):
    """Replaces `tensor` on every rank with the Adasum of the ranks' tensors (docs/adasum.md):
    aligned gradients are averaged, orthogonal ones added. `segments`: element counts, each
    its own vector (default: the whole tensor)."""
    _ringcc_group(group, "all_reduce_adasum").adasum(tensor, segments).wait()
    return tensor


def adasum_hook(process_group, bucket):
    """A DDP communication hook combining gradients by Adasum, each parameter its own vector:
    model.register_comm_hook(None, ringcc.torch.adasum_hook) (state None: the default group).
    No division by the world size: Adasum of equal gradients is that gradient."""
    pg = _ringcc_group(process_group, "adasum_hook")
    buffer = bucket.buffer()
    segments = [g.numel() for g in bucket.gradients()]
    return pg.adasum(buffer, segments).get_future().then(lambda f: f.value()[0])


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """dist.monitored_barrier for ringcc groups on any torch: torch 1.13's refuses every
    backend but Gloo before asking the group (on torch 2.x dist.monitored_barrier works too).
    Rank 0 raises RuntimeError naming the ranks that did not arrive within `timeout` (a
    timedelta; default: the group's)."""
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"ringcc monitored_barrier: timeout must be a timedelta, got "
                        f"{type(timeout).__name__}")
    _ringcc_group(group, "monitored_barrier").monitored_barrier(timeout, wait_all_ranks)
