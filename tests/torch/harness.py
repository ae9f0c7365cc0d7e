"""Runs a test function on N ranks, each a process started with torch.multiprocessing's
spawn, with init_method='env://' on a free port.

launch(fn, n, ...) calls fn(rank, n, *args) in every rank after init_process_group(backend)
and returns the exit codes; a rank that raises prints its traceback and exits 1. The whole
run is killed (and fails) after `timeout` seconds, so a hang is a failure, never a wait; under
run_all, once one rank has failed the others are killed soon after, not at the timeout.
"""

import faulthandler
import os
import socket
import sys
import time
import traceback

import multiprocessing.connection as mp_connection

import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn, rank, n, port, backend, env, args, timeout):
    # A rank still running shortly before the run is killed prints where each of its threads
    # is: a hang's report then says where it hung.
    faulthandler.dump_traceback_later(max(1, timeout - 5), exit=False)
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(n))
    try:
        import torch.distributed as dist
        import ringcc.torch  # noqa: F401  registers the backend
        if backend:
            dist.init_process_group(backend, init_method="env://")
        fn(rank, n, *args)
        sys.stdout.flush()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)  # skip interpreter teardown; the peers may already be gone


FAIL_FAST_GRACE_S = 10


def launch(fn, n, *args, backend="ringcc", env=None, timeout=180, fail_fast=False):
    """fail_fast: once a rank has failed, the others get FAIL_FAST_GRACE_S to finish, then
    are killed (they would wait for it until `timeout`); their exit codes are then -9."""
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, n, port, backend, env or {}, args, timeout))
             for r in range(n)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    cut_short = False  # a rank failed: the others' deadline moved up
    while True:
        alive = [p for p in procs if p.is_alive()]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            break
        if fail_fast and not cut_short and any(p.exitcode for p in procs):
            cut_short = True
            deadline = min(deadline, time.monotonic() + FAIL_FAST_GRACE_S)
        mp_connection.wait([p.sentinel for p in alive], timeout=min(left, 0.5))
    hung = [] if cut_short else [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    if hung:
        raise AssertionError(f"{fn.__name__}: ranks {hung} still running after {timeout} s")
    return [p.exitcode for p in procs]


def run_all(fn, n, *args, **kw):
    """launch, and fail unless every rank exited 0."""
    start = time.monotonic()
    codes = launch(fn, n, *args, fail_fast=True, **kw)
    if any(codes):
        raise AssertionError(f"{fn.__name__} on {n} ranks: exit codes {codes}")
    print(f"ok {fn.__name__} on {n} ranks ({time.monotonic() - start:.1f} s)", flush=True)


def nranks_from_argv():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.exit(f"usage: {sys.argv[0]} NRANKS")
    return int(sys.argv[1])


# torch 2.x calls a Python backend's single-tensor forms by their new names; the old ones are
# aliases (ringcc/_torch_moves.py), so a wrapper replaces both.
_ALIASES = {"all_gather_single": "_allgather_base", "reduce_scatter_single": "_reduce_scatter_base",
            "all_to_all_single": "alltoall_base"}


def count_backend_calls(names):
    """Wraps the ringcc backend's methods `names` so that each call counts; returns the
    counts (a dict, updated in place), for tests that must show torch used ringcc."""
    from ringcc.torch import ProcessGroupRingcc
    counts = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(ProcessGroupRingcc, name)

        def counted(self, *args, _original=original, _name=name, **kw):
            counts[_name] += 1
            return _original(self, *args, **kw)

        setattr(ProcessGroupRingcc, name, counted)
        if name in _ALIASES:
            setattr(ProcessGroupRingcc, _ALIASES[name], counted)
    return counts
