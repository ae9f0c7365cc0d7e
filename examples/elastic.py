"""Elastic all-reduce through the Python package: examples/elastic.c's loop with ringcc.Comm.

N ranks (processes) all-reduce in a loop, every result checked exactly; at iteration KILL_AT
the victim is SIGKILLed; the survivors' all_reduce raises NcclError, the launcher tells them
who died, they Comm.shrink() it out and redo the iteration on N-1 ranks; GROW_AFTER iterations
later rank 0 makes a grow id (Comm.grow_unique_id), the launcher starts a replacement with it
(Comm.join), the survivors Comm.grow() back to N, rank 0 broadcasts the iteration to resume
at, and the loop ends on N ranks. The launcher checks the exits and that /dev/shm holds no
ringcc segment of any rank.

    RINGCC_LIB=build/libnccl.so.2 python3 examples/elastic.py [nranks [iterations]]

(From a source checkout with the default build folder, RINGCC_LIB is not needed.) The same
pattern carries a torch job: the model state is what rank 0 broadcasts after the grow.
"""

import ctypes
import os
import select
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import ringcc  # noqa: E402
from ringcc import _comm  # noqa: E402

COUNT = 4096
KILL_AT, GROW_AFTER, VICTIM = 3, 3, 1
LIMIT_S = 120


def input_of(rank, it):
    """Rank `rank`'s input at iteration `it`: small integers, exact in any order of summing."""
    return [float((rank + 1) * (i % 7 + 1) + it) for i in range(COUNT)]


