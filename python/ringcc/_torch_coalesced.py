"""Coalesced collectives (several tensors, one queued operation) and torch 2.x's coalescing
manager: a mixin of ProcessGroupRingcc (_torch_pg.py).

allreduce_coalesced takes every ReduceOp: the ops NCCL has run as one NCCL group; PREMUL_SUM
and the bitwise ops run tensor by tensor inside the same job (same order on every rank). The
gathers put all inputs' bytes into one buffer for a single all-gather, then cut it up.

dist._coalescing_manager (torch 2.x) sends all_reduce, all_gather_into_tensor and
reduce_scatter_tensor in a block to the *_coalesced methods here. Given a device (and
batch_isend_irecv always gives one, since we say supports_coalescing) it brackets the block
with group._start_coalescing / _end_coalescing (our start_coalescing / end_coalescing): ops in
between are queued as usual (sends and receives join one batch, one NCCL group), and
end_coalescing queues a job behind them whose Work completes when they all have, failing with
the first failure among them.
"""

import functools

import torch
import torch.distributed as dist

from ._torch_args import Staged, cpu_tensor, ptr, scaled
from ._torch_types import BITWISE, bytes_view, premul_factor, reduce_view
from . import _comm as C


class CoalescedOps:

    @property
    def supports_coalescing(self):
        return True

    def allreduce_coalesced(self, tensors, opts=None):
        name = "all_reduce_coalesced"
        opts = opts or dist.AllreduceCoalescedOptions()
        if not tensors:
            raise ValueError(f"ringcc {name}: needs at least one tensor")
        staged = [Staged(cpu_tensor(name, t)) for t in tensors]
        views = [reduce_view(name, s.t, opts.reduceOp) for s in staged]
        factor = premul_factor(name, opts.reduceOp) if views[0][2] == "premul" else None
        nccl = [v for v in views if v[2] != "premul" and v[2] not in BITWISE.values()]

        def run():
            if nccl:
                with self._comm.group():
                    for view, dtype, kind in nccl:
                        self._comm.all_reduce(ptr(view), ptr(view), view.numel(), dtype, kind)
            for s, (view, dtype, kind) in zip(staged, views):
                if kind in BITWISE.values():
                    s.t.copy_(functools.reduce(kind, self._gathered(s.t)))
                elif kind == "premul":
                    self._reduce_call(view, dtype, kind, factor, lambda o: self._comm.all_reduce(
                        ptr(view), ptr(view), view.numel(), dtype, o))
            for s in staged:
                s.copy_back()

        return self._submit(name, run, [s.orig for s in staged])

    def _gather_many(self, inputs):
        """A job part: all-gathers the bytes of every input at once; gives a [size, total]
        uint8 tensor and each input's (start, end) in a row."""
        flat = [bytes_view(t.contiguous()) for t in inputs]
        spans, start = [], 0
        for f in flat:
            spans.append((start, start + f.numel()))
            start += f.numel()
        src = torch.cat(flat) if flat else torch.empty(0, dtype=torch.uint8)

        def gather():
            out = torch.empty((self.size(), src.numel()), dtype=torch.uint8)
            self._comm.all_gather(ptr(src), ptr(out), src.numel(), C.UINT8)
            return out

        return gather, spans

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """output_lists[r][i] gets rank r's input_list[i] (torch's and Gloo's layout)."""
        name = "all_gather_coalesced"
        if len(output_lists) != self.size():
            raise ValueError(f"ringcc {name}: needs {self.size()} output lists (one per "
                             f"rank), got {len(output_lists)}")
        for t in input_list:
            cpu_tensor(name, t, "input tensor")
        for outs in output_lists:
            if len(outs) != len(input_list):
                raise ValueError(f"ringcc {name}: each output list needs {len(input_list)} "
                                 f"tensors (one per input), got {len(outs)}")
            for o, t in zip(outs, input_list):
                cpu_tensor(name, o, "output tensor")
                if o.dtype != t.dtype or o.numel() != t.numel():
                    raise ValueError(f"ringcc {name}: output tensors must match their input "
                                     f"({t.dtype}, {t.numel()} elements), got {o.dtype}, "
                                     f"{o.numel()} elements")
        gather, spans = self._gather_many(input_list)

        def run():
            whole = gather()
            for r, outs in enumerate(output_lists):
                for o, (a, b) in zip(outs, spans):
                    o.copy_(whole[r, a:b].view(o.dtype).reshape(o.shape))

        return self._submit(name, run, [list(outs) for outs in output_lists])

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        name = "all_gather_into_tensor_coalesced"
        if len(outputs) != len(inputs):
            raise ValueError(f"ringcc {name}: {len(outputs)} outputs for {len(inputs)} inputs")
        for o, t in zip(outputs, inputs):
            cpu_tensor(name, o, "output")
            cpu_tensor(name, t, "input")
            scaled(name, o, t, self.size(), "each output", "its input")
        staged = [Staged(o) for o in outputs]
        gather, spans = self._gather_many(inputs)

        def run():
            whole = gather()
            for s, (a, b) in zip(staged, spans):
                bytes_view(s.t).view(self.size(), b - a).copy_(whole[:, a:b])
                s.copy_back()

        return self._submit(name, run, list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # torch 2.0 .. 2.x names

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        name = "reduce_scatter_tensor_coalesced"
        opts = opts or dist.ReduceScatterOptions()
        if len(outputs) != len(inputs):
            raise ValueError(f"ringcc {name}: {len(outputs)} outputs for {len(inputs)} inputs")
        runs = []
        for o, t in zip(outputs, inputs):
            cpu_tensor(name, o, "output")
            cpu_tensor(name, t, "input")
            scaled(name, t, o, self.size(), "each input", "its output")
            runs.append(self._reduce_scatter_flat(name, Staged(o), t.contiguous().reshape(-1),
                                                  opts.reduceOp))

        def run():
            for r in runs:
                r()

        return self._submit(name, run, list(outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # --- the coalescing manager's brackets (torch 2.x) ----------------------------------

    def start_coalescing(self, *device):
        if self._coalesced is not None:
            raise RuntimeError("ringcc start_coalescing: already coalescing")
        self._coalesced = []

    def end_coalescing(self, *device):
        if self._coalesced is None:
            raise RuntimeError("ringcc end_coalescing: not coalescing")
        futures, self._coalesced = self._coalesced, None
        results = []

        def run():
            for f in futures:
                results.extend(f.wait())  # done already (queue order); raises their failure

        return self._submit("coalesced", run, results)
