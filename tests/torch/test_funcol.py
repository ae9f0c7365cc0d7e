"""Functional collectives (torch.distributed._functional_collectives, torch 2.x) on a ringcc
group and on a Gloo group of the same ranks, in the same processes. Usage: test_funcol.py N

These are what DTensor, FSDP2 and torch.compile'd code call: each returns a new tensor at
once (an AsyncCollectiveTensor) and waits only when the data are used (or wait_tensor is
called); in C++ they resolve the group by name and keep the Work until then. Checked, on both
backends, against values computed here: all_reduce (sum, max, min, product, and avg, which
Gloo lacks: ringcc only, to rounding), all_gather_single and reduce_scatter_single along dims 0 and 1 (and
their old names all_gather_tensor / reduce_scatter_tensor), all_to_all_single with equal and
uneven splits, broadcast, the three coalesced forms, the ops called directly
(torch.ops._c10d_functional.*, group by name, wait_tensor), gradients through all_gather and
reduce_scatter, and 24 collectives in flight at once, waited in reverse order after a
garbage collection. The data are small integers, so every result (but avg) must be exact and
equal to Gloo's.
"""

import gc
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import harness

COUNTED = ("allreduce", "allreduce_coalesced", "all_gather_single_coalesced",
           "reduce_scatter_single_coalesced", "all_to_all_single", "broadcast")


def local(rank, shape=(6, 4)):
    """Rank r's input: 0..k-1 (reshaped) plus 3 r, so that sums over N ranks divide by N."""
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape) + 3 * rank


def expected(n):
    inputs = [local(r) for r in range(n)]
    stack = torch.stack(inputs)
    return {
        "sum": stack.sum(0), "max": stack.max(0).values, "min": stack.min(0).values,
        "product": stack.prod(0), "avg": stack.sum(0) / n,
        "gather0": torch.cat(inputs, 0), "gather1": torch.cat(inputs, 1),
        # rank r's part of the sum of everyone's (6n x 4) input, along dim 0 and dim 1
        "scatter0": lambda r: torch.stack([local(q, (6 * n, 4)) for q in range(n)])
        .sum(0).chunk(n, 0)[r],
        "scatter1": lambda r: torch.stack([local(q, (6, 4 * n)) for q in range(n)])
        .sum(0).chunk(n, 1)[r],
    }


def collectives(group, rank, n):
    """Every functional collective on `group`; returns the results, in order."""
    out = []
    x = local(rank)
    for op in ("sum", "max", "min", "product"):
        out.append(fc.all_reduce(x, op, group))
    out += [fc.all_gather_single(x, 0, group), fc.all_gather_single(x, 1, group)]
    out += [fc.reduce_scatter_single(local(rank, (6 * n, 4)), "sum", 0, group),
            fc.reduce_scatter_single(local(rank, (6, 4 * n)), "sum", 1, group)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the old names
        out += [fc.all_gather_tensor(x, 0, group),
                fc.reduce_scatter_tensor(local(rank, (6 * n, 4)), "sum", 0, group)]
    # all-to-all: rank r sends (p + 1) rows to rank p, filled with 10 r + p
    rows = torch.cat([torch.full((p + 1, 3), 10. * rank + p) for p in range(n)])
    out.append(fc.all_to_all_single(rows, [rank + 1] * n, [p + 1 for p in range(n)], group))
    out.append(fc.all_to_all_single(local(rank, (2 * n, 3)), None, None, group))
    out.append(fc.broadcast(x, n - 1, group))
    out += fc.all_reduce_coalesced([x, 2 * x], "sum", group)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # 2.15 renamed these too (*_single_*)
        out += fc.all_gather_into_tensor_coalesced([x, x[:2]], group)
        out += fc.reduce_scatter_tensor_coalesced([local(rank, (6 * n, 4))], "sum", [0], group)
    # the ops themselves, as compiled code calls them
    name = group.group_name
    y = torch.ops._c10d_functional.all_reduce(x, "sum", name)
    out.append(torch.ops._c10d_functional.wait_tensor(y))
    y = torch.ops._c10d_functional.all_gather_into_tensor(x, n, name)
    out.append(torch.ops._c10d_functional.wait_tensor(y))
    return [fc.wait_tensor(t) if isinstance(t, fc.AsyncCollectiveTensor) else t for t in out]


def check_values(res, rank, n):
    e = expected(n)
    want = [e["sum"], e["max"], e["min"], e["product"], e["gather0"], e["gather1"],
            e["scatter0"](rank), e["scatter1"](rank), e["gather0"], e["scatter0"](rank),
            torch.full((n * (rank + 1), 3), 0.) + torch.tensor(
                [10. * p + rank for p in range(n) for _ in range(rank + 1)]).reshape(-1, 1),
            torch.cat([local(p, (2 * n, 3)).chunk(n)[rank] for p in range(n)]),
            local(n - 1), e["sum"], 2 * e["sum"], e["gather0"],
            torch.cat([local(p)[:2] for p in range(n)]), e["scatter0"](rank),
            e["sum"], e["gather0"]]
    assert len(want) == len(res), (len(want), len(res))
    for i, (got, w) in enumerate(zip(res, want)):
        assert torch.equal(got, w), f"result {i}: got {got}, expected {w}"


def gradients(group, rank, n):
    """all_gather then reduce_scatter under autograd: the gradients flow back through the
    opposite collective."""
    x = local(rank).requires_grad_()
    g = fc.all_gather_single(x, 0, group)
    r = fc.reduce_scatter_single(g * (rank + 1), "sum", 0, group)
    (r * r).sum().backward()
    return [fc.wait_tensor(r).detach(), x.grad]


def in_flight(group, rank, n):
    """24 collectives issued before any is waited on; then waited in reverse order."""
    pending = [fc.all_reduce(torch.full((5,), float(rank + i)), "sum", group) for i in range(24)]
    pending += [fc.all_gather_single(torch.full((2,), float(i)), 0, group) for i in range(4)]
    gc.collect()
    done = [fc.wait_tensor(t) for t in reversed(pending)][::-1]
    for i in range(24):
        assert torch.equal(done[i], torch.full((5,), float(n * i + n * (n - 1) // 2))), i
    for i in range(4):
        assert torch.equal(done[24 + i], torch.full((2 * n,), float(i))), i
    return done


def run(rank, n):
    calls = harness.count_backend_calls(COUNTED)
    gloo = dist.new_group(backend="gloo")
    ours = collectives(dist.group.WORLD, rank, n)
    used = {k: v for k, v in calls.items() if v}
    assert set(used) == set(COUNTED), f"not every collective ran on ringcc: {used}"
    check_values(ours, rank, n)
    check_values(collectives(gloo, rank, n), rank, n)
    avg = fc.wait_tensor(fc.all_reduce(local(rank), "avg", dist.group.WORLD))
    # like NCCL's, ringcc's float average scales each input by 1/N before adding: rounded
    assert torch.allclose(avg, expected(n)["avg"], rtol=1e-6, atol=0), f"avg: {avg}"
    for a, b in zip(gradients(dist.group.WORLD, rank, n), gradients(gloo, rank, n)):
        assert torch.equal(a, b), f"gradients differ from Gloo's: {a} vs {b}"
    for a, b in zip(in_flight(dist.group.WORLD, rank, n), in_flight(gloo, rank, n)):
        assert torch.equal(a, b)
    if rank == 0:
        print(f"funcol: {len(ours)} collectives, avg, gradients and 28 in flight as "
              f"expected and as Gloo's (ringcc: {used})", flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
