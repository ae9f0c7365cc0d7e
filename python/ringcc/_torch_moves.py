"""The process group's data movement (bytes, so every dtype): a mixin of ProcessGroupRingcc
(_torch_pg.py), which provides _submit, _root, _gathered and _comm. Point to point is in
_torch_p2p.py, the coalesced forms in _torch_coalesced.py.

torch 2.x renamed the single-tensor forms (_allgather_base is all_gather_single, alltoall_base
all_to_all_single, _reduce_scatter_base reduce_scatter_single); the class answers to both
names, so one class serves torch 1.13 and 2.x. (2.15's gather_single, behind
dist.gather_into_tensor, is not forwarded to Python backends at all: torch raises "does not
support gather_single" before asking.)"""

import torch
import torch.distributed as dist

from . import _comm as C
from ._torch_args import Staged, cpu_tensor, one, ptr, same, scaled
from ._torch_types import bytes_view


class DataMovementOps:

    def broadcast(self, tensors, opts=None):
        name = "broadcast"
        opts = opts or dist.BroadcastOptions()
        t = Staged(one(name, tensors))
        root = self._root(name, opts.rootRank)

        def run():
            b = bytes_view(t.t)
            self._comm.broadcast(ptr(b), ptr(b), b.numel(), C.UINT8, root)
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
        input = one(name, input_tensors)
        if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
            raise ValueError(f"ringcc {name}: needs one list of {self.size()} output tensors")
        outs = output_tensors[0]
        same(name, outs, input, "output tensor")

        def copy_out(gathered):
            for i, o in enumerate(outs):
                o.copy_(gathered[i].reshape(o.shape))

        return self._submit(name, self._all_gather_flat(input, copy_out), [outs])

    def _allgather_base(self, output, input, opts=None):
        name = "all_gather_into_tensor"
        cpu_tensor(name, output, "output")
        cpu_tensor(name, input, "input")
        scaled(name, output, input, self.size(), "output", "the input")
        out = Staged(output)
        src = input.contiguous()

        def run():
            a, b = bytes_view(src), bytes_view(out.t)
            self._comm.all_gather(ptr(a), ptr(b), a.numel(), C.UINT8)
            out.copy_back()

        return self._submit(name, run, [output])

    all_gather_single = _allgather_base

    def gather(self, output_tensors, input_tensors, opts=None):
        name = "gather"
        opts = opts or dist.GatherOptions()
        input = one(name, input_tensors).contiguous()
        root = self._root(name, opts.rootRank)
        outs = []
        if self.rank() == root:
            if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
                raise ValueError(f"ringcc {name}: the root needs one list of {self.size()} "
                                 "output tensors")
            outs = output_tensors[0]
            same(name, outs, input, "output tensor")

        def run():
            src = bytes_view(input)
            whole = torch.empty(src.numel() * self.size() if outs else 0, dtype=torch.uint8)
            self._comm.gather(ptr(src), ptr(whole), src.numel(), C.UINT8, root)
            for i, o in enumerate(outs):
                o.copy_(whole.reshape(self.size(), -1)[i].view(o.dtype).reshape(o.shape))

        return self._submit(name, run, [outs] if outs else [])

    def scatter(self, output_tensors, input_tensors, opts=None):
        name = "scatter"
        opts = opts or dist.ScatterOptions()
        out = Staged(one(name, output_tensors))
        root = self._root(name, opts.rootRank)
        whole = torch.empty(0, dtype=torch.uint8)
        if self.rank() == root:
            if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
                raise ValueError(f"ringcc {name}: the root needs one list of {self.size()} "
                                 "input tensors")
            same(name, input_tensors[0], out.t, "input tensor")
            whole = torch.cat([bytes_view(t.contiguous()) for t in input_tensors[0]])

        def run():
            dst = bytes_view(out.t)
            self._comm.scatter(ptr(whole), ptr(dst), dst.numel(), C.UINT8, root)
            out.copy_back()

        return self._submit(name, run, [out.orig])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        name = "all_to_all_single"
        cpu_tensor(name, output, "output")
        cpu_tensor(name, input, "input")
        if output.dtype != input.dtype:
            raise ValueError(f"ringcc {name}: output is {output.dtype}, input {input.dtype}")
        n = self.size()
        out = Staged(output)
        src = input.contiguous()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise ValueError(f"ringcc {name}: without split sizes, input and output need "
                                 f"the same number of elements, divisible by {n}; got "
                                 f"{input.numel()} and {output.numel()}")

            def run():
                a, b = bytes_view(src), bytes_view(out.t)
                self._comm.all_to_all(ptr(a), ptr(b), a.numel() // n, C.UINT8)
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
                        self._comm.send(ptr(a) + s0, s1 - s0, C.UINT8, peer)
                    if r1 > r0:
                        self._comm.recv(ptr(b) + r0, r1 - r0, C.UINT8, peer)
            out.copy_back()

        return self._submit(name, run, [output])

    all_to_all_single = alltoall_base

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
            cpu_tensor(name, o, "output tensor")
            cpu_tensor(name, i, "input tensor")
            if o.dtype != input_tensors[0].dtype or i.dtype != input_tensors[0].dtype:
                raise ValueError(f"ringcc {name}: every tensor needs dtype "
                                 f"{input_tensors[0].dtype}")
        outs = [Staged(o) for o in output_tensors]
        ins = [i.contiguous() for i in input_tensors]

        def run():
            with self._comm.group():
                for peer in range(n):
                    a, b = bytes_view(ins[peer]), bytes_view(outs[peer].t)
                    if a.numel():
                        self._comm.send(ptr(a), a.numel(), C.UINT8, peer)
                    if b.numel():
                        self._comm.recv(ptr(b), b.numel(), C.UINT8, peer)
            for o in outs:
                o.copy_back()

        return self._submit(name, run, list(output_tensors))
