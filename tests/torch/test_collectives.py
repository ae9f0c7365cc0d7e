"""Every torch.distributed collective on the ringcc backend, exact against values each rank
computes from every rank's (deterministic) input. Usage: test_collectives.py NRANKS
"""

import functools
import gc
import threading
import time

import torch
import torch.distributed as dist

import harness
import ringcc.torch

RED = dist.ReduceOp
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# Data movement copies bytes, so it takes dtypes ringcc cannot reduce too.
ALL_DTYPES = INTS + FLOATS + [torch.bool, torch.int16, torch.complex64, torch.complex128]


def data(rank, dtype, numel=1000):
    """Rank `rank`'s input: small values, so every sum and product is exact in every dtype."""
    i = torch.arange(numel)
    if dtype == torch.bool:
        return (i + rank) % 3 == 0
    # 1..4: every sum is exact; products over 4 ranks reach 256 and wrap in 8-bit types,
    # identically in torch and ringcc (two's complement).
    v = (i * 7 + rank * 3) % 4 + 1
    if dtype.is_complex:
        return torch.complex(v.double(), -v.double()).to(dtype)
    return v.to(dtype)


def expected(n, dtype, op, numel=1000):
    xs = [data(r, dtype, numel) for r in range(n)]
    if op == RED.SUM:
        return functools.reduce(torch.logical_or if dtype == torch.bool else torch.add, xs)
    if op == RED.PRODUCT:
        return functools.reduce(torch.logical_and if dtype == torch.bool else torch.mul, xs)
    if op == RED.MIN:
        return functools.reduce(torch.minimum, xs)
    if op == RED.MAX:
        return functools.reduce(torch.maximum, xs)
    if op == RED.AVG:
        total = functools.reduce(torch.add, [x.to(torch.float64 if not dtype.is_complex
                                                  else torch.complex128) for x in xs])
        if dtype.is_floating_point or dtype.is_complex:
            return (total / n).to(dtype)
        return torch.div(total, n, rounding_mode="trunc").to(dtype)  # NCCL truncates
    fn = {RED.BAND: torch.bitwise_and, RED.BOR: torch.bitwise_or, RED.BXOR: torch.bitwise_xor}
    return functools.reduce(fn[op], xs)


def same(name, got, want):
    if got.dtype != want.dtype or not torch.equal(got, want):
        raise AssertionError(f"{name}: got {got.flatten()[:8]} ({got.dtype}), "
                             f"want {want.flatten()[:8]} ({want.dtype})")


def reduce_cases():
    for dtype in INTS:
        for op in (RED.SUM, RED.PRODUCT, RED.MIN, RED.MAX, RED.AVG, RED.BAND, RED.BOR,
                   RED.BXOR):
            yield dtype, op
    for dtype in FLOATS + [torch.complex64]:
        ops = (RED.SUM, RED.AVG) if dtype.is_complex else (
            RED.SUM, RED.PRODUCT, RED.MIN, RED.MAX, RED.AVG)
        for op in ops:
            yield dtype, op
    for op in (RED.SUM, RED.PRODUCT, RED.MIN, RED.MAX, RED.BAND, RED.BOR, RED.BXOR):
        yield torch.bool, op


