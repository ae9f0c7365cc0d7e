"""FSDP2 (torch.distributed.fsdp.fully_shard, torch 2.x) on ringcc and on Gloo in the same
processes: a DeviceMesh on the default (ringcc) group and one on Gloo groups of the same
ranks (init_device_mesh's backend_override), the same model and data, and after every step
the parameters of the two runs must match. Usage: test_fsdp2.py NRANKS

FSDP2 all-gathers each layer's parameter shards (dist.all_gather_into_tensor, which it calls
all_gather_single) before its forward and backward, and reduce-scatters its gradients
(reduce_scatter_tensor, with ReduceOp.AVG for float32 and bfloat16, a PREMUL_SUM for a
custom divide factor); the test counts both on the ringcc group, so a run that quietly went
elsewhere fails. Cases: float32; mixed precision (bfloat16 parameters, float32 or bfloat16
gradient reduction); reshard_after_forward=False; gradient accumulation without
synchronization (set_requires_gradient_sync(False)); a layer whose size does not divide by
the number of ranks (padded shards); and on 4 ranks HSDP, a 2 x 2 mesh that reduce-scatters
within a pair and all-reduces across pairs.

Tolerance: on 2 ranks a sum or average of two is the same in any order, so the runs must
agree bit for bit; on more, ringcc and Gloo may add in different orders: 1e-6 relative, with
1e-3 absolute where gradients are reduced in bfloat16 (8 bits: a reduced gradient may differ
by one rounding, 2^-9 of itself, which SGD with momentum carries into the float32 master
parameters; test_ddp.py's bf16 hook has the same bound).
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import harness

STEPS = 3
COUNTED = ("all_gather_single", "reduce_scatter_single", "allreduce")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        # 13 and 7 rows: shards of uneven size on 2 and 4 ranks (FSDP2 pads them)
        self.layers = nn.ModuleList([nn.Linear(12, 13), nn.Linear(13, 16), nn.Linear(16, 7)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def train(mesh, rank, *, mp=None, reshard=True, accumulate=1):
    torch.manual_seed(0)  # the same initial model on both backends
    model = Net()
    kw = {"mesh": mesh, "reshard_after_forward": reshard}
    if mp:
        kw["mp_policy"] = mp
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    history = []
    for _ in range(STEPS):
        opt.zero_grad()
        for micro in range(accumulate):
            model.set_requires_gradient_sync(micro == accumulate - 1)
            x, y = torch.randn(6, 12, generator=g), torch.randn(6, 7, generator=g)
            nn.functional.mse_loss(model(x).float(), y).backward()
        opt.step()
        history.append([p.full_tensor().detach().clone() for p in model.parameters()])
    return history


def compare(name, ours, gloo, n, atol):
    exact = True
    for step, (a, b) in enumerate(zip(ours, gloo)):
        for i, (p, q) in enumerate(zip(a, b)):
            same = torch.equal(p, q)
            exact = exact and same
            if not (same if n == 2 else torch.allclose(p, q, rtol=1e-6, atol=atol)):
                raise AssertionError(f"{name}: step {step} parameter {i} differs from Gloo's "
                                     f"(max |diff| {(p - q).abs().max().item():g})")
    return exact


def check_same_on_all_ranks(name, params, n):
    for i, p in enumerate(params):
        copies = [torch.empty_like(p) for _ in range(n)]
        dist.all_gather(copies, p)
        assert all(torch.equal(c, p) for c in copies), f"{name}: parameter {i} differs by rank"


def run(rank, n):
    calls = harness.count_backend_calls(COUNTED)
    meshes = {"1-D": (init_device_mesh("cpu", (n,)),
                      init_device_mesh("cpu", (n,), backend_override={0: "gloo"}))}
    if n == 4:
        dims = ("replicate", "shard")
        meshes["HSDP 2x2"] = (init_device_mesh("cpu", (2, 2), mesh_dim_names=dims),
                              init_device_mesh("cpu", (2, 2), mesh_dim_names=dims,
                                               backend_override={0: "gloo", 1: "gloo"}))
    bf16 = torch.bfloat16
    cases = {  # name: (train's arguments, absolute tolerance beyond 2 ranks)
        "float32": ({}, 1e-7),
        "bf16 params, fp32 reduce": ({"mp": MixedPrecisionPolicy(bf16, torch.float32)}, 1e-7),
        "bf16 params, bf16 reduce": ({"mp": MixedPrecisionPolicy(bf16, bf16)}, 1e-3),
        "reshard_after_forward=False": ({"reshard": False}, 1e-7),
        "accumulation without sync": ({"accumulate": 2}, 1e-7),
    }
    for mesh_name, (ours_mesh, gloo_mesh) in meshes.items():
        for name, (kw, atol) in cases.items():
            if mesh_name != "1-D" and name not in ("float32", "bf16 params, fp32 reduce"):
                continue  # HSDP: the two main cases are enough
            before = dict(calls)
            ours = train(ours_mesh, rank, **kw)
            done = {k: calls[k] - before[k] for k in COUNTED}
            assert done["all_gather_single"] and done["reduce_scatter_single"], \
                f"{mesh_name} {name}: FSDP2 did not use ringcc's collectives: {done}"
            if mesh_name != "1-D":
                assert done["allreduce"], f"{mesh_name} {name}: no all-reduce across replicas"
            theirs = train(gloo_mesh, rank, **kw)
            exact = compare(f"{mesh_name} {name}", ours, theirs, n, atol)
            check_same_on_all_ranks(name, ours[-1], n)
            assert not torch.equal(ours[0][0], ours[-1][0]), f"{name}: the model did not train"
            if rank == 0:
                print(f"fsdp2 {mesh_name} {name}: {STEPS} steps match Gloo "
                      f"{'exactly' if exact else 'within tolerance'} (ringcc: {done})",
                      flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
