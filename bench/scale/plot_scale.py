#!/usr/bin/python3
"""Plots scale_model's CSV (bench/scale/scale_model.cc): all-reduce bus bandwidth and time
against the number of GPUs, ring dashed and tree solid, one colour per message size.

  build/bench/scale_model --csv /tmp/scale.csv
  /usr/bin/python3 bench/scale/plot_scale.py /tmp/scale.csv docs/img/scale_allreduce.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def size_text(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b:g} B"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    sizes = sorted({float(r["bytes"]) for r in rows})
    fig, (bw_ax, t_ax) = plt.subplots(1, 2, figsize=(13, 5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, size in enumerate(sizes):
        sel = [r for r in rows if float(r["bytes"]) == size]
        n = [int(r["ranks"]) for r in sel]
        c = colours[i % len(colours)]
        for algo, style in (("ring", "--"), ("tree", "-")):
            bw_ax.plot(n, [float(r[algo + "_busbw"]) for r in sel], style, color=c,
                       label=f"{algo}, {size_text(size)}")
            t_ax.plot(n, [float(r[algo + "_us"]) for r in sel], style, color=c)
    for ax in (bw_ax, t_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs (8 per host)")
        ax.grid(True, which="both", alpha=0.3)
    t_ax.set_yscale("log")
    bw_ax.set_ylabel("all-reduce bus bandwidth (GB/s)")
    t_ax.set_ylabel("all-reduce time (us)")
    bw_ax.set_title("bus bandwidth (ring dashed, tree solid)")
    t_ax.set_title("time per all-reduce")
    bw_ax.legend(fontsize=7, ncol=2)
    fig.suptitle(f"ringcc cost model, {rows[0]['figures']} figures (bench/scale, docs/scale.md)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
