"""Device check (tests/gpu/run.sh): PyTorch's own ProcessGroupNCCL on a CUDA tensor, with
ringcc's libnccl.so.2 preloaded, or with NVIDIA's NCCL from the image, side by side.

  LD_PRELOAD=DIR/libnccl.so.2 python3 torch_nccl_preload.py --expect ringcc --bundle DIR --world N
  python3 torch_nccl_preload.py --expect nvidia --bundle DIR --world 1

Each of the N processes (all on GPU 0: ringcc allows several ranks a GPU, NVIDIA's NCCL refuses
them) checks that the one libnccl it mapped is the expected one (the bundle's, exporting
ringccGetVersion; or another, without it), then: an all_reduce exact; one DDP step of a linear
layer whose averaged gradients are known exactly; the time of an 8-byte and a 64 MiB
all_reduce (microseconds a call, after a warm-up). Rank 0 prints one line starting with
"torch_nccl_preload: result".
Exit 0: every check passed; 1: one failed; 2: torch has no CUDA here (nothing checked).
"""
import argparse
import ctypes
import datetime
import os
import sys
import time


def mapped_libnccl():
    with open("/proc/self/maps") as f:
        return sorted({os.path.realpath(line.split()[-1]) for line in f if "libnccl" in line})


def timed_all_reduce(torch, dist, numel, iters):
    x = torch.ones(numel, dtype=torch.float32, device="cuda")
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def worker(rank, args, failures):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    problems = []
    loaded = ctypes.CDLL("libnccl.so.2")
    version = ctypes.c_int()
    loaded.ncclGetVersion(ctypes.byref(version))
    is_ringcc = hasattr(loaded, "ringccGetVersion")  # only ringcc exports it
    maps = mapped_libnccl()
    ours = os.path.realpath(os.path.join(args.bundle, "libnccl.so.2"))
    if args.expect == "ringcc" and (not is_ringcc or maps != [ours]):
        problems.append(f"ringcc is not the one libnccl loaded: mapped {maps}")
    if args.expect == "nvidia" and (is_ringcc or len(maps) != 1 or ours in maps):
        problems.append(f"NVIDIA's NCCL is not the one libnccl loaded: mapped {maps}")
    if rank == 0:
        print(f"torch {torch.__version__}, CUDA {torch.version.cuda}; ncclGetVersion "
              f"{version.value}; mapped {maps}; torch.cuda.nccl.version() "
              f"{torch.cuda.nccl.version()}", flush=True)
    if problems:
        failures.extend(problems)
        print("torch_nccl_preload: FAIL: " + "; ".join(problems), flush=True)
        return
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=60))
    world = args.world
    try:
        x = torch.arange(1024, dtype=torch.float32, device="cuda") + rank
        dist.all_reduce(x)
        want = torch.arange(1024, dtype=torch.float32) * world + world * (world - 1) / 2
        if not torch.equal(x.cpu(), want):
            problems.append("all_reduce result WRONG")

        # One DDP step: loss = sum(layer(x)), x = rank + 1 everywhere, 32 rows. Each rank's
        # weight gradient is 32 * (rank + 1) in every element, its bias gradient 32; DDP
        # averages them: 32 * (world + 1) / 2 and 32, exact in float.
        from torch.nn.parallel import DistributedDataParallel as DDP
        torch.manual_seed(0)
        layer = torch.nn.Linear(256, 256).cuda()
        ddp = DDP(layer, device_ids=[0])
        inp = torch.full((32, 256), float(rank + 1), device="cuda")
        ddp(inp).sum().backward()
        torch.cuda.synchronize()
        if not (torch.all(layer.weight.grad == 32 * (world + 1) / 2).item() and
                torch.all(layer.bias.grad == 32).item()):
            problems.append("DDP gradients WRONG")

        small = timed_all_reduce(torch, dist, 2, 200)
        large = timed_all_reduce(torch, dist, 16 << 20, 20)
    except Exception as e:  # the library's error, for the log
        problems.append(f"{type(e).__name__}: {e}")
        small = large = float("nan")
    if rank == 0:
        lib = "ringcc" if is_ringcc else "NVIDIA NCCL"
        verdict = "; ".join(problems) if problems else "all_reduce exact, DDP step exact"
        print(f"torch_nccl_preload: result {lib} {version.value}, {world} rank(s) on GPU 0: "
              f"{verdict}; all_reduce 8 B {small:.1f} us, 64 MiB {large:.1f} us "
              f"({64 * 1.048576 / large * 1e3:.0f} GB/s algbw)", flush=True)
    failures.extend(problems)
    try:
        dist.destroy_process_group()
    except Exception as e:
        failures.append(f"destroy_process_group: {e}")


def spawned(rank, args, queue):
    failures = []
    try:
        worker(rank, args, failures)
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
    queue.put((rank, failures))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--expect", choices=["ringcc", "nvidia"], required=True)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("torch_nccl_preload: torch has no CUDA on this machine: nothing checked")
        return 2
    if args.world == 1:
        failures = []
        worker(0, args, failures)
    else:
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")  # children inherit LD_PRELOAD through the environment
        queue = ctx.Queue()
        procs = [ctx.Process(target=spawned, args=(r, args, queue)) for r in range(args.world)]
        for p in procs:
            p.start()
        failures = []
        for _ in procs:
            rank, f = queue.get(timeout=120)
            failures.extend(f"rank {rank}: {x}" for x in f)
        for p in procs:
            p.join(10)
            if p.exitcode != 0:
                failures.append(f"a process exited with {p.exitcode}")
    for f in failures:
        print(f"torch_nccl_preload: FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
