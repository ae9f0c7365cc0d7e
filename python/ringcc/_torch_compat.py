"""Which torch this is, and what the ringcc backend builds on there.

torch 1.13 takes a Python subclass of dist.ProcessGroup as a whole process group, and
Backend.register_backend(name, fn) knows nothing of devices. torch 2.x wraps a backend
(torch._C._distributed_c10d.Backend) in a C++ ProcessGroup per device: several of its calls
(batch_isend_irecv, _coalescing_manager, split_group, monitored_barrier) ask the group for
its CPU backend (pg._get_backend), which a ProcessGroup subclass does not have. So on 2.x
ProcessGroupRingcc is a Backend registered for devices=["cpu"]; the group torch builds
around it dispatches to its methods (through pybind11's trampoline, as for a ProcessGroup
subclass on 1.13). torch 2.x also renamed some methods (_allgather_base became
all_gather_single, ...); the group defines both names.

One more torch 2.x difference: its C++ ProcessGroup hands the caller a Work object of its own
over ours, whose _source_rank() (what dist.recv without src calls) stays C++'s and raises:
pybind11's trampoline forwards wait() and get_future() to our Work, not sourceRank(). So on
2.x source_rank_lookup() wraps Work._source_rank / source_rank: when C++'s raises, and the
Work's result is a tensor last filled by a ringcc receive from any source, it gives that
receive's sender; anything else raises as before. It changes no answer torch gives, only
that error.

Any other torch fails here, at import, with its version in the message: a backend that
imported fine and then broke inside a collective would be much harder to diagnose.
"""

import inspect

import torch
import torch.distributed as dist

TESTED = "1.13 and 2.15"


def _version():
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _refuse(why):
    raise ImportError(f"ringcc.torch: torch {torch.__version__} is not supported ({why}); "
                      f"ringcc's backend runs on torch 1.13 and 2.x (tested: {TESTED})")


VERSION = _version()
if VERSION is None:
    _refuse("cannot read its version")
if not dist.is_available():
    _refuse("it was built without torch.distributed")
TORCH2 = VERSION[0] == 2
if VERSION[0] == 1 and VERSION[1] == 13:
    BASE = dist.ProcessGroup
elif TORCH2:
    BASE = getattr(torch._C._distributed_c10d, "Backend", None)
    if BASE is None:
        _refuse("no torch._C._distributed_c10d.Backend to subclass")
    if "devices" not in inspect.signature(dist.Backend.register_backend).parameters:
        _refuse("Backend.register_backend takes no devices")
elif VERSION < (1, 13):
    _refuse("older than 1.13")
else:
    _refuse("a major version after 2: its backend API is unknown to ringcc")


def register(name, create):
    """Registers `create(store, rank, size, timeout)` as backend `name` (once) for CPU."""
    if name.upper() in dist.Backend._plugins:
        return
    if TORCH2:
        dist.Backend.register_backend(name, create, devices=["cpu"])
    else:
        dist.Backend.register_backend(name, create)


def source_rank_lookup():
    """On torch 2.x, lets Work._source_rank() and source_rank() answer for ringcc's receives
    from any source (see the module doc). Once; a no-op on torch 1.13."""
    from torch._C._distributed_c10d import Work

    from ._torch_work import source_of
    if not TORCH2 or getattr(Work, "_ringcc_lookup", False):
        return
    for name in ("_source_rank", "source_rank"):
        original = getattr(Work, name, None)
        if original is None:
            continue

        def lookup(self, _original=original):
            try:
                return _original(self)
            except RuntimeError:
                try:
                    future = self.get_future()
                    value = future.value() if future.done() else None
                except Exception:  # not a Work with a future (not ours): torch's error
                    value = None
                src = source_of(value[0]) if isinstance(value, list) and value else None
                if src is None:
                    raise
                return src

        setattr(Work, name, lookup)
    Work._ringcc_lookup = True