def expected(n, it):
    return [float(n * (n + 1) // 2 * (i % 7 + 1) + n * it) for i in range(COUNT)]


def all_reduce(comm, values):
    send = (ctypes.c_float * COUNT)(*values)
    recv = (ctypes.c_float * COUNT)()
    comm.all_reduce(ctypes.addressof(send), ctypes.addressof(recv), COUNT, _comm.FLOAT32,
                    _comm.SUM)
    return list(recv)


def broadcast_int(comm, value):
    buf = ctypes.c_int32(value)
    comm.broadcast(ctypes.addressof(buf), ctypes.addressof(buf), 1, _comm.INT32, 0)
    return buf.value


def run_rank(orig_rank, nranks, iters, uid, joining, ctl_in, ctl_out):
    if joining:
        comm = ringcc.Comm.join(uid, nranks, orig_rank)
        it = broadcast_int(comm, 0)
        print(f"elastic.py: replacement joined as rank {comm.rank} of {comm.nranks} at "
              f"iteration {it}", flush=True)
    else:
        comm, it = ringcc.Comm(uid, nranks, orig_rank), 0
    shrunk_at, grown = -1, joining
    while it < iters:
        if not joining and orig_rank == VICTIM and it == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            out = all_reduce(comm, input_of(comm.rank, it))
        except ringcc.NcclError as e:
            print(f"elastic.py: rank {comm.rank}: iteration {it} failed: {e}", flush=True)
            if shrunk_at >= 0:
                return 1
            ready, _, _ = select.select([ctl_in], [], [], 60)
            if not ready:
                return 1
            (dead,) = struct.unpack("i", os.read(ctl_in, 4))
            small = comm.shrink([dead])
            comm.abort()
            comm, shrunk_at = small, it
            print(f"elastic.py: rank {comm.rank}: shrunk to {comm.nranks} ranks", flush=True)
            continue
        if out != expected(comm.nranks, it):
            print(f"elastic.py: rank {comm.rank}: iteration {it}: wrong values", flush=True)
            return 1
        it += 1
        if shrunk_at >= 0 and not grown and it == shrunk_at + GROW_AFTER:
            grow_id = None
            if comm.rank == 0:
                grow_id = comm.grow_unique_id()
                os.write(ctl_out, struct.pack("ii", comm.nranks, nranks) + grow_id)
            big = comm.grow(nranks, grow_id)
            comm.destroy()
            comm, grown = big, True
            broadcast_int(comm, it)
            if comm.rank == 0:
                print(f"elastic.py: grew back to {comm.nranks} ranks at iteration {it}",
                      flush=True)
    final = comm.nranks
    comm.destroy()
    return 0 if final == nranks and (joining or shrunk_at >= 0) else 1


def spawn(orig_rank, nranks, iters, uid, joining, up_write):
    down_read, down_write = os.pipe()
    args = [sys.executable, os.path.abspath(__file__), "--join" if joining else "--rank",
            str(orig_rank), str(nranks), str(iters), uid.hex(), str(down_read), str(up_write)]
    proc = subprocess.Popen(args, pass_fds=(down_read, up_write))
    os.close(down_read)
    return {"proc": proc, "rank": orig_rank, "ctl": down_write, "status": None}


def left_segments(pids):
    prefixes = tuple(f"ringcc-{pid}-" for pid in pids)
    return [name for name in os.listdir("/dev/shm") if name.startswith(prefixes)]


def launch(nranks, iters):
    uid = ringcc.Communicator.new_unique_id()
    up_read, up_write = os.pipe()
    procs = [spawn(r, nranks, iters, uid, False, up_write) for r in range(nranks)]
    deadline = time.monotonic() + LIMIT_S
    msg_bytes = 8 + 128
    while any(p["status"] is None for p in procs) and time.monotonic() < deadline:
        ready, _, _ = select.select([up_read], [], [], 0.02)
        if ready:
            msg = os.read(up_read, msg_bytes)
            new_rank, size = struct.unpack("ii", msg[:8])
            procs.append(spawn(new_rank, size, iters, msg[8:], True, up_write))
            print(f"elastic.py: launcher started a replacement as rank {new_rank}", flush=True)
        for p in procs:
            if p["status"] is None and p["proc"].poll() is not None:
                p["status"] = p["proc"].returncode
                if p["status"] < 0:
                    print(f"elastic.py: launcher: rank {p['rank']} died of signal "
                          f"{-p['status']}", flush=True)
                    for q in procs:
                        if q["status"] is None:
                            os.write(q["ctl"], struct.pack("i", p["rank"]))
    problems = []
    for i, p in enumerate(procs):
        if p["status"] is None:
            p["proc"].kill()
            p["proc"].wait()
            problems.append(f"pid {p['proc'].pid} still running after {LIMIT_S} s")
        elif i == VICTIM and p["status"] != -signal.SIGKILL:
            problems.append(f"the victim ended with {p['status']}, not SIGKILL")
        elif i != VICTIM and p["status"] != 0:
            problems.append(f"rank {p['rank']} (pid {p['proc'].pid}) exited {p['status']}")
    if len(procs) != nranks + 1:
        problems.append(f"{len(procs) - nranks} replacements started, expected 1")
    left = left_segments([p["proc"].pid for p in procs])
    if left:
        problems.append(f"left in /dev/shm: {left}")
    if problems:
        print("elastic.py: FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"elastic.py: {nranks} ranks, rank {VICTIM} killed at iteration {KILL_AT}, shrunk "
          f"to {nranks - 1}, grew back to {nranks}; {iters} iterations exact; /dev/shm clean: OK")
    return 0


def main(argv):
    if len(argv) == 8 and argv[1] in ("--rank", "--join"):
        rank, nranks, iters = int(argv[2]), int(argv[3]), int(argv[4])
        return run_rank(rank, nranks, iters, bytes.fromhex(argv[5]), argv[1] == "--join",
                        int(argv[6]), int(argv[7]))
    nranks = int(argv[1]) if len(argv) > 1 else 4
    iters = int(argv[2]) if len(argv) > 2 else 10
    if nranks < 3 or iters <= KILL_AT + GROW_AFTER:
        print(f"usage: elastic.py [nranks >= 3 [iterations > {KILL_AT + GROW_AFTER}]]",
              file=sys.stderr)
        return 2
    return launch(nranks, iters)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
