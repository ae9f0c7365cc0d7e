"""torchrun at 2, 4 and 8 processes (`python -m torch.distributed.run --nproc_per_node=N`),
each running torchrun_train_worker.py: the DDP guide's training loop (DistributedSampler, DDP,
bf16 autocast) on ringcc and on Gloo in the same processes, two epochs of 384 samples. Usage:
test_torchrun_train.py [N ...] (default 2 4 8).

Tolerance: on 2 ranks a sum of two is the same in either order, so ringcc's parameters must be
Gloo's bit for bit. On more, the two add in different orders, but under bf16 autocast the
gradients come out of bf16 matmuls: 8-bit significands, whose sums over 8 ranks fit a float32
exactly unless their exponents are far apart, so the order rarely matters (measured: equal
bit for bit at 4 and 8 ranks on torch 2.15; 1.13 passed within it). 1e-5 absolute allows an occasional
rounding (AdamW's steps are about lr = 1e-3) without letting a wrong sum through. torchrun's
--tee/--redirects: see test_torchrun.py.
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = {2: 0.0}
DEFAULT_TOLERANCE = 1e-5


def run_torchrun(n):
    tolerance = TOLERANCE.get(n, DEFAULT_TOLERANCE)
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}",
               "--master_addr=127.0.0.1", f"--master_port={harness.free_port()}",
               "--tee=1", "--redirects=2", f"--log_dir={logs}",
               os.path.join(HERE, "torchrun_train_worker.py"), str(tolerance)]
        start = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout)
        if r.returncode:
            sys.stderr.write(r.stderr)
            for f in sorted(glob.glob(os.path.join(logs, "**", "*.log"), recursive=True)):
                sys.stderr.write(f"--- {f}\n" + open(f).read())
    assert r.returncode == 0, f"torchrun with {n} processes exited {r.returncode}"
    done = sorted(int(m.group(1)) for m in re.finditer(rf"worker (\d+)/{n} ok", r.stdout))
    assert done == list(range(n)), f"{n} processes: workers that reported: {done}"
    print(f"ok torchrun {n} processes, within {tolerance:g} of Gloo "
          f"({time.monotonic() - start:.1f} s)", flush=True)


def main():
    counts = [int(a) for a in sys.argv[1:]] or [2, 4, 8]
    for n in counts:
        run_torchrun(n)


if __name__ == "__main__":
    main()
