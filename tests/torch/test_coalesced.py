"""The coalesced collectives on ringcc, exact, and against Gloo run in the same processes:
all_reduce_coalesced with every ReduceOp (PREMUL_SUM and the bitwise ones too),
all_gather_coalesced, and torch 2.x's coalescing manager (dist._coalescing_manager) over
all_reduce, all_gather_into_tensor and reduce_scatter_tensor, with and without a device
(with one, ops run between _start_coalescing and _end_coalescing). Usage: test_coalesced.py N
"""

import torch
import torch.distributed as dist

import harness
import ringcc.torch
from test_collectives import RED, data, expect_error, expected, reduce_cases, same

TORCH2 = not torch.__version__.startswith("1.")


def reference(rank, n, dtype, op, numel):
    """The expected all-reduce. A floating AVG over a rank count that is not a power of two
    is not exact (NCCL's average, and ringcc's, is not correctly rounded: 1 ulp off in
    float16): there the reference is the single-tensor dist.all_reduce of the same input
    (test_collectives checks that one exactly where it can be), itself within 2 ulp of
    the exact average."""
    want = expected(n, dtype, op, numel)
    if op != RED.AVG or not (dtype.is_floating_point or dtype.is_complex) or n & (n - 1) == 0:
        return want
    single = data(rank, dtype, numel)
    dist.all_reduce(single, op=op)
    real = torch.view_as_real(single) if dtype.is_complex else single
    want_real = torch.view_as_real(want) if dtype.is_complex else want
    eps = torch.finfo(real.dtype).eps
    assert torch.allclose(real.double(), want_real.double(), rtol=2 * eps, atol=0), (
        f"all_reduce {dtype} AVG: {single[:8]} is not within 2 ulp of {want[:8]}")
    return single


def check_all_reduce_coalesced(rank, n, gloo):
    count = 0
    for dtype, op in reduce_cases():
        ts = [data(rank, dtype, 10), data(rank, dtype, 7).reshape(7, 1)]
        dist.all_reduce_coalesced(ts, op=op)
        for t, k in zip(ts, (10, 7)):
            same(f"all_reduce_coalesced {dtype} {op} [{k}]", t.reshape(-1),
                 reference(rank, n, dtype, op, k))
        count += 1
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        ts = [data(rank, dtype, 10), data(rank, dtype, 3)]
        dist.all_reduce_coalesced(ts, op=dist._make_nccl_premul_sum(0.5))
        for t, k in zip(ts, (10, 3)):
            same(f"all_reduce_coalesced {dtype} premul", t,
                 (expected(n, dtype, RED.SUM, k) * 0.5).to(dtype))
        count += 1
    # Gloo on the same inputs (the ops Gloo's allreduce_coalesced has).
    for dtype, op in [(torch.float32, RED.SUM), (torch.int64, RED.MAX), (torch.float64, RED.MIN),
                      (torch.int32, RED.PRODUCT)]:
        ours = [data(rank, dtype, 5) * (k + 1) for k in range(3)]
        theirs = [t.clone() for t in ours]
        dist.all_reduce_coalesced(ours, op=op)
        dist.all_reduce_coalesced(theirs, op=op, group=gloo)
        for k, (a, b) in enumerate(zip(ours, theirs)):
            same(f"all_reduce_coalesced vs Gloo {dtype} {op} [{k}]", a, b)
    if rank == 0:
        print(f"ok all_reduce_coalesced: {count} dtype/op cases exact, 4 match Gloo")