def check_all_reduce(rank, n):
    for dtype, op in reduce_cases():
        t = data(rank, dtype)
        dist.all_reduce(t, op=op)
        same(f"all_reduce {dtype} {op}", t, expected(n, dtype, op))
    # PreMulSum: sum of factor * x; 0.5 keeps it exact.
    for dtype in FLOATS:
        t = data(rank, dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        same(f"all_reduce {dtype} premul_sum", t, (expected(n, dtype, RED.SUM) * 0.5).to(dtype))
    # all_reduce_coalesced: several tensors, one NCCL group.
    ts = [data(rank, torch.float32, 10), data(rank, torch.float32, 7) * 3]  # one dtype (torch)
    dist.all_reduce_coalesced(ts, op=RED.MAX)
    same("all_reduce_coalesced float32", ts[0], expected(n, torch.float32, RED.MAX, 10))
    same("all_reduce_coalesced 2nd", ts[1], expected(n, torch.float32, RED.MAX, 7) * 3)
    # A non-contiguous tensor (a transposed view) gets its result in place.
    base = data(rank, torch.float32, 12).reshape(3, 4)
    view = base.t()
    dist.all_reduce(view)
    same("all_reduce transposed", base, expected(n, torch.float32, RED.SUM, 12).reshape(3, 4))
    # Several ops in flight at once complete in order, each with its own result.
    ts = [data(rank, torch.float32) * (k + 1) for k in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k, (w, t) in enumerate(zip(works, ts)):
        w.wait()
        same(f"async all_reduce {k}", t, expected(n, torch.float32, RED.SUM) * (k + 1))
        same(f"future value {k}", w.get_future().value()[0], t)


def check_reduce(rank, n):
    root = n - 1
    for dtype, op in [(torch.float32, RED.SUM), (torch.int32, RED.MAX), (torch.uint8, RED.BOR),
                      (torch.bfloat16, RED.AVG)]:
        t = data(rank, dtype)
        dist.reduce(t, root, op=op)
        want = expected(n, dtype, op) if rank == root else data(rank, dtype)
        same(f"reduce {dtype} {op}", t, want)
    t = data(rank, torch.float64)
    dist.reduce(t, root, op=dist._make_nccl_premul_sum(0.25))
    want = expected(n, torch.float64, RED.SUM) * 0.25 if rank == root else data(rank, torch.float64)
    same("reduce premul_sum", t, want)


def check_broadcast(rank, n):
    for root in range(n):
        for dtype in ALL_DTYPES:
            t = data(rank, dtype, 333)
            dist.broadcast(t, src=root)
            same(f"broadcast {dtype} from {root}", t, data(root, dtype, 333))


def check_all_gather(rank, n):
    for dtype in ALL_DTYPES:
        outs = [torch.empty(10, 3, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, data(rank, dtype, 30).reshape(10, 3))
        for r in range(n):
            same(f"all_gather {dtype} [{r}]", outs[r], data(r, dtype, 30).reshape(10, 3))
        out = torch.empty(n * 30, dtype=dtype)
        dist.all_gather_into_tensor(out, data(rank, dtype, 30))
        same(f"all_gather_into_tensor {dtype}", out, torch.cat([data(r, dtype, 30)
                                                                for r in range(n)]))


def check_reduce_scatter(rank, n):
    for dtype, op in [(torch.float32, RED.SUM), (torch.float16, RED.AVG), (torch.int64, RED.MIN),
                      (torch.int32, RED.BXOR), (torch.float64, RED.PRODUCT)]:
        whole = data(rank, dtype, 40 * n)
        want = expected(n, dtype, op, 40 * n)[rank * 40:(rank + 1) * 40]
        out = torch.empty(40, dtype=dtype)
        dist.reduce_scatter(out, list(whole.chunk(n)), op=op)
        same(f"reduce_scatter {dtype} {op}", out, want)
        out = torch.empty(40, dtype=dtype)
        dist.reduce_scatter_tensor(out, whole, op=op)
        same(f"reduce_scatter_tensor {dtype} {op}", out, want)
    out = torch.empty(40, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, data(rank, torch.bfloat16, 40 * n),
                               op=dist._make_nccl_premul_sum(2.0))
    want = expected(n, torch.bfloat16, RED.SUM, 40 * n)[rank * 40:(rank + 1) * 40] * 2
    same("reduce_scatter_tensor premul_sum", out, want)


def check_all_to_all(rank, n):
    # Equal splits: block j of rank r's input goes to rank j.
    def block(src, dst, dtype, rows=3):
        return torch.full((rows, 2), src * 10 + dst, dtype=torch.int64).to(dtype)

    for dtype in (torch.float32, torch.int16, torch.bfloat16, torch.bool):
        src = torch.cat([block(rank, j, dtype) for j in range(n)])
        out = torch.empty_like(src)
        dist.all_to_all_single(out, src)
        same(f"all_to_all_single {dtype}", out, torch.cat([block(j, rank, dtype)
                                                           for j in range(n)]))
    # Uneven splits: rank r sends r + j + 1 rows to rank j.
    sizes_in = [rank + j + 1 for j in range(n)]
    sizes_out = [j + rank + 1 for j in range(n)]
    src = torch.cat([block(rank, j, torch.float64, rows=sizes_in[j]) for j in range(n)])
    out = torch.empty(sum(sizes_out), 2, dtype=torch.float64)
    dist.all_to_all_single(out, src, sizes_out, sizes_in)
    same("all_to_all_single uneven", out, torch.cat([block(j, rank, torch.float64, sizes_out[j])
                                                     for j in range(n)]))
    outs = [torch.empty(rank + 1 + j, 2) for j in range(n)]  # from j: j + rank + 1 rows
    dist.all_to_all(outs, [block(rank, j, torch.float32, rows=rank + j + 1) for j in range(n)])
    for j in range(n):
        same(f"all_to_all from {j}", outs[j], block(j, rank, torch.float32, rank + j + 1))


def check_gather_scatter(rank, n):
    root = 0 if n == 1 else 1
    outs = [torch.empty(50, dtype=torch.complex64) for _ in range(n)] if rank == root else None
    dist.gather(data(rank, torch.complex64, 50), outs, dst=root)
    if rank == root:
        for r in range(n):
            same(f"gather [{r}]", outs[r], data(r, torch.complex64, 50))
    out = torch.empty(50, dtype=torch.int16)
    ins = [data(100 + r, torch.int16, 50) for r in range(n)] if rank == root else None
    dist.scatter(out, ins, src=root)
    same("scatter", out, data(100 + rank, torch.int16, 50))



def check_send_recv(rank, n):
    # Around the ring: even ranks send first, odd ranks receive first (blocking calls).
    right, left = (rank + 1) % n, (rank - 1) % n
    out, got = data(rank, torch.float64, 77), torch.empty(77, dtype=torch.float64)
    for step in ("send", "recv") if rank % 2 == 0 else ("recv", "send"):
        if step == "send":
            dist.send(out, right)
        else:
            dist.recv(got, left)
    same("recv from left", got, data(left, torch.float64, 77))
    # batch_isend_irecv: every rank sends to both neighbours before receiving; ringcc runs
    # the batch as one group, else the first sends would wait for each other's receives.
    got_l, got_r = torch.empty(3000), torch.empty(3000)
    ops = [dist.P2POp(dist.isend, data(rank, torch.float32, 3000), right),
           dist.P2POp(dist.isend, data(rank, torch.float32, 3000) * 2, left),
           dist.P2POp(dist.irecv, got_l, left), dist.P2POp(dist.irecv, got_r, right)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same("batch_isend_irecv from left", got_l, data(left, torch.float32, 3000))
    same("batch_isend_irecv from right", got_r, data(right, torch.float32, 3000) * 2)
    # An isend nobody waits for still goes out (after P2P_IDLE_S without more sends).
    if rank == 0:
        dist.isend(torch.arange(5, dtype=torch.int32), 1)
        time.sleep(1.5)  # no ringcc call meanwhile
    elif rank == 1:
        t = torch.zeros(5, dtype=torch.int32)
        start = time.monotonic()
        dist.irecv(t, 0).wait()
        took = time.monotonic() - start
        same("irecv", t, torch.arange(5, dtype=torch.int32))
        assert took < 1.0, f"an unwaited isend went out only after {took:.2f} s"


def check_groups_and_barrier(rank, n):
    dist.barrier()
    members = list(range(0, n, 2)) if n > 2 else [0, 1]
    group = dist.new_group(members)
    everyone = dist.new_group(list(reversed(range(n))))
    if rank in members:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=group)
        same("all_reduce in new_group", t, torch.tensor([float(sum(members))]))
        dist.barrier(group=group)
    t = torch.tensor([rank + 1])
    dist.all_reduce(t, group=everyone, op=RED.PRODUCT)
    same("all_reduce in reordered group", t, torch.tensor([functools.reduce(
        lambda a, b: a * b, range(1, n + 1))]))
    assert dist.get_backend(group if rank in members else None) == "ringcc"
    # Destroying a group stops its progress thread (and destroys its communicator).
    if rank in members:
        before = progress_threads()
        dist.destroy_process_group(group)
        del group
        gc.collect()
        deadline = time.monotonic() + 10
        while progress_threads() != before - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert progress_threads() == before - 1, "destroy_process_group left its thread running"


def progress_threads():
    return sum(t.name.startswith("ringcc-progress") for t in threading.enumerate())


def check_asynchronous(rank, n):
    """all_reduce returns before the peers have joined: the work runs on the progress
    thread, which is what lets DDP overlap its bucket all-reduces with backward."""
    t = torch.ones(4)
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(t, async_op=True)
        returned = time.monotonic() - start
        assert returned < 0.5, f"all_reduce blocked the caller {returned:.2f} s"
        assert not work.is_completed(), "completed before the other ranks called"
        work.wait()
    else:
        time.sleep(1.5)
        dist.all_reduce(t)
    same("late all_reduce", t, torch.full((4,), float(n)))


def expect_error(name, exc_type, words, fn):
    try:
        fn()
    except exc_type as e:
        missing = [w for w in words if w not in str(e)]
        assert not missing, f"{name}: message {str(e)!r} lacks {missing}"
        return
    raise AssertionError(f"{name}: no {exc_type.__name__} raised")


def check_bad_input(rank, n):
    expect_error("int16 sum", TypeError, ["all_reduce", "int16"],
                 lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)))
    expect_error("float BAND", TypeError, ["all_reduce", "BAND"],
                 lambda: dist.all_reduce(torch.ones(3), op=RED.BAND))
    expect_error("short list", ValueError, ["all_gather", str(n)],
                 lambda: dist.all_gather([torch.empty(3)] * (n + 1), torch.ones(3)))
    expect_error("size mismatch", ValueError, ["all_gather_into_tensor"],
                 lambda: dist.all_gather_into_tensor(torch.empty(n * 3 + 1), torch.ones(3)))
    # torch 1.13 takes the tensor factor in a list, torch 2.x as a tensor.
    factor = [torch.tensor([2.0])] if torch.__version__.startswith("1.") else torch.tensor([2.0])
    expect_error("tensor factor", NotImplementedError, ["tensor factor"],
                 lambda: dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(factor)))
    # torch 2.x refuses a send to self before asking the backend: ask ours directly.
    expect_error("send to self", ValueError, ["send", "peer"],
                 lambda: ringcc.torch._ringcc_group(None, "test").send([torch.ones(1)], rank))
    # The group still works after refused calls (they never reached ringcc).
    t = torch.ones(2)
    dist.all_reduce(t)
    same("all_reduce after bad input", t, torch.full((2,), float(n)))


def run(rank, n):
    for check in (check_all_reduce, check_reduce, check_broadcast, check_all_gather,
                  check_reduce_scatter, check_all_to_all, check_gather_scatter,
                  check_send_recv, check_groups_and_barrier, check_asynchronous,
                  check_bad_input):
        check(rank, n)
        dist.barrier()
    if rank == 0:
        print(f"all collectives exact on {n} ranks", flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
