#!/usr/bin/python3
"""ringcc-monitor: pictures of a ringcc job's communication (docs/monitoring.md).

  ringcc-monitor DIR
      reads the per-operation records every rank wrote with RINGCC_TRACE=DIR and draws into
      DIR: timeline.png (per rank, when each operation ran), busbw.png (bus bandwidth per
      size and collective), stragglers.png (per rank: how often it called last and how long
      the others waited for it), report.html (all of it in one self-contained page) and
      summary.json (the numbers).
  ringcc-monitor --heatmap [-n N] [--min 8] [--max 64M] DIR
      runs ringcc-pairprobe on N local ranks (through ringcc-run): send/recv between every
      ordered pair of ranks, then draws DIR/heatmap.png, the rank x rank bandwidth and latency
      matrices, from DIR/pairs.json. --pairs FILE draws an existing file instead (a probe
      run by mpirun across hosts).

Stragglers: for each collective call that every rank recorded (same call number, same
collective and count), the rank whose engine started it last is the straggler, and every other
rank waited (its start minus theirs) for it. Send/recv are left out: their numbers do not
match across ranks.
"""

import argparse
import base64
import glob
import json
import os
import shutil
import subprocess
import sys

PAIR_PROBE = "ringcc-pairprobe"
LAUNCHER = "ringcc-run"


