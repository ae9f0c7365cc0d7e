"""Run by test_torchrun_train.py under torchrun: the training loop of PyTorch's DDP guide
(DistributedSampler with set_epoch, DDP, bf16 autocast, AdamW), once on ringcc (the default
group, from torchrun's environment) and once on a Gloo group of the same ranks, from the same
seed. Prints its largest parameter difference between the two, and fails if the runs differ
by more than the tolerance (argv[1]; 0: bit for bit), if the ranks' models differ, or if the
model did not train."""

import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringcc.torch  # noqa: F401  registers the backend

EPOCHS = 2


def dataset():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(384, 20, generator=g)
    return TensorDataset(x, (x[:, :3] * 2 - x[:, 3:6]).tanh())


def train(group, rank, n):
    torch.manual_seed(1)
    model = DDP(nn.Sequential(nn.Linear(20, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU(),
                              nn.Linear(48, 3)), process_group=group, bucket_cap_mb=0.01)
    sampler = DistributedSampler(dataset(), num_replicas=n, rank=rank, shuffle=True, seed=9)
    loader = DataLoader(dataset(), batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    first = None
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = nn.functional.mse_loss(model(x).float(), y)
            loss.backward()
            opt.step()
            if first is None:
                first = [p.detach().clone() for p in model.parameters()]
    return first, [p.detach().clone() for p in model.parameters()]


def main():
    tolerance = float(sys.argv[1])
    dist.init_process_group("ringcc")  # env:// from torchrun
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "ringcc"
    gloo = dist.new_group(backend="gloo")
    first, ours = train(None, rank, n)
    _, theirs = train(gloo, rank, n)
    diff = max((p - q).abs().max().item() for p, q in zip(ours, theirs))
    assert diff <= tolerance, f"rank {rank}: parameters differ from Gloo's by {diff:g}"
    for p, f in zip(ours, first):
        copies = [torch.empty_like(p) for _ in range(n)]
        dist.all_gather(copies, p, group=gloo)
        assert all(torch.equal(c, p) for c in copies), "ranks disagree"
    assert any(not torch.equal(p, f) for p, f in zip(ours, first)), "the model did not train"
    dist.destroy_process_group()
    print(f"worker {rank}/{n} ok, max |ringcc - gloo| {diff:g}", flush=True)


main()
