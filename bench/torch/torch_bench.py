"""Gloo vs ringcc through torch.distributed, as the DDP guide's backend comparison:

  1. dist.all_reduce (float32 sum) size sweep: time per call, algorithm and bus bandwidth
     (bus = alg * 2 (n - 1) / n, as nccl-tests count it);
  2. DDP training step time (forward, backward with the bucket all-reduces, SGD step) of an
     MLP with ~25M parameters, so communication matters.

Both backends run in the same processes: the default group is ringcc, a second group of the
same ranks is Gloo; the sweep alternates them per size, the DDP steps step by step. With
--reps K the sweep and the DDP steps run K times in the same processes; the report gives the
median over the repetitions (each repetition's own figure being a median over its
iterations) and the range of the ringcc / Gloo ratio. Usage (Debian's python, torch 1.13; or
the torch 2.x venv's python):

  RINGCC_LIB=build/libnccl.so.2 PYTHONPATH=python /usr/bin/python3 bench/torch/torch_bench.py \
      --nprocs 2 [--min-bytes 4K --max-bytes 64M --ddp-steps 10 --reps 3 --json out.json]
"""

import argparse
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def time_all_reduce(t, group, iters):
    dist.barrier(group=group)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(t, group=group)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mlp():
    """~25.2M parameters: 2048 -> 4096 -> 2048 -> 2048 -> 2048 -> 10."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048), nn.ReLU(),
                         nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                         nn.Linear(2048, 10))


def time_ddp(groups, steps, batch):
    """Median step time per backend; the backends take turns step by step, so a change in
    the machine's load (it is shared) hits both alike."""
    runs = {}
    for name, group in groups.items():
        model = nn.parallel.DistributedDataParallel(mlp(), process_group=group)
        runs[name] = (model, torch.optim.SGD(model.parameters(), lr=0.01), [])
    x, y = torch.randn(batch, 2048), torch.randint(0, 10, (batch,))
    for step in range(steps + 2):  # 2 warm-up steps
        for name, (model, opt, times) in runs.items():
            dist.barrier(group=groups[name])
            start = time.perf_counter()
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if step >= 2:
                times.append(time.perf_counter() - start)
    params = sum(p.numel() for p in runs["ringcc"][0].parameters())
    return {name: statistics.median(r[2]) for name, r in runs.items()}, params


def worker(rank, n, port, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(n))
    torch.set_num_threads(args.threads)
    import ringcc.torch  # noqa: F401
    dist.init_process_group("ringcc", init_method="env://")
    groups = {"ringcc": None, "gloo": dist.new_group(backend="gloo")}
    sweeps, ddps = [], []
    for _ in range(args.reps):
        sweep = []
        size = args.min_bytes
        while size <= args.max_bytes:
            t = torch.ones(size // 4)
            iters = max(5, min(200, (64 << 20) // size))
            row = {"bytes": size}
            for name, group in groups.items():
                time_all_reduce(t, group, 2)  # warm-up: connections, plans
                row[name] = time_all_reduce(t, group, iters)
            sweep.append(row)
            size *= 4
        sweeps.append(sweep)
        ddp, params = time_ddp(groups, args.ddp_steps, args.batch)
        ddps.append(ddp)
    if rank == 0:
        out.put({"nprocs": n, "sweep": median_sweep(sweeps), "sweeps": sweeps,
                 "ddp": {k: statistics.median(d[k] for d in ddps) for k in ddps[0]},
                 "ddps": ddps, "params": params, "batch": args.batch, "threads": args.threads,
                 "reps": args.reps, "torch": torch.__version__})
    dist.barrier()


def median_sweep(sweeps):
    """Per size, each backend's median time over the repetitions."""
    rows = []
    for i, row in enumerate(sweeps[0]):
        rows.append({"bytes": row["bytes"],
                     **{k: statistics.median(s[i][k] for s in sweeps) for k in ("gloo", "ringcc")}})
    return rows


def ratio_range(r, i):
    """Lowest and highest ringcc / Gloo speed ratio of size i over the repetitions."""
    ratios = [s[i]["gloo"] / s[i]["ringcc"] for s in r.get("sweeps", [r["sweep"]])]
    return min(ratios), max(ratios)


def report(r):
    n = r["nprocs"]
    factor = 2 * (n - 1) / n
    reps = r.get("reps", 1)
    print(f"\n## all_reduce through torch {r.get('torch', '')}, float32 sum, {n} processes, "
          f"median of {reps}\n")
    print("| size | gloo time (us) | ringcc time (us) | gloo busbw (GB/s) | ringcc busbw (GB/s) "
          "| ringcc / gloo | range |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for i, row in enumerate(r["sweep"]):
        b = row["bytes"]
        bw = {k: b * factor / row[k] / 1e9 for k in ("gloo", "ringcc")}
        size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        lo, hi = ratio_range(r, i)
        print(f"| {size} | {row['gloo'] * 1e6:.0f} | {row['ringcc'] * 1e6:.0f} | "
              f"{bw['gloo']:.2f} | {bw['ringcc']:.2f} | {bw['ringcc'] / bw['gloo']:.1f}x | "
              f"{lo:.1f}-{hi:.1f}x |")
    d = r["ddp"]
    print(f"\n## DDP step, {r['params'] / 1e6:.1f}M parameters, batch {r['batch']} per rank, "
          f"{n} processes, {r['threads']} thread(s) each\n")
    print("| backend | step (ms) |\n|---|---:|")
    for k in ("gloo", "ringcc"):
        print(f"| {k} | {d[k] * 1e3:.0f} |")
    print(f"\nringcc step is {d['gloo'] / d['ringcc']:.2f}x faster")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--min-bytes", type=parse_size, default=4 << 10)
    p.add_argument("--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("--ddp-steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=4,
                   help="samples per rank and step: small, so the step is not all compute")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--reps", type=int, default=1,
                   help="repetitions of the sweep and the DDP steps (medians reported)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.nprocs, port, args, out))
             for r in range(args.nprocs)]
    for pr in procs:
        pr.start()
    result = out.get()
    for pr in procs:
        pr.join()
    if any(pr.exitcode for pr in procs):
        raise SystemExit(f"a worker failed: exit codes {[pr.exitcode for pr in procs]}")
    report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
