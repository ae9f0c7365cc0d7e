"""`python3 -m torch.distributed.run --nproc_per_node=2` (torchrun) with backend 'ringcc': the
launcher sets RANK, WORLD_SIZE, MASTER_ADDR/PORT, and the worker (torchrun_worker.py) trains
with DDP for a few steps and checks the result against every rank's.

Debian's torch 1.13 under Python 3.11: torchrun's default --redirects 0 / --tee 0 fail
(Std.from_str iterates an IntFlag, which in 3.11 skips the zero member, so it returns None and
to_map raises "'NoneType' object has no attribute 'get'"). Non-zero values avoid it: --tee 1
copies each worker's stdout to ours, --redirects 2 sends its stderr to --log_dir, which we
print on failure. This is torch's bug, not the backend's.
"""

import glob
import os
import subprocess
import sys
import tempfile

import harness

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={harness.free_port()}",
               "--tee=1", "--redirects=2", f"--log_dir={logs}",
               os.path.join(HERE, "torchrun_worker.py")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode:
            for f in sorted(glob.glob(os.path.join(logs, "**", "*.log"), recursive=True)):
                sys.stderr.write(f"--- {f}\n" + open(f).read())
    assert r.returncode == 0, f"torchrun exited {r.returncode}"
    # --tee prefixes each line with "[rank]:"
    done = sorted(line.split(":", 1)[-1] for line in r.stdout.splitlines() if "worker " in line)
    assert done == ["worker 0/2 ok", "worker 1/2 ok"], f"worker reports: {done}"
    print("ok torchrun")


if __name__ == "__main__":
    main()
