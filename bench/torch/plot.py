"""Plots torch_bench.py --json results: all_reduce bus bandwidth against size, Gloo and
ringcc, one line pair per process count. Usage: plot.py OUT.png RESULT.json [...]"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fig, ax = plt.subplots(figsize=(7, 4))
    versions = set()
    for path in sys.argv[2:]:
        with open(path) as f:
            r = json.load(f)
        n = r["nprocs"]
        versions.add(r.get("torch", "1.13"))
        sizes = [row["bytes"] for row in r["sweep"]]
        for backend, style in (("ringcc", "-o"), ("gloo", "--s")):
            bw = [row["bytes"] * 2 * (n - 1) / n / row[backend] / 1e9 for row in r["sweep"]]
            ax.plot(sizes, bw, style, label=f"{backend}, {n} processes")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("all_reduce size (bytes, float32)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"dist.all_reduce through torch {', '.join(sorted(versions))}, CPU tensors")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=100)


if __name__ == "__main__":
    main()
