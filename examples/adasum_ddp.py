"""DDP training with Adasum gradient combination on ringcc (docs/adasum.md).

    PYTHONPATH=$PWD/python /usr/bin/python3 -m torch.distributed.run --nproc_per_node=2 \\
        --tee=1 --redirects=2 examples/adasum_ddp.py

The seed guide's loop (DistributedSampler, DDP, SGD), with ringcc.torch.adasum_hook in place of
DDP's averaging all-reduce: each parameter's gradients are combined by Adasum, so aligned
gradients are averaged and orthogonal ones added.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringcc.torch


def main():
    dist.init_process_group("ringcc")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 16, generator=g)
    y = x @ torch.randn(16, 1, generator=g) + 0.1 * torch.randn(1024, 1, generator=g)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    model.register_comm_hook(None, ringcc.torch.adasum_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
