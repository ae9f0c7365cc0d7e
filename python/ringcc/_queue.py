"""The operation queue of one process group, and its progress thread.

Collectives run one at a time, in the order they were queued. Sends and receives are held
back and run together, as one ncclGroupStart/End batch: a pair of ranks that both send before
they receive (dist.batch_isend_irecv does exactly that) would otherwise each wait for the
other's receive. A batch is released (flushed) into the queue when the caller waits on one of
its Works (or asks for its future, or whether it is done), when any other operation is queued
behind it, or when no send or receive has joined it for P2P_IDLE_S (so a send nobody waits
for still goes out).

Completing an operation's future runs its callbacks (fut.then(...)) on the progress thread. A
DDP communication hook may issue collectives there and block on them: PowerSGD's callback
all-reduces P and waits for that future, then the next callback does the same with Q. Queued
behind, they would wait for the very thread that waits for them (PowerSGD hung so); run by
another thread, they would race with the caller's next bucket and be issued in a different
order on different ranks (tried: the ranks' calls did not match). So an operation issued on
the progress thread runs there at once, before anything queued: every rank runs it right
after the operation whose callback issued it, and its future is done when the call returns.
This is NCCL's order too: ProcessGroupNCCL completes a future when it has enqueued the
kernel, so its callbacks, and what they issue, run in the caller's order. (Sends and
receives issued there run at once too, each its own group.)

The thread holds the queue and the communicator, never the process group, so the group can be
collected; then stop() lets the thread destroy the communicator and waits for it.
"""

import collections
import queue
import threading
import time

from . import _comm as C

P2P_IDLE_S = 0.1
_KEEP = 16  # see Job.work
_STOP = object()
_TICK = object()


class Job:
    """One operation: run() does the work (for sends and receives: issues the NCCL call,
    inside the batch's group), finish() (optional) runs after it succeeded; then `future`
    gets `result`. `work` is the Work handed out, kept alive here (see _torch_work.RingccWork)."""

    __slots__ = ("name", "run", "finish", "future", "result", "work")

    def __init__(self, name, run, future, result, work, finish=None):
        self.name, self.run, self.finish = name, run, finish
        self.future, self.result, self.work = future, result, work


def _failure(name, e):
    """The exception a failed job's Work raises: it names the torch operation and the cause."""
    if isinstance(e, C.NcclError):
        return C.NcclError(e.call, e.code, e.detail, collective=name)
    return RuntimeError(f"ringcc {name} failed: {type(e).__name__}: {e}")


class OpQueue:
    def __init__(self, comm, thread_name):
        self._comm = comm
        self._jobs = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._batch = []          # sends and receives not yet released
        self._batch_number = 0    # which batch is open (counts flushes)
        self._last_added = 0.0
        # Done Works nobody has claimed yet (see _torch_work.RingccWork): kept alive, a few only,
        # since each holds its operation's tensors. Operations finish in queue order, so 16
        # later ones would have to finish before a C++ caller's next statement.
        self._keep = collections.deque(maxlen=_KEEP)
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
        self._thread.start()

    # --- caller side -----------------------------------------------------------------

    def _on_progress_thread(self, job):
        return isinstance(job, Job) and threading.current_thread() is self._thread

    def put(self, job):
        if self._on_progress_thread(job):
            self._run_one(job)  # issued by a callback (module doc)
            return
        with self._lock:
            self._flush_locked()  # earlier sends and receives go first
            self._jobs.put(job)

    def add_p2p(self, job):
        if self._on_progress_thread(job):
            self._run_group([job])
            return
        with self._lock:
            self._batch.append(job)
            self._last_added = time.monotonic()
            if len(self._batch) == 1:
                self._jobs.put((_TICK, self._batch_number))  # wakes the thread's idle timer

    def flush(self):
        with self._lock:
            self._flush_locked()

    def _flush_locked(self):
        if self._batch:
            self._jobs.put(self._batch)  # a list: one group
            self._batch = []
            self._batch_number += 1
            self._cond.notify_all()

    def stop(self, timeout_s=30):
        """Queues the end; the thread destroys the communicator after the queued work. Waits
        for it: a process that exits while ncclCommDestroy runs on another thread can abort."""
        self.put(_STOP)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    # --- the progress thread ---------------------------------------------------------

    def _loop(self):
        while True:
            item = self._jobs.get()
            if item is _STOP:
                self._comm.destroy()
                return
            if isinstance(item, tuple):
                self._release_when_idle(item[1])
            elif isinstance(item, list):
                self._run_group(item)
            else:
                self._run_one(item)
            del item  # an idle thread must not hold the last job (its closure holds tensors)

    def _release_when_idle(self, batch_number):
        with self._lock:
            while self._batch_number == batch_number:
                idle = time.monotonic() - self._last_added
                if idle >= P2P_IDLE_S:
                    self._flush_locked()
                    break
                self._cond.wait(P2P_IDLE_S - idle)

    def _done(self, job, error=None):
        if error is None:
            job.future.set_result(job.result)
        else:
            job.future.set_exception(error)
        if not job.work.claimed:
            self._keep.append(job.work)

    def _run_one(self, job):
        try:
            job.run()
            if job.finish:
                job.finish()
        except Exception as e:  # every failure goes to the Work, never kills the thread
            self._done(job, _failure(job.name, e))
        else:
            self._done(job)

    def _run_group(self, jobs):
        try:
            with self._comm.group():
                for job in jobs:
                    job.run()
            for job in jobs:
                if job.finish:
                    job.finish()
        except Exception as e:
            names = "+".join(sorted({job.name for job in jobs}))
            for job in jobs:
                self._done(job, _failure(names, e))
        else:
            for job in jobs:
                self._done(job)
