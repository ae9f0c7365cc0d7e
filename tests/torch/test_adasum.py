"""Adasum through torch: ringcc.torch.all_reduce_adasum and the DDP hook adasum_hook against a
reference of the definition (docs/adasum.md) computed in float64 from every rank's input,
gathered over a Gloo group of the same ranks. Usage: test_adasum.py NRANKS
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import harness
import ringcc.torch as rt


def ref_combine(a, b):
    ab, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1 - ab / (2 * aa) if aa > 0 else 1.0
    cb = 1 - ab / (2 * bb) if bb > 0 else 1.0
    return ca * a + cb * b


def reference(vectors):
    """The definition on a list of float64 vectors, one per rank."""
    v = list(vectors)
    n, p = len(v), 1
    while p * 2 <= n:
        p *= 2
    for i in range(n - p):
        v[i] = ref_combine(v[i], v[p + i])
    d = 1
    while d < p:
        for s in range(0, p, 2 * d):
            v[s] = ref_combine(v[s], v[s + d])
        d *= 2
    return v[0]


def reference_segments(flat, segments, gloo, n):
    """Every rank's `flat` gathered over Gloo (as float64: exact, and Gloo of torch 1.13
    gathers no bfloat16), the definition applied per segment."""
    flat = flat.double()
    copies = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(copies, flat, group=gloo)
    out, lo = [], 0
    for length in segments:
        out.append(reference([c[lo:lo + length] for c in copies]))
        lo += length
    return torch.cat(out)


def check_all_reduce(rank, n, gloo):
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 0.1}
    for dtype, rtol in tol.items():
        torch.manual_seed(10 + rank)
        common = torch.linspace(-1, 1, 3000, dtype=torch.float64)
        x = (common + 0.5 * torch.randn(3000, dtype=torch.float64)).to(dtype)
        segments = [1000, 7, 1993]
        expect = reference_segments(x, segments, gloo, n)
        got = x.clone()
        assert rt.all_reduce_adasum(got, segments=segments) is got
        lo = 0
        for length in segments:
            e, g = expect[lo:lo + length], got[lo:lo + length].double()
            rms = float(e.pow(2).mean().sqrt())
            err = float((g - e).abs().max())
            assert err <= rtol * rms, f"{dtype}: segment at {lo}: max error {err} (RMS {rms})"
            lo += length
    try:
        rt.all_reduce_adasum(torch.ones(4, dtype=torch.int32))
    except TypeError as e:
        assert "Adasum takes" in str(e)
    else:
        raise AssertionError("an int32 tensor was accepted")


def reference_hook(gloo, n):
    """The hook's contract, computed by the reference over Gloo."""
    def hook(_, bucket):
        flat = bucket.buffer()
        segments = [g.numel() for g in bucket.gradients()]
        flat.copy_(reference_segments(flat, segments, gloo, n).to(flat.dtype))
        fut = torch.futures.Future()
        fut.set_result(flat)
        return fut
    return hook


def train(rank, n, hook, group):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)),
                process_group=group, bucket_cap_mb=0.001)
    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # every rank its own data
    for _ in range(3):
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 2, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def run(rank, n):
    gloo = dist.new_group(backend="gloo")
    check_all_reduce(rank, n, gloo)
    ours = train(rank, n, rt.adasum_hook, None)
    theirs = train(rank, n, reference_hook(gloo, n), gloo)
    for i, (p, q) in enumerate(zip(ours, theirs)):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), f"parameter {i} differs"
    if rank == 0:
        print(f"adasum: all_reduce_adasum and adasum_hook match the reference on {n} ranks",
              flush=True)


if __name__ == "__main__":
    harness.run_all(run, harness.nranks_from_argv())
