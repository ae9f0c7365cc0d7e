"""ProcessGroupRingcc: torch.distributed's collectives on CPU tensors, run by ringcc.

Each call checks its arguments on the caller's thread (bad input raises right there), then
queues the operation for the group's progress thread (_queue.OpQueue, which also batches
sends and receives) and returns a Work (_torch_work.RingccWork) whose future completes later.
The progress thread runs the queue in order (every rank issues the same collectives in the
same order, so the order matches across ranks) and completes the future with the output
tensors, or with an exception that names the collective and ringcc's reason.

This file: set-up, queueing, splitting and the reductions; _torch_moves.py: everything that
only moves bytes; _torch_p2p.py: sends, receives (from any source too) and barriers;
_torch_coalesced.py: the coalesced forms and the coalescing manager; _torch_args.py: argument
checks; _torch_compat.py: what the class derives from (torch 1.13: dist.ProcessGroup, torch
2.x: the c10d Backend that torch puts under its own ProcessGroup).
ringcc's calls on host memory return when the result is in place and ctypes drops the GIL
around them, so DDP's backward pass keeps computing while a bucket is being all-reduced.

Why ctypes and not a C++ extension: a bucket all-reduce moves megabytes, so the ~10 us of a
ctypes call is noise, and a Python module needs no compiler or torch headers at install time
and works with whichever torch is installed.
"""

import contextlib
import functools
import os
import threading
import weakref

import torch
import torch.distributed as dist

from . import _comm as C
from ._queue import Job, OpQueue
from ._torch_args import Staged, cpu_tensor, one, ptr, same, scaled
from ._torch_coalesced import CoalescedOps
from ._torch_compat import BASE
from ._torch_moves import DataMovementOps
from ._torch_p2p import PointToPointOps
from ._torch_types import BITWISE, bytes_view, premul_factor, reduce_view
from ._torch_work import RingccWork

_UID_KEY = "ringcc_unique_id"
ADASUM_DTYPES = {torch.float16: C.FLOAT16, torch.bfloat16: C.BFLOAT16,
                 torch.float32: C.FLOAT32, torch.float64: C.FLOAT64}


@contextlib.contextmanager
def _timeout_from_torch(timeout):
    """torch's group timeout (init_process_group / new_group, default 30 min) becomes the
    communicator's NCCL_TIMEOUT (how long an operation waits for a peer) and
    NCCL_BOOTSTRAP_TIMEOUT (how far apart the ranks may arrive here), as Gloo honours it for
    both, unless the user set them (NCCL_X or RINGCC_X). ringcc reads them from the
    environment when the communicator is made, so they are set only around that; groups are
    made one at a time, on the caller's thread."""
    added = []
    if timeout is not None:
        ms = str(max(1, int(timeout.total_seconds() * 1000)))
        for name in ("TIMEOUT", "BOOTSTRAP_TIMEOUT"):
            if "NCCL_" + name not in os.environ and "RINGCC_" + name not in os.environ:
                os.environ["RINGCC_" + name] = ms
                added.append("RINGCC_" + name)
    try:
        yield
    finally:
        for name in added:
            del os.environ[name]


