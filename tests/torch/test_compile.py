"""torch.compile (torch 2.x, the inductor backend: C++ kernels built with the system's g++)
with ringcc. Usage: test_compile.py NRANKS

1. A DDP model under torch.compile: dynamo's DDPOptimizer splits the graph at DDP's bucket
   boundaries so that each bucket's all-reduce (DDP's reducer, on ringcc) can start while
   the rest of the backward runs. Three SGD steps on every rank's own data must give the
   parameters that eager DDP on Gloo gives, in the same processes (1e-6 relative: inductor
   may fuse and reorder the float arithmetic), and the same parameters on every rank; the
   ringcc group's all-reduces are counted, so a run that never reached ringcc fails.
2. A function calling functional collectives (all_reduce, all_gather_single), compiled with
   fullgraph=True: inductor's generated code calls the _c10d_functional ops on the ringcc
   group by name; its results must be exact (small integers) and equal to Gloo's.
The model is tiny: compiling dominates (tens of seconds on 2 busy cores).
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import harness

STEPS = 3


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def train(group, rank, compiled):
    model = DDP(net(), process_group=group)
    run = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)  # each rank its own data
    history = []
    for _ in range(STEPS):
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(run(x), y).backward()
        opt.step()
        history.append([p.detach().clone() for p in model.parameters()])
    return history


@torch.compile(fullgraph=True)
def reduce_and_gather(x, group_name):
    s = fc.all_reduce(x * 2, "sum", group_name)
    return fc.all_gather_single(s + 1, 0, group_name) * 3


def run(rank, n):
    calls = harness.count_backend_calls(("allreduce", "all_gather_single_coalesced"))
    gloo = dist.new_group(backend="gloo")
    ours = train(None, rank, compiled=True)
    assert calls["allreduce"] >= STEPS, f"compiled DDP: {calls['allreduce']} ringcc all-reduces"
    theirs = train(gloo, rank, compiled=False)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for i, (p, q) in enumerate(zip(a, b)):
            assert torch.allclose(p, q, rtol=1e-6, atol=1e-7), \
                f"step {step} parameter {i}: compiled DDP on ringcc differs from eager DDP on " \
                f"Gloo (max |diff| {(p - q).abs().max().item():g})"
    for i, p in enumerate(ours[-1]):
        copies = [torch.empty_like(p) for _ in range(n)]
        dist.all_gather(copies, p)
        assert all(torch.equal(c, p) for c in copies), f"parameter {i} differs by rank"
    assert not torch.equal(ours[0][0], ours[-1][0]), "the model did not train"

    x = torch.arange(6.).reshape(2, 3) + rank
    before = dict(calls)
    got = reduce_and_gather(x, dist.group.WORLD.group_name)
    assert calls["allreduce"] > before["allreduce"] and \
        calls["all_gather_single_coalesced"] > before["all_gather_single_coalesced"], calls
    total = sum(torch.arange(6.).reshape(2, 3) + r for r in range(n)) * 2 + 1
    assert torch.equal(got, torch.cat([total] * n) * 3), f"compiled funcol: {got}"
    assert torch.equal(got, reduce_and_gather(x, gloo.group_name)), "compiled funcol: not Gloo's"
    if rank == 0:
        print(f"compile: DDP under torch.compile on ringcc, {STEPS} steps as eager DDP on Gloo; "
              f"compiled functional collectives as Gloo's (ringcc: {calls})", flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv(), timeout=400)
