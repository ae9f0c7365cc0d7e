"""DTensor (torch.distributed.tensor, torch 2.x) on a 1-D and a 2-D DeviceMesh of ringcc
groups, each checked against the same on Gloo groups of the same ranks, in the same
processes. Usage: test_dtensor.py NRANKS (4: the 1-D mesh of 4 and the 2 x 2 mesh)

init_device_mesh("cpu", ...) on a ringcc default group makes the mesh's groups with new_group
(on CPU torch never uses split_group for a mesh: that needs an accelerator), the Gloo mesh
through backend_override. Redistribution, every pair of placements: Shard(0), Shard(1),
Replicate() and Partial() (sum and max) to Shard(0), Shard(1), Replicate(); on the 2-D mesh
every pair of pairs of Shard(0), Shard(1), Replicate() (nested sharding of one dimension
included) and Partial on one or both mesh dimensions to others. Each result must be the expected
tensor and, shard by shard, Gloo's, bit for bit (the data are small integers, whose sums are
exact in any order). Then tensor parallelism (parallelize_module with ColwiseParallel and
RowwiseParallel) on the mesh's last dimension: forward and backward match Gloo's, and the
output the model without parallelism gives. Mesh slicing (mesh["tp"]) and flattening
(mesh._flatten) work on ringcc groups, and the DTensor collectives ran on ringcc (counted).
"""

import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import harness

# What DTensor's functional collectives reach the backend as (torch 2.15 sends a single
# all-gather or reduce-scatter as a coalesced one of one tensor).
COUNTED = ("allreduce", "allreduce_coalesced", "allgather", "all_gather_single",
           "all_gather_single_coalesced", "reduce_scatter_single",
           "reduce_scatter_single_coalesced", "all_to_all_single", "scatter", "broadcast")


def full_tensor():
    return torch.arange(8 * 12, dtype=torch.float32).reshape(8, 12) - 40


def partial_value(mesh, placements):
    """A Partial DTensor's local part (below) is full * v (sum) or full + v (max), v a small
    integer of the rank's coordinates on the partial mesh dimensions only (on the others the
    local part must be the same: they are Replicate)."""
    coords = mesh.get_coordinate()
    return 1 + sum(c * (d + 2) for d, (c, p) in enumerate(zip(coords, placements))
                   if p.is_partial())


def make(mesh, placements):
    """A DTensor with `placements` (Partial ones only with Replicate), and what it stands for."""
    full = full_tensor()
    partial = [d for d, p in enumerate(placements) if p.is_partial()]
    if not partial:
        return distribute_tensor(full, mesh, placements), full
    reduce_op = placements[partial[0]].reduce_op
    v = partial_value(mesh, placements)
    local = full * v if reduce_op == "sum" else full + v
    d = DTensor.from_local(local, mesh, placements, run_check=False)
    # The reduction of v over the partial dimensions, by Gloo.
    total = torch.tensor([float(v)])
    for dim in partial:
        dist.all_reduce(total, op=dist.ReduceOp.SUM if reduce_op == "sum" else
                        dist.ReduceOp.MAX, group=mesh.gloo_groups[dim])
    return d, (full * total if reduce_op == "sum" else full + total)


def redistributions(mesh, pairs):
    """Every (source, target) placement pair on `mesh`: the local results, in order."""
    out = []
    for src, dst in pairs:
        d, full = make(mesh, src)
        r = d.redistribute(mesh, dst)
        assert tuple(r.placements) == tuple(dst), f"{src} -> {dst}: got {r.placements}"
        got = r.full_tensor()
        assert torch.equal(got, full), f"{mesh.mesh_dim_names} {src} -> {dst}: wrong values"
        out.append(r.to_local().clone())
    return out


def tensor_parallel(mesh):
    """A two-layer MLP, column- then row-parallel on `mesh`: its output and gradients."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 6))
    reference = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 6))
    reference.load_state_dict(model.state_dict())
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(1))  # the same on all
    y = model(x)
    y.sum().backward()
    assert torch.allclose(y, reference(x), rtol=1e-5, atol=1e-6), "TP output is not the MLP's"
    grads = [p.grad.to_local().clone() for p in model.parameters()]
    return [y.detach()] + grads


def attach_gloo(mesh, gloo_mesh):
    mesh.gloo_groups = [gloo_mesh.get_group(d) for d in range(mesh.ndim)]
    gloo_mesh.gloo_groups = mesh.gloo_groups


def check(name, ours, theirs):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert torch.equal(a, b), f"{name}: result {i} differs from Gloo's " \
                                  f"(max |diff| {(a - b).abs().max().item():g})"


def run(rank, n):
    calls = harness.count_backend_calls(COUNTED)
    ones = [Shard(0), Shard(1), Replicate(), Partial("sum"), Partial("max")]
    targets = [Shard(0), Shard(1), Replicate()]
    meshes = {"1-D": ((n,), None, [([s], [t]) for s in ones for t in targets])}
    if n == 4:
        two = [Shard(0), Shard(1), Replicate()]
        pairs = [(list(s), list(t)) for s in itertools.product(two, two)
                 for t in itertools.product(two, two) if s != t]
        pairs += [([Partial(), Replicate()], [Replicate(), Shard(1)]),
                  ([Replicate(), Partial()], [Shard(0), Replicate()]),
                  ([Partial("max"), Replicate()], [Shard(1), Shard(1)]),
                  ([Partial(), Partial()], [Shard(0), Shard(1)]),
                  ([Partial(), Partial()], [Replicate(), Replicate()])]
        meshes["2-D"] = ((2, 2), ("dp", "tp"), pairs)
    for name, (shape, dims, pairs) in meshes.items():
        ours_mesh = init_device_mesh("cpu", shape, mesh_dim_names=dims)
        override = {d: "gloo" for d in range(len(shape))}
        gloo_mesh = init_device_mesh("cpu", shape, mesh_dim_names=dims,
                                     backend_override=override)
        for d in range(len(shape)):
            assert dist.get_backend(ours_mesh.get_group(d)) == "ringcc", "not a ringcc mesh"
            assert dist.get_backend(gloo_mesh.get_group(d)) == "gloo", "not a Gloo mesh"
        attach_gloo(ours_mesh, gloo_mesh)
        before = dict(calls)
        ours = redistributions(ours_mesh, pairs)
        used = {k: calls[k] - before[k] for k in COUNTED if calls[k] > before[k]}
        assert used, f"{name}: no collective ran on ringcc"
        check(f"{name} redistribute", ours, redistributions(gloo_mesh, pairs))
        tp = ours_mesh["tp"] if dims else ours_mesh
        gloo_tp = gloo_mesh["tp"] if dims else gloo_mesh
        check(f"{name} tensor parallel", tensor_parallel(tp),
              tensor_parallel(gloo_tp))
        if dims:
            flat = ours_mesh._flatten("dp_tp")
            assert dist.get_backend(flat.get_group()) == "ringcc"
            t = distribute_tensor(full_tensor(), flat, [Shard(0)])
            assert torch.equal(t.full_tensor(), full_tensor()), "flattened mesh: wrong values"
        if rank == 0:
            print(f"dtensor {name} mesh {shape}: {len(pairs)} redistributions and tensor "
                  f"parallelism as Gloo's (ringcc: {used})", flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
