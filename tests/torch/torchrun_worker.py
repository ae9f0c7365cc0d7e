"""Run by test_torchrun.py under torchrun: DDP with backend 'ringcc', init from torchrun's
environment; every rank must end with the same parameters, and the model must have moved."""

import torch
import torch.distributed as dist
import torch.nn as nn

import ringcc.torch  # noqa: F401  registers the backend

dist.init_process_group("ringcc")  # env:// from torchrun
rank, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "ringcc"
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
before = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    x = torch.full((4, 8), float(rank + step))
    model(x).square().sum().backward()
    opt.step()
for p, b in zip(model.parameters(), before):
    copies = [torch.empty_like(p) for _ in range(n)]
    dist.all_gather(copies, p.detach())
    assert all(torch.equal(c, copies[0]) for c in copies), "ranks disagree"
    assert not torch.equal(p, b), "the model did not train"
dist.destroy_process_group()
print(f"worker {rank}/{n} ok", flush=True)
