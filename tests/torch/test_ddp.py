"""DDP training as the PyTorch DDP guide runs it, on ringcc and on Gloo in the same processes
(the default group is ringcc, a second group of the same ranks is Gloo): after every step the
parameters of the two runs must match. Usage: test_ddp.py NRANKS

Exact equality: on 2 ranks a sum is a + b whichever the order, so ringcc and Gloo must agree
bit for bit. On more ranks they may add in different orders (ring vs Gloo's own schedule), so
float32 may differ in the last bits: there we require 1e-6 relative (absolute 1e-5 with the
fp16 compression hook and 1e-3 with the bf16 one, whose sums round to 11 and 8 bits: a
gradient below 1 off by 2^-9 of itself, through 4 steps of lr 0.05 with momentum 0.9, moves a
parameter by up to ~5e-4, measured 1.2e-4 at 4 ranks), and
exact equality of the parameters across ranks (every rank of one run must hold the same model).

Comm hooks: fp16 and bf16 compression, and PowerSGD (rank 2, compressing from the third step
on, with error feedback): its callbacks issue the P and Q all-reduces and block on them, on the
thread that completed the previous future (ringcc's progress thread; _queue's module doc).
Against Gloo PowerSGD runs with one bucket: with several, Gloo itself deadlocks now and then
(seen here on torch 2.15: both its worker threads blocked in PowerSGD callbacks, waiting for
all-reduces that only a free worker would run). With the small buckets it runs on ringcc
alone (it hung there too before ringcc ran such callbacks' operations at once), checked for
agreement across ranks and for a model that trained.
Torch 1.13 refuses the bf16 hook without CUDA and NCCL, whatever the backend: not run there.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
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


def train(group, rank, n, *, autocast=False, hook=None, accumulate=1, unused=False,
          bucket_mb=0.01):
    """STEPS optimizer steps of DDP over `group`; returns the parameters after each step.
    The default buckets are small: several all-reduces per backward."""
    torch.manual_seed(0)  # the same initial model on both backends
    model = DDP(Net(unused), process_group=group, find_unused_parameters=unused,
                bucket_cap_mb=bucket_mb)
    if hook == "powersgd":
        # Low-rank compression: two all-reduces (P and Q) per bucket, from the third step
        # on (the first two all-reduce vanilla), with error feedback. The state's seed makes
        # both runs draw the same random Q.
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                            start_powerSGD_iter=2, min_compression_rate=0.5,
                                            random_seed=11)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif hook:
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
    cases = {  # name: (train's arguments, absolute tolerance beyond 2 ranks)
        "plain": ({}, 1e-7),
        "bf16 autocast": ({"autocast": True}, 1e-7),
        "fp16 compression hook": ({"hook": default_hooks.fp16_compress_hook}, 1e-5),
        "bf16 compression hook": ({"hook": default_hooks.bf16_compress_hook}, 1e-3),
        "PowerSGD hook, one bucket": ({"hook": "powersgd", "bucket_mb": 25}, 1e-6),
        "PowerSGD hook": ({"hook": "powersgd"}, None),  # ringcc only (module doc)
        "no_sync accumulation": ({"accumulate": 2}, 1e-7),
        "find_unused_parameters": ({"unused": True}, 1e-7),
    }
    if not torch.__version__.startswith("2."):
        del cases["bf16 compression hook"]
        if rank == 0:
            print("note: torch 1.13 refuses the bf16 compression hook without CUDA: not run")
    plain = None
    for name, (kw, atol) in cases.items():
        ours = train(None, rank, n, **kw)
        if plain is None:
            plain = ours
        elif "hook" in kw:  # the hook ran: its rounding or compression changed the model
            assert not torch.equal(ours[-1][0], plain[-1][0]), f"{name}: same as without it"
        if atol is None:
            exact = None
        else:
            exact = compare(name, ours, train(gloo, rank, n, **kw), n, atol)
        check_same_on_all_ranks(name, ours[-1], n)
        assert not torch.equal(ours[0][0], ours[-1][0]), f"{name}: the model did not train"
        if rank == 0:
            match = ("not run on Gloo" if exact is None else
                     f"match Gloo {'exactly' if exact else 'within tolerance'}")
            print(f"ddp {name}: {STEPS} steps {match}", flush=True)
    unsynced_grads_differ(rank, n, gloo)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