class ProcessGroupRingcc(DataMovementOps, PointToPointOps, CoalescedOps, BASE):
    """A torch.distributed process group (torch 2.x: backend) on one ringcc communicator
    (see module doc)."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._store = store
        self._store_lock = threading.Lock()
        self._timeout = timeout
        # Sends announced in the store, for receives from any source (_torch_p2p); off with
        # RINGCC_ANY_SOURCE=0 (on every rank) when the group makes its communicator.
        self._announce = os.environ.get("RINGCC_ANY_SOURCE", "1") != "0"
        self._matched = [0] * size  # receives matched per sender (_torch_p2p)
        self._any_start = 0
        self._mb_seq = 0            # monitored barriers so far
        self._coalesced = None      # futures of ops since _start_coalescing, else None
        # Rank 0 makes the 128-byte unique id; the others read it from the c10d store (a
        # PrefixStore per group, so every group gets its own id).
        if rank == 0:
            uid = C.Communicator.new_unique_id()
            store.set(_UID_KEY, uid)
        else:
            uid = store.get(_UID_KEY)
        try:
            with _timeout_from_torch(timeout):
                self._comm = C.Communicator(uid, size, rank)
        except C.NcclError as e:
            raise C.NcclError(e.call, e.code, e.detail,
                              collective=f"group init (rank {rank} of {size})") from None
        self._queue = OpQueue(self._comm, f"ringcc-progress-r{rank}")
        # When the group goes away (destroy_process_group, or interpreter exit: finalize
        # runs at exit too) the thread destroys the communicator.
        weakref.finalize(self, self._queue.stop)

    def getBackendName(self):
        return "ringcc"

    def store_call(self, method, *args):
        """One call on the group's c10d store; our threads take turns (torch 1.13's
        TCPStore client is not safe to share between threads)."""
        with self._store_lock:
            return getattr(self._store, method)(*args)

    def _track(self, future):
        if self._coalesced is not None:
            self._coalesced.append(future)

    def _submit(self, name, run, result):
        future = torch.futures.Future()
        self._track(future)
        work = RingccWork(name, future)
        self._queue.put(Job(name, run, future, result, work))  # the queue keeps `work` alive
        return work

    def _submit_p2p(self, name, issue, result, finish=None):
        """A send or receive: issue() runs inside its batch's group (see _queue)."""
        future = torch.futures.Future()
        self._track(future)
        work = RingccWork(name, future, flush=self._queue.flush)
        self._queue.add_p2p(Job(name, issue, future, result, work, finish))
        return work

    # --- torch 2.x: options, split_group, shutdown -----------------------------------

    @property
    def options(self):
        """The Backend.Options torch 2.x's split_group starts from."""
        return BASE.Options("ringcc", self._timeout) if self._timeout else BASE.Options("ringcc")

    @property
    def supports_splitting(self):
        return True

    def split(self, store, ranks, opts=None):
        """dist.split_group (torch 2.x): a new group of `ranks` (ranks of this group, the
        caller among them) on its own communicator; `store` is the new group's own."""
        ranks = list(ranks)
        if self.rank() not in ranks:
            raise ValueError(f"ringcc split: rank {self.rank()} is not in {ranks}")
        timeout = getattr(opts, "_timeout", None) or self._timeout
        return type(self)(store, ranks.index(self.rank()), len(ranks), timeout)

    def shutdown(self):
        """destroy_process_group (torch 2.x): the queued work finishes, then the
        communicator goes (as when the group is collected)."""
        self._queue.stop()

    def _root(self, name, root):
        if not 0 <= root < self.size():
            raise ValueError(f"ringcc {name}: root {root} is outside 0..{self.size() - 1}")
        return root

    # --- reductions -------------------------------------------------------------------

    def _reduce_call(self, view, dtype, kind, factor, call):
        """Runs call(nccl_op) for a built-in op, or for a PreMulSum op of `factor`."""
        if kind == "premul":
            scalar = torch.tensor([factor], dtype=view.dtype)  # the factor in the data type
            nccl_op = self._comm.premul_sum_op(scalar.data_ptr(), dtype)
            try:
                call(nccl_op)
            finally:
                self._comm.destroy_op(nccl_op)
        else:
            call(kind)

    def _gathered(self, flat):
        """All-gathers a contiguous tensor's bytes: a [size, *flat.shape] tensor."""
        out = torch.empty((self.size(),) + tuple(flat.shape), dtype=flat.dtype)
        src = bytes_view(flat)
        self._comm.all_gather(ptr(src), ptr(out), src.numel(), C.UINT8)
        return out

    def allreduce(self, tensors, opts=None):
        name = "all_reduce"
        opts = opts or dist.AllreduceOptions()
        t = Staged(one(name, tensors))
        view, dtype, kind = reduce_view(name, t.t, opts.reduceOp)
        factor = premul_factor(name, opts.reduceOp) if kind == "premul" else None

        def run():
            if kind in BITWISE.values():
                t.t.copy_(functools.reduce(kind, self._gathered(t.t)))
            else:
                self._reduce_call(view, dtype, kind, factor, lambda o: self._comm.all_reduce(
                    ptr(view), ptr(view), view.numel(), dtype, o))
            t.copy_back()

        return self._submit(name, run, [t.orig])

    def adasum(self, tensor, segments=None):
        """Adasum all-reduce of `tensor` in place (include/ringcc.h); `segments`: element
        counts, each its own vector (None: the whole tensor). Returns a Work."""
        name = "all_reduce_adasum"
        t = Staged(cpu_tensor(name, tensor))
        if t.t.dtype not in ADASUM_DTYPES:
            raise TypeError(f"ringcc {name}: Adasum takes float16, bfloat16, float32 or "
                            f"float64, got {t.t.dtype}")
        dtype = ADASUM_DTYPES[t.t.dtype]
        segs = [int(n) for n in segments] if segments else None

        def run():
            self._comm.all_reduce_adasum(ptr(t.t), ptr(t.t), t.t.numel(), dtype, segs)
            t.copy_back()

        return self._submit(name, run, [t.orig])

    def reduce(self, tensors, opts=None):
        name = "reduce"
        opts = opts or dist.ReduceOptions()
        t = Staged(one(name, tensors))
        root = self._root(name, opts.rootRank)
        view, dtype, kind = reduce_view(name, t.t, opts.reduceOp)
        factor = premul_factor(name, opts.reduceOp) if kind == "premul" else None

        def run():
            if kind in BITWISE.values():
                result = functools.reduce(kind, self._gathered(t.t))
                if self.rank() == root:
                    t.t.copy_(result)
            else:
                self._reduce_call(view, dtype, kind, factor, lambda o: self._comm.reduce(
                    ptr(view), ptr(view), view.numel(), dtype, o, root))
            if self.rank() == root:
                t.copy_back()

        return self._submit(name, run, [t.orig])

    def _reduce_scatter_flat(self, name, out, flat_in, op):
        """Reduce-scatters contiguous flat_in (size * out.numel() elements) into out."""
        view_out, dtype, kind = reduce_view(name, out.t, op)
        view_in, _, _ = reduce_view(name, flat_in, op)
        factor = premul_factor(name, op) if kind == "premul" else None

        def run():
            if kind in BITWISE.values():
                whole = functools.reduce(kind, self._gathered(flat_in))
                out.t.copy_(whole.reshape(self.size(), -1)[self.rank()].reshape(out.t.shape))
            else:
                self._reduce_call(view_in, dtype, kind, factor,
                                  lambda o: self._comm.reduce_scatter(
                                      ptr(view_in), ptr(view_out), view_out.numel(), dtype, o))
            out.copy_back()

        return run

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        name = "reduce_scatter"
        opts = opts or dist.ReduceScatterOptions()
        out = Staged(one(name, output_tensors))
        if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
            raise ValueError(f"ringcc {name}: needs one list of {self.size()} input tensors")
        same(name, input_tensors[0], out.t, "input tensor")
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors[0]])
        run = self._reduce_scatter_flat(name, out, flat_in, opts.reduceOp)
        return self._submit(name, run, [out.orig])

    def _reduce_scatter_base(self, output, input, opts=None):
        name = "reduce_scatter_tensor"
        opts = opts or dist.ReduceScatterOptions()
        out = Staged(cpu_tensor(name, output, "output"))
        cpu_tensor(name, input, "input")
        scaled(name, input, output, self.size(), "input", "the output")
        flat_in = input.contiguous().reshape(-1)
        run = self._reduce_scatter_flat(name, out, flat_in, opts.reduceOp)
        return self._submit(name, run, [out.orig])

    reduce_scatter_single = _reduce_scatter_base  # torch 2.x's name
