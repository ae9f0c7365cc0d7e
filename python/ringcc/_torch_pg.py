"""ProcessGroupRingcc: torch.distributed's collectives on CPU tensors, run by ringcc.

Each call checks its arguments on the caller's thread (bad input raises right there), then
queues the operation for the group's progress thread (_queue.OpQueue, which also batches
sends and receives) and returns a Work (_Work) whose future completes later. The progress
thread runs the queue in order (every rank issues the same
collectives in the same order, so the order matches across ranks) and completes the future
with the output tensors, or with an exception that names the collective and ringcc's reason.
ringcc's calls on host memory return when the result is in place and ctypes drops the GIL
around them, so DDP's backward pass keeps computing while a bucket is being all-reduced.

Why ctypes and not a C++ extension: a bucket all-reduce moves megabytes, so the ~10 us of a
ctypes call is noise, and a Python module needs no compiler or torch headers at install time
and works with whichever torch is installed.
"""

import functools
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work

from . import _comm as C
from ._queue import Job, OpQueue
from ._torch_types import BITWISE, bytes_view, premul_factor, reduce_view

_UID_KEY = "ringcc_unique_id"


class _Work(Work):
    """The Work of one queued operation.

    Why a Python subclass and not _create_work_from_future: that Work's wait() ignores a
    failed future, so dist.all_reduce(t) would return normally after ringcc failed. Here
    wait() raises the operation's exception (an NcclError naming the call and ringcc's
    reason), and get_future() gives a future that fails in C++ terms too, which is what DDP
    waits on (it calls get_future() right after allreduce() returns).

    A Python subclass lives on only while Python holds it: once only C++ does, calls from C++
    no longer reach these overrides (a C++ wait() would then wait forever on the base
    class). C++ callers (DDP, DDP's start-up broadcasts) call get_future() or wait() right
    after the call returns, so the queue keeps every _Work alive until its operation is done,
    and after that the last few done ones on which neither was called yet (_queue.OpQueue).

    `flush` (sends and receives) releases the operation's batch: whoever waits for it, or asks
    about it, needs it to run (_queue's module doc).
    """

    def __init__(self, name, future, flush=None):
        super().__init__()
        self.claimed = False  # get_future() or wait() was called: no need to keep it alive
        self._name = name
        self._flush = flush
        self._future = future
        # Completes with the same tensors, or fails as a C++ error (a Python exception set
        # on `future` is, for C++, just a value).
        self._chained = future.then(lambda f: f.value())

    def _release(self):
        if self._flush:
            self._flush()

    def wait(self, timeout=None):
        self.claimed = True
        self._release()
        self._future.wait()  # raises the operation's exception
        # `future` is marked done before its callbacks run, so the chained one may lag.
        self._chained.wait()
        return True

    def get_future(self):
        self.claimed = True
        self._release()
        return self._chained

    def is_completed(self):
        self._release()
        return self._chained.done()

    def is_success(self):
        if not self._chained.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def result(self):
        return self._future.value()

    def synchronize(self):
        pass


def _cpu(name, t, what="tensor"):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"ringcc {name}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu" or t.layout != torch.strided:
        raise ValueError(f"ringcc {name}: {what} must be a dense CPU tensor, got "
                         f"{t.device} {t.layout}")
    return t


def _one(name, tensors):
    if len(tensors) != 1:
        raise ValueError(f"ringcc {name}: takes one tensor per process, got {len(tensors)}")
    return _cpu(name, tensors[0])


def _same(name, tensors, like, what):
    for t in tensors:
        _cpu(name, t, what)
        if t.dtype != like.dtype or t.numel() != like.numel():
            raise ValueError(f"ringcc {name}: every {what} must match the input "
                             f"({like.dtype}, {like.numel()} elements), got {t.dtype}, "
                             f"{t.numel()} elements")


class _Staged:
    """A contiguous stand-in for a tensor; copy_back() writes results to a non-contiguous
    original."""

    def __init__(self, t):
        self.orig = t
        self.t = t if t.is_contiguous() else t.contiguous()

    def copy_back(self):
        if self.t is not self.orig:
            self.orig.copy_(self.t)


def _ptr(t):
    return t.data_ptr()


