"""The Work objects the ringcc process group hands out, and where a receive from any source
leaves its sender for torch 2.x (source_of)."""

import threading
import weakref

from torch._C._distributed_c10d import Work

_sources = {}  # id(tensor) -> (weakref to it, sender): receives from any source, torch 2.x
_sources_lock = threading.Lock()


def note_source(tensor, src):
    """Records that `tensor` was filled by a receive from any source, from rank `src`."""
    key = id(tensor)

    def forget(_ref, key=key):
        with _sources_lock:
            if key in _sources and _sources[key][0]() is None:
                del _sources[key]

    with _sources_lock:
        _sources[key] = (weakref.ref(tensor, forget), src)


def source_of(tensor):
    """The sender note_source recorded for this very tensor, else None."""
    with _sources_lock:
        ref, src = _sources.get(id(tensor), (None, None))
    return src if ref is not None and ref() is tensor else None


class RingccWork(Work):
    """The Work of one queued operation.

    Why a Python subclass and not _create_work_from_future: that Work's wait() ignores a
    failed future, so dist.all_reduce(t) would return normally after ringcc failed. Here
    wait() raises the operation's exception (an NcclError naming the call and ringcc's
    reason), and get_future() gives a future that fails in C++ terms too, which is what DDP
    waits on (it calls get_future() right after allreduce() returns).

    A Python subclass lives on only while Python holds it: once only C++ does, calls from C++
    no longer reach these overrides (a C++ wait() would then wait forever on the base
    class). C++ callers (DDP, DDP's start-up broadcasts) call get_future() or wait() right
    after the call returns, so the queue keeps every Work alive until its operation is done,
    and after that the last few done ones on which neither was called yet (_queue.OpQueue).

    `flush` (sends and receives) releases the operation's batch: whoever waits for it, or asks
    about it, needs it to run (_queue's module doc).

    `source`: a receive's sender (group rank), what _source_rank() gives torch's recv; a
    receive from any source sets it when it has matched a sender (_torch_p2p).
    """

    def __init__(self, name, future, flush=None, source=None):
        super().__init__()
        self.source = source
        self.claimed = False  # get_future() or wait() was called: no need to keep it alive
        self._name = name
        self._flush = flush
        self._future = future
        # Completes with the same tensors, or fails as a C++ error (a Python exception set
        # on `future` is, for C++, just a value).
        self._chained = future.then(lambda f: f.value())

    def _release(self):
        if self._flush:
            self._flush()

    def wait(self, timeout=None):
        self.claimed = True
        self._release()
        self._future.wait()  # raises the operation's exception
        # `future` is marked done before its callbacks run, so the chained one may lag.
        self._chained.wait()
        return True

    def get_future(self):
        self.claimed = True
        self._release()
        return self._chained

    def is_completed(self):
        self._release()
        return self._chained.done()

    def is_success(self):
        if not self._chained.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def _source_rank(self):
        if self.source is None:
            raise RuntimeError(f"ringcc {self._name}: only a completed receive has a source rank")
        return self.source

    def result(self):
        return self._future.value()

    def synchronize(self):
        pass
