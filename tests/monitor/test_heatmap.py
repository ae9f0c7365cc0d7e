"""ringcc-monitor --heatmap runs the real pairwise probe (ringcc-pairprobe through ringcc-run)
on 3 local ranks with small sizes, and draws the matrices: the file has one row per rank, one
time per peer and size, positive off the diagonal, and the PNG is written.

Usage: test_heatmap.py BUILD_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "bench", "ringcc-monitor")
    with tempfile.TemporaryDirectory(prefix="ringcc-heatmap-") as out:
        cmd = ["/usr/bin/python3", tool, "--heatmap", "-n", "3", "--min", "8", "--max", "64K",
               "--budget", "1M", "--timeout", "120", out]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        print(run.stdout, run.stderr)
        assert run.returncode == 0, f"{cmd} exited {run.returncode}"
        with open(os.path.join(out, "pairs.json"), encoding="utf-8") as f:
            pairs = json.load(f)
        n = pairs["nranks"]
        assert n == 3, pairs
        assert pairs["sizes"] == [8 << k for k in range(14)], pairs["sizes"]  # 8 B .. 64 KiB
        assert len(pairs["rows"]) == n
        for i, row in enumerate(pairs["rows"]):
            assert row["host"], row
            assert len(row["us"]) == n
            for j, times in enumerate(row["us"]):
                assert len(times) == len(pairs["sizes"])
                if i == j:
                    assert all(t == 0 for t in times), (i, times)
                else:
                    assert all(t > 0 for t in times), (i, j, times)
        png = os.path.join(out, "heatmap.png")
        assert os.path.getsize(png) > 1000, png
        assert "slowest link" in run.stdout
    print("heatmap: ok")


if __name__ == "__main__":
    main()