def read_records(directory):
    """Every record in DIR/ringcc-*.jsonl, as dicts; a torn last line is skipped."""
    records = []
    for path in sorted(glob.glob(os.path.join(directory, "ringcc-*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"ringcc-monitor: {path}: skipping a torn line", file=sys.stderr)
    return records


def by_comm(records):
    comms = {}
    for r in records:
        comms.setdefault(r["comm"], []).append(r)
    return comms


def stragglers(records):
    """Per rank of one communicator: calls it was last in, the wait it caused the others
    (microseconds, summed), and the time it waited for others."""
    nranks = max(r["nranks"] for r in records)
    calls = {}
    for r in records:
        if r["coll"] in ("Send", "Recv"):
            continue
        calls.setdefault(r["seq"], {})[r["rank"]] = r
    per_rank = {rank: {"rank": rank, "last": 0, "caused_wait_us": 0, "waited_us": 0}
                for rank in range(nranks)}
    matched = 0
    for seq, ranks in sorted(calls.items()):
        if len(ranks) != nranks:
            continue
        shape = {(r["coll"], r["count"]) for r in ranks.values()}
        if len(shape) != 1:
            continue
        matched += 1
        last = max(ranks.values(), key=lambda r: r["start_us"])
        for rank, r in ranks.items():
            wait = last["start_us"] - r["start_us"]
            per_rank[rank]["waited_us"] += wait
            per_rank[last["rank"]]["caused_wait_us"] += wait
        per_rank[last["rank"]]["last"] += 1
    ordered = sorted(per_rank.values(), key=lambda s: -s["caused_wait_us"])
    return {"calls": matched, "ranks": ordered}


def bandwidth_by_size(records):
    """{coll: [(bytes, median busbw GB/s, n)]} over successful operations."""
    table = {}
    for r in records:
        if r.get("ok", True) and r["time_us"] > 0 and r["bytes"] > 0:
            table.setdefault(r["coll"], {}).setdefault(int(r["bytes"]), []).append(r["busbw_gbs"])
    out = {}
    for coll, sizes in table.items():
        rows = []
        for size in sorted(sizes):
            values = sorted(sizes[size])
            rows.append((size, values[len(values) // 2], len(values)))
        out[coll] = rows
    return out


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
          "#ff9da7", "#9c755f", "#bab0ac"]


def draw_timeline(comm, records, path):
    plt = _pyplot()
    t0 = min(r["call_us"] for r in records)
    nranks = max(r["nranks"] for r in records)
    colls = sorted({r["coll"] for r in records})
    color = {c: COLORS[i % len(COLORS)] for i, c in enumerate(colls)}
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * nranks))
    # One collection per (rank, collective): a long trace has many thousands of bars.
    bars, leads = {}, []
    for r in records:
        start = (r["start_us"] - t0) / 1e3
        width = max((r["end_us"] - r["start_us"]) / 1e3, 1e-3)
        bars.setdefault((r["rank"], r["coll"]), []).append((start, width))
        if r["call_us"] < r["start_us"]:  # called inside a group: waited for its end
            leads.append(((r["call_us"] - t0) / 1e3, start, r["rank"]))
    for (rank, coll), spans in bars.items():
        ax.broken_barh(spans, (rank - 0.35, 0.7), facecolors=color[coll])
    if leads:
        ax.hlines([y for _, _, y in leads], [a for a, _, _ in leads], [b for _, b, _ in leads],
                  color="#999999", lw=0.8)
    ax.set_yticks(range(nranks))
    ax.set_yticklabels([f"rank {i}" for i in range(nranks)])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first call")
    ax.set_title(f"communicator {comm}: operations per rank")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=color[c]) for c in colls],
              labels=colls, loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_busbw(comm, table, path):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (coll, rows) in enumerate(sorted(table.items())):
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=coll,
                color=COLORS[i % len(COLORS)])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes (nccl-tests' size)")
    ax.set_ylabel("bus bandwidth, GB/s (median)")
    ax.set_title(f"communicator {comm}: bus bandwidth per size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_stragglers(comm, summary, path):
    plt = _pyplot()
    ranks = sorted(summary["ranks"], key=lambda s: s["rank"])
    xs = [s["rank"] for s in ranks]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.bar(xs, [s["caused_wait_us"] / 1e3 for s in ranks], color="#e15759")
    a.set_title("others' wait for this rank (ms)")
    b.bar(xs, [s["waited_us"] / 1e3 for s in ranks], color="#4e79a7")
    b.set_title("this rank's wait for others (ms)")
    for ax in (a, b):
        ax.set_xlabel("rank")
        ax.set_xticks(xs)
    fig.suptitle(f"communicator {comm}: stragglers over {summary['calls']} collective calls")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _embed(path):
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img src="data:image/png;base64,{data}">'


def write_html(directory, sections):
    parts = ["<!doctype html><meta charset=utf-8><title>ringcc-monitor</title>",
             "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;"
             "text-align:right}</style><h1>ringcc-monitor</h1>"]
    for comm, summary, pictures in sections:
        parts.append(f"<h2>communicator {comm}</h2><table><tr><th>rank</th><th>last in</th>"
                     "<th>others waited (ms)</th><th>it waited (ms)</th></tr>")
        for s in summary["ranks"]:
            parts.append(f"<tr><td>{s['rank']}</td><td>{s['last']}</td>"
                         f"<td>{s['caused_wait_us'] / 1e3:.2f}</td>"
                         f"<td>{s['waited_us'] / 1e3:.2f}</td></tr>")
        parts.append("</table>")
        parts.extend(_embed(p) for p in pictures)
    path = os.path.join(directory, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path


def monitor(directory):
    records = read_records(directory)
    if not records:
        print(f"ringcc-monitor: no records in {directory} (run the job with RINGCC_TRACE="
              f"{directory})", file=sys.stderr)
        return 1
    comms = by_comm(records)
    summary, sections = {}, []
    for comm, recs in sorted(comms.items(), key=lambda kv: -len(kv[1])):
        s = stragglers(recs)
        table = bandwidth_by_size(recs)
        summary[comm] = {"nranks": max(r["nranks"] for r in recs), "records": len(recs),
                         "stragglers": s,
                         "busbw": {c: [list(r) for r in rows] for c, rows in table.items()}}
        suffix = "" if len(comms) == 1 else f"-{comm}"
        pictures = [os.path.join(directory, f"{name}{suffix}.png")
                    for name in ("timeline", "busbw", "stragglers")]
        draw_timeline(comm, recs, pictures[0])
        draw_busbw(comm, table, pictures[1])
        draw_stragglers(comm, s, pictures[2])
        sections.append((comm, s, pictures))
        print(f"communicator {comm}: {len(recs)} records from {summary[comm]['nranks']} ranks, "
              f"{s['calls']} collective calls matched")
        for r in s["ranks"]:
            print(f"  rank {r['rank']}: last in {r['last']} calls, others waited "
                  f"{r['caused_wait_us'] / 1e3:.2f} ms for it, it waited "
                  f"{r['waited_us'] / 1e3:.2f} ms")
    with open(os.path.join(directory, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {write_html(directory, sections)} and the PNGs beside it")
    return 0


def _tool(name):
    """A ringcc tool: next to this script (installed bindir, build/bench), else on PATH."""
    here = os.path.join(os.path.dirname(os.path.realpath(__file__)), name)
    if os.access(here, os.X_OK):
        return here
    return shutil.which(name)


def run_probe(args, out):
    launcher, probe = _tool(LAUNCHER), _tool(PAIR_PROBE)
    if not launcher or not probe:
        print(f"ringcc-monitor: cannot find {LAUNCHER} and {PAIR_PROBE} next to this script or "
              "on PATH", file=sys.stderr)
        return False
    cmd = [launcher, "-n", str(args.nranks), "--timeout", str(args.timeout), probe,
           "--min", args.min, "--max", args.max, "--out", out]
    if args.budget:
        cmd += ["--budget", args.budget]
    print("ringcc-monitor:", " ".join(cmd))
    return subprocess.call(cmd) == 0


def draw_heatmap(pairs_path, png_path):
    with open(pairs_path, encoding="utf-8") as f:
        pairs = json.load(f)
    n, sizes = pairs["nranks"], pairs["sizes"]
    us = [row["us"] for row in pairs["rows"]]  # us[i][j][k]: i -> j at sizes[k]
    bw = [[sizes[-1] / us[i][j][-1] / 1e3 if i != j and us[i][j][-1] > 0 else float("nan")
           for j in range(n)] for i in range(n)]
    lat = [[us[i][j][0] / 2 if i != j else float("nan") for j in range(n)] for i in range(n)]
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.2 * n, 1.5 + 0.6 * n))
    for ax, matrix, title, cmap in (
            (axes[0], bw, f"bandwidth at {_size(sizes[-1])} (GB/s)", "viridis"),
            (axes[1], lat, f"latency at {_size(sizes[0])} (us, half round trip)", "magma_r")):
        image = ax.imshow(matrix, cmap=cmap)
        fig.colorbar(image, ax=ax, fraction=0.046)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("receiving rank")
        ax.set_ylabel("sending rank")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        if n <= 16:
            for i in range(n):
                for j in range(n):
                    if i != j:  # dark text on light cells, light on dark
                        r, g, b, _ = image.cmap(image.norm(matrix[i][j]))
                        light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5
                        ax.text(j, i, f"{matrix[i][j]:.3g}", ha="center", va="center",
                                fontsize=7, color="black" if light else "white")
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return bw, lat


def _size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def heatmap(args):
    os.makedirs(args.dir, exist_ok=True)
    pairs = args.pairs or os.path.join(args.dir, "pairs.json")
    if not args.pairs and not run_probe(args, pairs):
        return 1
    png = os.path.join(args.dir, "heatmap.png")
    bw, lat = draw_heatmap(pairs, png)
    n = len(bw)
    off = [(i, j) for i in range(n) for j in range(n) if i != j]
    slow = min(off, key=lambda p: bw[p[0]][p[1]])
    print(f"wrote {png}: slowest link {slow[0]} -> {slow[1]} at "
          f"{bw[slow[0]][slow[1]]:.2f} GB/s, "
          f"highest latency {max(lat[i][j] for i, j in off):.1f} us")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="ringcc-monitor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="RINGCC_TRACE directory (records in, pictures out)")
    p.add_argument("--heatmap", action="store_true", help="probe every pair of ranks instead")
    p.add_argument("-n", "--nranks", type=int, default=2, help="--heatmap: local ranks")
    p.add_argument("--min", default="8", help="--heatmap: smallest message (K, M, G)")
    p.add_argument("--max", default="64M", help="--heatmap: largest message")
    p.add_argument("--budget", default=None, help="--heatmap: bytes sent per size and pair")
    p.add_argument("--timeout", type=int, default=600, help="--heatmap: seconds for the probe")
    p.add_argument("--pairs", default=None, help="--heatmap: draw this probe output instead")
    args = p.parse_args(argv)
    if args.heatmap:
        return heatmap(args)
    return monitor(args.dir)


if __name__ == "__main__":
    sys.exit(main())
