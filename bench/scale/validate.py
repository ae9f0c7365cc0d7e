#!/usr/bin/env python3
"""Calibrates the cost model's host figures and validates its predictions (docs/scale.md).

  bench/scale/validate.py calibrate [--build build] [--reps 3] [--procs]
      2 ranks (threads), NCCL_ALGO=Ring, each protocol forced: the per-hop latency from the
      small sizes and the bandwidth from the large ones, as the figures of src/tune/cost_model.cc
      are set; plus a 1-rank call for the fixed cost of one operation.

  bench/scale/validate.py validate [--build build] [--ranks 2,4,8] [--reps 3] [--algo Tree]
                                   [--procs]
      all_reduce_perf -t N with the tuner's own choice (or NCCL_ALGO=--algo) against
      scale_model --figures host for the same sizes: measured and predicted time per size and
      the error, as a Markdown table.

--procs runs the ranks as processes (ringcc-run -n N: shared memory) instead of threads of one
process (the p2p transport).

Runs alternate between configurations --reps times (the machine is shared and noisy) and keep
the median per size. Only the build tree's tools and library are used.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SIZES = [8, 64, 512, 4096, 32768, 262144, 2097152, 16777216, 67108864]


def perf(build, nranks, env_extra, procs, sizes=SIZES, iters=None):
    """Median-free single run: {size: out-of-place time in us} of all_reduce_perf, its ranks
    threads of one process (-t) or, with `procs`, processes (ringcc-run: shared memory)."""
    out = {}
    tool = os.path.join(build, "bench", "all_reduce_perf")
    ranks = ([os.path.join(build, "bench", "ringcc-run"), "-n", str(nranks), tool] if procs
             else [tool, "-t", str(nranks)])
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = os.path.join(tmp, f"r{size}.json")
            n = iters or (2000 if size <= 4096 else 200 if size <= 65536 else
                          20 if size <= 4 << 20 else 5)
            env = dict(os.environ, **env_extra)
            cmd = ranks + ["-b", str(size), "-e", str(size), "-n", str(n), "-w", "3", "-c", "0",
                           "-J", path]
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=600)
            with open(path) as f:
                res = json.load(f)["results"]
            out[size] = res[0]["out_of_place"]["time"]
    return out


def medians(build, configs, reps, procs):
    """configs: {name: (nranks, env)} -> {name: {size: median us}}, runs alternating."""
    runs = {name: [] for name in configs}
    for _ in range(reps):
        for name, (nt, env) in configs.items():
            runs[name].append(perf(build, nt, env, procs))
    return {name: {s: statistics.median(r[s] for r in rs) for s in SIZES}
            for name, rs in runs.items()}


def calibrate(args):
    configs = {p: (2, {"NCCL_ALGO": "Ring", "NCCL_PROTO": p}) for p in ("Simple", "LL", "Direct")}
    configs["1 rank"] = (1, {})
    m = medians(args.build, configs, args.reps, args.procs)
    call = statistics.median(m["1 rank"][s] for s in SIZES[:3])
    print(f"# fixed cost of one call (1 rank, 8-512 B): {call:.2f} us")
    print("| protocol | time 8 B (us) | alpha per hop (us) | time 64 MiB (us) | bandwidth (GB/s) |")
    print("| --- | --- | --- | --- | --- |")
    for p in ("Simple", "LL", "Direct"):
        small = statistics.median(m[p][s] for s in SIZES[:3])
        alpha = max(0.0, (small - call) / 2)  # 2 ranks: a ring all-reduce is 2 hops
        big = SIZES[-1] if p != "LL" else SIZES[-3]
        t = m[p][big]
        bw = big / max(t - small, 1e-9) / 1e3  # 2 ranks: busbw factor 1
        print(f"| {p} | {small:.2f} | {alpha:.2f} | {t:.0f} ({big} B) | {bw:.2f} |")


def predict(build, n, sizes, algo):
    cmd = [os.path.join(build, "bench", "scale_model"), "--figures", "host", "--ranks", str(n),
           "--per-host", str(n), "--protocols", "Simple,LL,Direct", "--sizes",
           ",".join(map(str, sizes)), "--csv", "/dev/stdout"]
    if algo:
        cmd += ["--algos", algo]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    pred = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) == 11 and f[0] == "host":
            pred[int(float(f[4]))] = (float(f[10]), f[9])
    return pred


def validate(args):
    ranks = [int(x) for x in args.ranks.split(",")]
    env = {"NCCL_ALGO": args.algo} if args.algo else {}
    configs = {f"{n} ranks": (n, env) for n in ranks}
    m = medians(args.build, configs, args.reps, args.procs)
    print("| ranks | size (B) | model's choice | predicted (us) | measured (us) | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in ranks:
        pred = predict(args.build, n, SIZES, args.algo)
        for s in SIZES:
            p, choice = pred[s]
            t = m[f"{n} ranks"][s]
            print(f"| {n} | {s} | {choice} | {p:.1f} | {t:.1f} | {100 * (p - t) / t:+.0f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=["calibrate", "validate"])
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--algo", default="", help="validate: NCCL_ALGO for both (default: the tuner's)")
    ap.add_argument("--procs", action="store_true",
                    help="ranks as processes (ringcc-run, shared memory) instead of threads")
    args = ap.parse_args()
    print(f"# load average before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    (calibrate if args.mode == "calibrate" else validate)(args)
    print(f"# load average after: {os.getloadavg()[0]:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
