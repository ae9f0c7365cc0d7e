"""DDP training as the PyTorch DDP guide runs it, on ringcc and on Gloo in the same processes
(the default group is ringcc, a second group of the same ranks is Gloo): after every step the
parameters of the two runs must match. Usage: test_ddp.py NRANKS

Exact equality: on 2 ranks a sum is a + b whichever the order, so ringcc and Gloo must agree
bit for bit. On more ranks they may add in different orders (ring vs Gloo's own schedule), so
float32 may differ in the last bits: there we require 1e-6 relative (1e-5 absolute with the
fp16 compression hook, whose sums round to half precision), and exact equality of the
parameters across ranks (every rank of one run must hold the same model).
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import harness

STEPS = 4


class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)
        # Never used in forward: DDP must be told (find_unused_parameters) or it waits for it.
        self.unused = nn.Linear(64, 4) if unused_branch else None

    def forward(self, x):
        return self.head(self.body(x))


def dataset():
    g = torch.Generator().manual_seed(7)
    return TensorDataset(torch.randn(256, 16, generator=g), torch.randn(256, 4, generator=g))


def train(group, rank, n, *, autocast=False, hook=None, accumulate=1, unused=False):
    """STEPS optimizer steps of DDP over `group`; returns the parameters after each step."""
    torch.manual_seed(0)  # the same initial model on both backends
    model = DDP(Net(unused), process_group=group, find_unused_parameters=unused,
                bucket_cap_mb=0.01)  # small buckets: several all-reduces per backward
    if hook:
        model.register_comm_hook(group, hook)
    sampler = DistributedSampler(dataset(), num_replicas=n, rank=rank, shuffle=True, seed=3)
    sampler.set_epoch(1)
    loader = iter(DataLoader(dataset(), batch_size=8, sampler=sampler))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    history = []
    for _ in range(STEPS):
        opt.zero_grad()
        for micro in range(accumulate):
            x, y = next(loader)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = nn.functional.mse_loss(model(x).float(), y)
            if micro < accumulate - 1:
                with model.no_sync():  # accumulate locally, no all-reduce
                    loss.backward()
            else:
                loss.backward()
        opt.step()
        history.append([p.detach().clone() for p in model.parameters()])
    return history


def check_same_on_all_ranks(name, params, n):
    for i, p in enumerate(params):
        copies = [torch.empty_like(p) for _ in range(n)]
        dist.all_gather(copies, p)
        for r, c in enumerate(copies):
            assert torch.equal(c, p), f"{name}: parameter {i} differs on rank {r}"


def compare(name, ours, gloo, n, atol):
    exact = True
    for step, (a, b) in enumerate(zip(ours, gloo)):
        for i, (p, q) in enumerate(zip(a, b)):
            exact = exact and torch.equal(p, q)
            ok = torch.equal(p, q) if n == 2 else torch.allclose(p, q, rtol=1e-6, atol=atol)
            if not ok:
                diff = (p - q).abs().max().item()
                raise AssertionError(f"{name}: step {step} parameter {i} differs from Gloo's "
                                     f"(max |diff| {diff:g})")
    return exact


def unsynced_grads_differ(rank, n, gloo):
    """no_sync really skips the all-reduce: after a backward inside it, ranks hold different
    gradients (their data differ)."""
    torch.manual_seed(0)
    model = DDP(Net())
    x = torch.full((2, 16), float(rank + 1))
    with model.no_sync():
        model(x).sum().backward()
    g = model.module.head.weight.grad  # (bias grads do not depend on x)
    copies = [torch.empty_like(g) for _ in range(n)]
    dist.all_gather(copies, g, group=gloo)
    assert not torch.equal(copies[0], copies[1]), "no_sync backward was all-reduced"


def run(rank, n):
    assert dist.get_backend() == "ringcc"
    gloo = dist.new_group(backend="gloo")
    cases = {
        "plain": {},
        "bf16 autocast": {"autocast": True},
        "fp16 compression hook": {"hook": default_hooks.fp16_compress_hook},
        "no_sync accumulation": {"accumulate": 2},
        "find_unused_parameters": {"unused": True},
    }
    for name, kw in cases.items():
        ours = train(None, rank, n, **kw)
        theirs = train(gloo, rank, n, **kw)
        exact = compare(name, ours, theirs, n, 1e-5 if "fp16" in name else 1e-7)
        check_same_on_all_ranks(name, ours[-1], n)
        assert not torch.equal(ours[0][0], ours[-1][0]), f"{name}: the model did not train"
        if rank == 0:
            print(f"ddp {name}: {STEPS} steps match Gloo "
                  f"{'exactly' if exact else 'within tolerance'}", flush=True)
    unsynced_grads_differ(rank, n, gloo)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
