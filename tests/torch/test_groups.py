"""Groups, barriers and object collectives on ringcc, against Gloo in the same processes:
new_group (subsets, and each rank in its own), torch 2.x's split_group, monitored_barrier
(passing, and naming the rank that did not come), and all_gather_object,
broadcast_object_list, scatter_object_list, gather_object. Usage: test_groups.py NRANKS
"""

import datetime
import time

import torch
import torch.distributed as dist

import harness
import ringcc.torch
from test_collectives import expect_error, same

TORCH2 = not torch.__version__.startswith("1.")


def check_new_group(rank, n):
    evens = list(range(0, n, 2))
    odds = list(range(1, n, 2))
    groups = {tuple(m): (dist.new_group(m), dist.new_group(m, backend="gloo"))
              for m in (evens, odds)}
    for members, (ours, gloo) in groups.items():
        if rank in members:
            a = torch.tensor([rank + 1.0, rank * 2.0])
            b = a.clone()
            dist.all_reduce(a, group=ours)
            dist.all_reduce(b, group=gloo)
            same(f"new_group {members} all_reduce vs Gloo", a, b)
            assert dist.get_backend(ours) == "ringcc"
            assert dist.get_world_size(ours) == len(members)
    if rank == 0:
        print("ok new_group: even and odd ranks, as Gloo")


def check_split_group(rank, n):
    halves = [list(range(0, n // 2 or 1)), list(range(n // 2 or 1, n))]
    halves = [h for h in halves if h]
    ours = dist.split_group(split_ranks=halves)
    mine = next(h for h in halves if rank in h)
    # Every rank calls new_group for every group, in the same order.
    gloo = [dist.new_group(h, backend="gloo") for h in halves][halves.index(mine)]
    assert dist.get_world_size(ours) == len(mine), f"split group size {dist.get_world_size(ours)}"
    assert dist.get_rank(ours) == mine.index(rank)
    a = torch.arange(6, dtype=torch.int64) * (rank + 1)
    b = a.clone()
    dist.all_reduce(a, group=ours, op=dist.ReduceOp.MAX)
    dist.all_reduce(b, group=gloo, op=dist.ReduceOp.MAX)
    same(f"split_group {mine} all_reduce vs Gloo", a, b)
    out = [torch.empty(2) for _ in mine]
    dist.all_gather(out, torch.full((2,), float(rank)), group=ours)
    same("split_group all_gather", torch.stack(out), torch.tensor([[float(r)] * 2 for r in mine]))
    if rank == 0:
        print(f"ok split_group: {halves}, as Gloo")


def monitored_barrier(timeout=None, wait_all_ranks=False):
    if TORCH2:  # torch 2.x asks the group; torch 1.13 refuses all but Gloo
        dist.monitored_barrier(timeout=timeout, wait_all_ranks=wait_all_ranks)
    else:
        ringcc.torch.monitored_barrier(timeout=timeout, wait_all_ranks=wait_all_ranks)


def check_monitored_barrier(rank, n):
    for _ in range(3):
        monitored_barrier(timeout=datetime.timedelta(seconds=30))
    if not TORCH2:
        expect_error("1.13 dist.monitored_barrier", RuntimeError, ["GLOO"],
                     lambda: dist.monitored_barrier())
    # The last rank (from 3 ranks: the last two) comes late: rank 0 names them (all of them:
    # wait_all_ranks) within the timeout; the late ones get no release and fail too.
    late = list(range(max(1, n - 2), n))
    if rank in late:
        time.sleep(3)
    start = time.monotonic()
    try:
        monitored_barrier(timeout=datetime.timedelta(seconds=1), wait_all_ranks=True)
    except RuntimeError as e:
        took = time.monotonic() - start
        if rank == 0:
            who = (f"Rank {late[0]}" if len(late) == 1 else
                   "Ranks " + ", ".join(str(r) for r in late))
            assert f"{who} failed to pass monitoredBarrier" in str(e), f"message: {e}"
            assert took < 2.5, f"rank 0 failed only after {took:.1f} s"
            print(f"ok monitored_barrier named the late ranks after {took:.1f} s: {e}")
    else:
        if rank == 0 or rank in late:
            raise AssertionError(f"rank {rank}: monitored_barrier passed with {late} late")
    expect_error("monitored_barrier timeout type", TypeError, ["timeout", "timedelta"],
                 lambda: ringcc.torch.monitored_barrier(timeout=5))
    dist.barrier()  # the late rank is back in step for the collectives
    monitored_barrier(timeout=datetime.timedelta(seconds=30))


def check_objects(rank, n, gloo):
    mine = {"rank": rank, "data": list(range(rank + 1)), "text": "x" * (100 * rank)}
    for group in (None, gloo):
        got = [None] * n
        dist.all_gather_object(got, mine, group=group)
        assert got == [{"rank": r, "data": list(range(r + 1)), "text": "x" * (100 * r)}
                       for r in range(n)], f"all_gather_object {group}: {got}"
    root = n - 1
    objs = [("hello", root), {"k": [1, 2, 3]}, 3.5] if rank == root else [None, None, None]
    dist.broadcast_object_list(objs, src=root)
    assert objs == [("hello", root), {"k": [1, 2, 3]}, 3.5], f"broadcast_object_list: {objs}"
    out = [None]
    dist.scatter_object_list(out, [f"for {r}" * (r + 1) for r in range(n)] if rank == 0 else None,
                             src=0)
    assert out == [f"for {rank}" * (rank + 1)], f"scatter_object_list: {out}"
    gathered = [None] * n if rank == 0 else None
    dist.gather_object(("from", rank, [rank] * rank), gathered, dst=0)
    if rank == 0:
        want = [("from", r, [r] * r) for r in range(n)]
        assert gathered == want, f"gather_object: {gathered}"
        theirs = [None] * n
        dist.gather_object(("from", rank, [rank] * rank), theirs, dst=0, group=gloo)
        assert theirs == gathered, f"gather_object vs Gloo: {theirs}"
    else:
        dist.gather_object(("from", rank, [rank] * rank), None, dst=0, group=gloo)
    if rank == 0:
        print("ok object collectives: all_gather, broadcast, scatter, gather (as Gloo)")


def run(rank, n):
    gloo = dist.new_group(backend="gloo")
    check_new_group(rank, n)
    dist.barrier()
    if TORCH2:
        check_split_group(rank, n)
        dist.barrier()
    elif rank == 0:
        print("note: split_group is torch 2.x's; not checked on", torch.__version__)
    check_monitored_barrier(rank, n)
    check_objects(rank, n, gloo)
    dist.barrier()


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