def check_all_gather_coalesced(rank, n, gloo):
    gloo_has = (torch.float32, torch.int32)  # Gloo's allgather_coalesced: not bool, int16, ...
    for dtype in (torch.float32, torch.int32, torch.int16, torch.bool, torch.complex64):
        inputs = [data(rank, dtype, 6).reshape(2, 3), data(rank + 10, dtype, 5)]
        # output_lists[r][i]: rank r's input i.
        ours = [[torch.empty_like(t) for t in inputs] for _ in range(n)]
        theirs = [[torch.empty_like(t) for t in inputs] for _ in range(n)]
        dist.all_gather_coalesced(ours, inputs)
        if dtype in gloo_has:
            dist.all_gather_coalesced(theirs, inputs, group=gloo)
        for r in range(n):
            for i, shape in enumerate(((2, 3), (5,))):
                want = data(r + 10 * i, dtype, 6 if i == 0 else 5).reshape(shape)
                same(f"all_gather_coalesced {dtype} [{r}][{i}]", ours[r][i], want)
                if dtype in gloo_has:
                    same(f"all_gather_coalesced vs Gloo {dtype} [{r}][{i}]", ours[r][i],
                         theirs[r][i])
    if rank == 0:
        print("ok all_gather_coalesced: 5 dtypes exact, float32 and int32 as Gloo's")


def check_coalescing_manager(rank, n, gloo):
    for device in (None, torch.device("cpu")):
        for async_ops in (False, True):
            ts = [data(rank, torch.float32, 9) * (k + 1) for k in range(3)]
            with dist._coalescing_manager(device=device, async_ops=async_ops) as cm:
                for t in ts:
                    dist.all_reduce(t)
            if async_ops:
                cm.wait()
            for k, t in enumerate(ts):
                same(f"coalesced all_reduce {device} {async_ops} [{k}]", t,
                     expected(n, torch.float32, RED.SUM, 9) * (k + 1))
    outs = [torch.empty(n * 4, dtype=torch.int64) for _ in range(2)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for k, o in enumerate(outs):
            dist.all_gather_into_tensor(o, data(rank, torch.int64, 4) + k)
    cm.wait()
    for k, o in enumerate(outs):
        gl = torch.empty(n * 4, dtype=torch.int64)
        dist.all_gather_into_tensor(gl, data(rank, torch.int64, 4) + k, group=gloo)
        same(f"coalesced all_gather_into_tensor [{k}]", o, gl)
    outs = [torch.empty(3, dtype=torch.float64) for _ in range(2)]
    with dist._coalescing_manager():
        for k, o in enumerate(outs):
            dist.reduce_scatter_tensor(o, data(rank, torch.float64, 3 * n) * (k + 1))
    for k, o in enumerate(outs):
        want = expected(n, torch.float64, RED.SUM, 3 * n)[rank * 3:(rank + 1) * 3] * (k + 1)
        same(f"coalesced reduce_scatter_tensor [{k}]", o, want)
    # Sends and receives between _start_coalescing and _end_coalescing (one batch).
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.empty(100)
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        dist.isend(data(rank, torch.float32, 100), right)
        dist.irecv(got, left)
    assert len(cm.works) == 1, f"coalescing manager gave {len(cm.works)} works, want 1"
    cm.wait()
    same("coalesced isend/irecv", got, data(left, torch.float32, 100))
    if rank == 0:
        print("ok coalescing manager: all_reduce, all_gather_into_tensor, reduce_scatter_tensor, "
              "send/recv")


def check_bad_input(rank, n, gloo):
    expect_error("coalesced float BAND", TypeError, ["all_reduce_coalesced", "BAND"],
                 lambda: dist.all_reduce_coalesced([torch.ones(2)], op=RED.BAND))
    pg = ringcc.torch._ringcc_group(None, "test")
    expect_error("coalesced gather short list", ValueError, ["all_gather_coalesced", str(n)],
                 lambda: pg.allgather_coalesced([[torch.empty(2)]] * (n + 1), [torch.ones(2)]))


def run(rank, n):
    gloo = dist.new_group(backend="gloo")
    checks = [check_all_reduce_coalesced, check_all_gather_coalesced, check_bad_input]
    if TORCH2:
        checks.append(check_coalescing_manager)
    elif rank == 0:
        print("note: dist._coalescing_manager is torch 2.x's; not checked on", torch.__version__)
    for check in checks:
        check(rank, n, gloo)
        dist.barrier()


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