class ProcessGroupRingcc(dist.ProcessGroup):
    """A torch.distributed process group on one ringcc communicator (see module doc)."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        # Rank 0 makes the 128-byte unique id; the others read it from the c10d store (a
        # PrefixStore per group, so every group gets its own id).
        if rank == 0:
            uid = C.Communicator.new_unique_id()
            store.set(_UID_KEY, uid)
        else:
            uid = store.get(_UID_KEY)
        self._comm = C.Communicator(uid, size, rank)
        self._queue = OpQueue(self._comm, f"ringcc-progress-r{rank}")
        # When the group goes away (destroy_process_group, or interpreter exit: finalize
        # runs at exit too) the thread destroys the communicator.
        weakref.finalize(self, self._queue.stop)

    def getBackendName(self):
        return "ringcc"

    def _submit(self, name, run, result):
        future = torch.futures.Future()
        work = _Work(name, future)
        self._queue.put(Job(name, run, future, result, work))  # the queue keeps `work` alive
        return work

    def _submit_p2p(self, name, issue, result, finish=None):
        """A send or receive: issue() runs inside its batch's group (see _queue)."""
        future = torch.futures.Future()
        work = _Work(name, future, flush=self._queue.flush)
        self._queue.add_p2p(Job(name, issue, future, result, work, finish))
        return work

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
        self._comm.all_gather(_ptr(src), _ptr(out), src.numel(), C.UINT8)
        return out

    def allreduce(self, tensors, opts=None):
        name = "all_reduce"
        opts = opts or dist.AllreduceOptions()
        t = _Staged(_one(name, tensors))
        view, dtype, kind = reduce_view(name, t.t, opts.reduceOp)
        factor = premul_factor(name, opts.reduceOp) if kind == "premul" else None

        def run():
            if kind in BITWISE.values():
                t.t.copy_(functools.reduce(kind, self._gathered(t.t)))
            else:
                self._reduce_call(view, dtype, kind, factor, lambda o: self._comm.all_reduce(
                    _ptr(view), _ptr(view), view.numel(), dtype, o))
            t.copy_back()

        return self._submit(name, run, [t.orig])

    def allreduce_coalesced(self, tensors, opts=None):
        name = "all_reduce_coalesced"
        opts = opts or dist.AllreduceCoalescedOptions()
        staged = [_Staged(_cpu(name, t)) for t in tensors]
        views = [reduce_view(name, s.t, opts.reduceOp) for s in staged]
        if any(k == "premul" or k in BITWISE.values() for _, _, k in views):
            raise NotImplementedError(f"ringcc {name}: only SUM, PRODUCT, MIN, MAX, AVG")

        def run():
            with self._comm.group():
                for view, dtype, kind in views:
                    self._comm.all_reduce(_ptr(view), _ptr(view), view.numel(), dtype, kind)
            for s in staged:
                s.copy_back()

        return self._submit(name, run, [s.orig for s in staged])

    def reduce(self, tensors, opts=None):
        name = "reduce"
        opts = opts or dist.ReduceOptions()
        t = _Staged(_one(name, tensors))
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
                    _ptr(view), _ptr(view), view.numel(), dtype, o, root))
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
                                      _ptr(view_in), _ptr(view_out), view_out.numel(), dtype, o))
            out.copy_back()

        return run

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        name = "reduce_scatter"
        opts = opts or dist.ReduceScatterOptions()
        out = _Staged(_one(name, output_tensors))
        if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
            raise ValueError(f"ringcc {name}: needs one list of {self.size()} input tensors")
        _same(name, input_tensors[0], out.t, "input tensor")
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors[0]])
        run = self._reduce_scatter_flat(name, out, flat_in, opts.reduceOp)
        return self._submit(name, run, [out.orig])

    def _reduce_scatter_base(self, output, input, opts=None):
        name = "reduce_scatter_tensor"
        opts = opts or dist.ReduceScatterOptions()
        out = _Staged(_cpu(name, output, "output"))
        _cpu(name, input, "input")
        if input.dtype != output.dtype or input.numel() != output.numel() * self.size():
            raise ValueError(f"ringcc {name}: input must be {self.size()} x the output "
                             f"({output.dtype}, {output.numel()} elements), got {input.dtype}, "
                             f"{input.numel()} elements")
        flat_in = input.contiguous().reshape(-1)
        run = self._reduce_scatter_flat(name, out, flat_in, opts.reduceOp)
        return self._submit(name, run, [out.orig])

    # --- data movement (bytes, so every dtype) ----------------------------------------

    def broadcast(self, tensors, opts=None):
        name = "broadcast"
        opts = opts or dist.BroadcastOptions()
        t = _Staged(_one(name, tensors))
        root = self._root(name, opts.rootRank)

        def run():
            b = bytes_view(t.t)
            self._comm.broadcast(_ptr(b), _ptr(b), b.numel(), C.UINT8, root)
            t.copy_back()

        return self._submit(name, run, [t.orig])

    def _all_gather_flat(self, input, copy_out):
        """All-gathers input's bytes into a fresh [size, ...] tensor, then copy_out(it)."""
        src = input.contiguous()

        def run():
            copy_out(self._gathered(src))

        return run

    def allgather(self, output_tensors, input_tensors, opts=None):
        name = "all_gather"
        input = _one(name, input_tensors)
        if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
            raise ValueError(f"ringcc {name}: needs one list of {self.size()} output tensors")
        outs = output_tensors[0]
        _same(name, outs, input, "output tensor")

        def copy_out(gathered):
            for i, o in enumerate(outs):
                o.copy_(gathered[i].reshape(o.shape))

        return self._submit(name, self._all_gather_flat(input, copy_out), [outs])

    def _allgather_base(self, output, input, opts=None):
        name = "all_gather_into_tensor"
        _cpu(name, output, "output")
        _cpu(name, input, "input")
        if output.dtype != input.dtype or output.numel() != input.numel() * self.size():
            raise ValueError(f"ringcc {name}: output must be {self.size()} x the input "
                             f"({input.dtype}, {input.numel()} elements), got {output.dtype}, "
                             f"{output.numel()} elements")
        out = _Staged(output)
        src = input.contiguous()

        def run():
            a, b = bytes_view(src), bytes_view(out.t)
            self._comm.all_gather(_ptr(a), _ptr(b), a.numel(), C.UINT8)
            out.copy_back()

        return self._submit(name, run, [output])

    def gather(self, output_tensors, input_tensors, opts=None):
        name = "gather"
        opts = opts or dist.GatherOptions()
        input = _one(name, input_tensors).contiguous()
        root = self._root(name, opts.rootRank)
        outs = []
        if self.rank() == root:
            if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
                raise ValueError(f"ringcc {name}: the root needs one list of {self.size()} "
                                 "output tensors")
            outs = output_tensors[0]
            _same(name, outs, input, "output tensor")

        def run():
            src = bytes_view(input)
            whole = torch.empty(src.numel() * self.size() if outs else 0, dtype=torch.uint8)
            self._comm.gather(_ptr(src), _ptr(whole), src.numel(), C.UINT8, root)
            for i, o in enumerate(outs):
                o.copy_(whole.reshape(self.size(), -1)[i].view(o.dtype).reshape(o.shape))

        return self._submit(name, run, [outs] if outs else [])

    def scatter(self, output_tensors, input_tensors, opts=None):
        name = "scatter"
        opts = opts or dist.ScatterOptions()
        out = _Staged(_one(name, output_tensors))
        root = self._root(name, opts.rootRank)
        whole = torch.empty(0, dtype=torch.uint8)
        if self.rank() == root:
            if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
                raise ValueError(f"ringcc {name}: the root needs one list of {self.size()} "
                                 "input tensors")
            _same(name, input_tensors[0], out.t, "input tensor")
            whole = torch.cat([bytes_view(t.contiguous()) for t in input_tensors[0]])

        def run():
            dst = bytes_view(out.t)
            self._comm.scatter(_ptr(whole), _ptr(dst), dst.numel(), C.UINT8, root)
            out.copy_back()

        return self._submit(name, run, [out.orig])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        name = "all_to_all_single"
        _cpu(name, output, "output")
        _cpu(name, input, "input")
        if output.dtype != input.dtype:
            raise ValueError(f"ringcc {name}: output is {output.dtype}, input {input.dtype}")
        n = self.size()
        out = _Staged(output)
        src = input.contiguous()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise ValueError(f"ringcc {name}: without split sizes, input and output need "
                                 f"the same number of elements, divisible by {n}; got "
                                 f"{input.numel()} and {output.numel()}")

            def run():
                a, b = bytes_view(src), bytes_view(out.t)
                self._comm.all_to_all(_ptr(a), _ptr(b), a.numel() // n, C.UINT8)
                out.copy_back()

            return self._submit(name, run, [output])
        in_splits = self._splits(name, "input", input, input_split_sizes)
        out_splits = self._splits(name, "output", output, output_split_sizes)

        def run():
            a, b = bytes_view(src), bytes_view(out.t)
            with self._comm.group():
                for peer in range(n):
                    (s0, s1), (r0, r1) = in_splits[peer], out_splits[peer]
                    if s1 > s0:
                        self._comm.send(_ptr(a) + s0, s1 - s0, C.UINT8, peer)
                    if r1 > r0:
                        self._comm.recv(_ptr(b) + r0, r1 - r0, C.UINT8, peer)
            out.copy_back()

        return self._submit(name, run, [output])

    def _splits(self, name, what, t, sizes):
        """Byte ranges [start, end) per peer of t's rows, from split sizes along dim 0."""
        n = self.size()
        rows = t.shape[0] if t.dim() else 1
        if not sizes:
            if rows % n:
                raise ValueError(f"ringcc {name}: {what} has {rows} rows, not divisible by {n}")
            sizes = [rows // n] * n
        if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
            raise ValueError(f"ringcc {name}: {what} split sizes {list(sizes)} must be {n} "
                             f"counts adding up to {rows} rows")
        row_bytes = (t.numel() // rows if rows else 0) * t.element_size()
        ranges, start = [], 0
        for s in sizes:
            ranges.append((start, start + s * row_bytes))
            start += s * row_bytes
        return ranges

    def alltoall(self, output_tensors, input_tensors, opts=None):
        name = "all_to_all"
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError(f"ringcc {name}: needs {n} output and {n} input tensors, got "
                             f"{len(output_tensors)} and {len(input_tensors)}")
        for o, i in zip(output_tensors, input_tensors):
            _cpu(name, o, "output tensor")
            _cpu(name, i, "input tensor")
            if o.dtype != input_tensors[0].dtype or i.dtype != input_tensors[0].dtype:
                raise ValueError(f"ringcc {name}: every tensor needs dtype "
                                 f"{input_tensors[0].dtype}")
        outs = [_Staged(o) for o in output_tensors]
        ins = [i.contiguous() for i in input_tensors]

        def run():
            with self._comm.group():
                for peer in range(n):
                    a, b = bytes_view(ins[peer]), bytes_view(outs[peer].t)
                    if a.numel():
                        self._comm.send(_ptr(a), a.numel(), C.UINT8, peer)
                    if b.numel():
                        self._comm.recv(_ptr(b), b.numel(), C.UINT8, peer)
            for o in outs:
                o.copy_back()

        return self._submit(name, run, list(output_tensors))

    # --- point to point and barrier ---------------------------------------------------

    def _peer(self, name, peer):
        if not 0 <= peer < self.size() or peer == self.rank():
            raise ValueError(f"ringcc {name}: peer {peer} must be another rank in "
                             f"0..{self.size() - 1}")
        return peer

    def send(self, tensors, dst, tag=0):
        name = "send"
        t = _one(name, tensors).contiguous()
        peer = self._peer(name, dst)

        def issue():
            b = bytes_view(t)
            self._comm.send(_ptr(b), b.numel(), C.UINT8, peer)

        return self._submit_p2p(name, issue, [t])

    def recv(self, tensors, src, tag=0):
        name = "recv"
        t = _Staged(_one(name, tensors))
        peer = self._peer(name, src)

        def issue():
            b = bytes_view(t.t)
            self._comm.recv(_ptr(b), b.numel(), C.UINT8, peer)

        return self._submit_p2p(name, issue, [t.orig], finish=t.copy_back)

    def recv_anysource(self, tensors, tag=0):
        raise NotImplementedError("ringcc recv: a source rank is required (NCCL has no "
                                  "receive from any source)")

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.uint8)

        def run():
            self._comm.all_reduce(_ptr(token), _ptr(token), 1, C.UINT8, C.SUM)

        return self._submit("barrier", run, [token])
