"""ringcc.Comm's elastic calls (shrink, grow_unique_id, grow, join), then examples/elastic.py.

Ranks are threads of this process (ctypes drops the GIL in each call), except in the example,
which runs its ranks as processes. Exits non-zero on any failure.
"""

import ctypes
import os
import subprocess
import sys
import threading

import ringcc
from ringcc import _comm

COUNT = 1000
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def on_threads(n, body):
    """body(i) on n threads; returns the results (an exception is a result too)."""
    results = [None] * n

    def run(i):
        try:
            results[i] = body(i)
        except Exception as e:  # reported by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def all_reduce_exact(comms):
    """An all-reduce (sum) on every comm, from threads: True if every rank got the exact sum."""
    n = len(comms)

    def body(i):
        c = comms[i]
        send = (ctypes.c_int32 * COUNT)(*[(c.rank + 1) * 10 + k for k in range(COUNT)])
        recv = (ctypes.c_int32 * COUNT)()
        c.all_reduce(ctypes.addressof(send), ctypes.addressof(recv), COUNT, _comm.INT32,
                     _comm.SUM)
        return list(recv) == [n * (n + 1) // 2 * 10 + n * k for k in range(COUNT)]

    return on_threads(n, body)


def shrink_then_grow():
    n = 3
    uid = ringcc.Comm.new_unique_id()
    comms = on_threads(n, lambda r: ringcc.Comm(uid, n, r))
    # Rank 1 leaves; the others shrink it out: ranks 0, 2 become 0, 1.
    small = on_threads(n - 1, lambda i: comms[[0, 2][i]].shrink([1], abort=False))
    check([(c.nranks, c.rank) for c in small] == [(2, 0), (2, 1)], f"shrunk: {small}")
    check(all(all_reduce_exact(small)), "all-reduce on the shrunk communicator")
    # Grow back to 4: rank 0 coordinates, ranks 2 and 3 are new.
    grow_id = small[0].grow_unique_id()
    nranks = 4

    def grow(r):
        if r < 2:
            return small[r].grow(nranks, grow_id if r == 0 else None)
        return ringcc.Comm.join(grow_id, nranks, r)

    big = on_threads(nranks, grow)
    check([(c.nranks, c.rank) for c in big] == [(4, r) for r in range(4)], f"grown: {big}")
    check(all(all_reduce_exact(big)), "all-reduce on the grown communicator")
    # The id is single-use: a new rank with it again is refused (ncclInvalidUsage).
    try:
        ringcc.Comm.join(grow_id, nranks, 3)
        check(False, "a second join with a consumed id succeeded")
    except ringcc.NcclError as e:
        check(e.code == 5 and "single-use" in str(e), f"reused id: {e}")
    # An id of ncclGetUniqueId cannot grow anything (ncclInvalidArgument, naming the cause).
    try:
        ringcc.Comm.join(ringcc.Comm.new_unique_id(), nranks, 3)
        check(False, "a join with a plain id succeeded")
    except ringcc.NcclError as e:
        check(e.code == 4 and "ncclCommGetUniqueId" in str(e), f"plain id: {e}")
    for c in big + small + comms:
        c.destroy()


def example():
    script = os.path.join(os.environ["RINGCC_SOURCE_ROOT"], "examples", "elastic.py")
    run = subprocess.run([sys.executable, script, "4", "10"], capture_output=True, text=True,
                         timeout=200)
    print(run.stdout, run.stderr, flush=True)
    check(run.returncode == 0, f"examples/elastic.py exited {run.returncode}")
    check("/dev/shm clean: OK" in run.stdout, "examples/elastic.py did not report OK")


shrink_then_grow()
example()
print(f"test_elastic: {len(failures)} failures", flush=True)
sys.exit(1 if failures else 0)
