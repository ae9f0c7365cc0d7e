"""A ringcc communicator over ctypes: plain pointers and counts, no torch.

ringcc's calls on host communicators are synchronous (they return when the result is in the
output buffer) and ctypes drops the GIL around each call, so a Python thread blocked in one
does not stop the interpreter.
"""

import contextlib
import ctypes
import threading

from . import _lib

_loaded = None
_load_lock = threading.Lock()

# ncclDataType_t and ncclRedOp_t values (include/nccl.h).
INT8, UINT8, INT32, UINT32, INT64, UINT64 = 0, 1, 2, 3, 4, 5
FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = 6, 7, 8, 9
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4
_SCALAR_HOST_IMMEDIATE = 1
SHRINK_DEFAULT, SHRINK_ABORT = 0, 1  # NCCL_SHRINK_* (include/nccl.h)


def library():
    """The loaded ctypes.CDLL (loaded on first use)."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _lib.load()
        return _loaded[0]


def library_path():
    """The real path of the libnccl.so.2 that got loaded."""
    library()
    return _loaded[1]


def version():
    """ncclGetVersion of the loaded library: the NCCL API level (23203 for 2.32.3)."""
    v = ctypes.c_int(0)
    library().ncclGetVersion(ctypes.byref(v))
    return v.value


def _last_error(handle):
    """ringcc's text for the calling thread's last error (else the communicator's first)."""
    text = library().ncclGetLastError(handle)
    return text.decode(errors="replace") if text else None


class NcclError(RuntimeError):
    """A ringcc call failed; the message names the call and ringcc's reason."""

    def __init__(self, call, code, detail, collective=None):
        """collective: the operation the call served (torch's name), when it differs."""
        self.call, self.code, self.detail, self.collective = call, code, detail, collective
        name = library().ncclGetErrorString(code).decode(errors="replace")
        where = f"ringcc {collective}" if collective else "ringcc"
        text = f"{where}: {call} failed: {name} (ncclResult {code})"
        if detail:
            text += f": {detail}"
        super().__init__(text)


def _unique_id(unique_id):
    if len(unique_id) != _lib.UNIQUE_ID_BYTES:
        raise ValueError(f"ringcc: a unique id has {_lib.UNIQUE_ID_BYTES} bytes, "
                         f"got {len(unique_id)}")
    return _lib.UniqueId.from_buffer_copy(unique_id)


class Communicator:
    """One rank's ringcc communicator. Not thread-safe: drive it from one thread."""

    @staticmethod
    def new_unique_id():
        """A fresh 128-byte unique id (rank 0 makes it, the others get it as bytes)."""
        uid = _lib.UniqueId()
        rc = library().ncclGetUniqueId(ctypes.byref(uid))
        if rc:
            raise NcclError("ncclGetUniqueId", rc, _last_error(None))
        # string_at, not bytes(uid.internal): the c_char array stops at the first zero byte.
        return ctypes.string_at(ctypes.addressof(uid), _lib.UNIQUE_ID_BYTES)

    def __init__(self, unique_id, nranks, rank):
        uid = _unique_id(unique_id)
        if not 0 <= rank < nranks:
            raise ValueError(f"ringcc: rank {rank} is outside 0..{nranks - 1}")
        self.lib = library()
        self.nranks, self.rank = nranks, rank
        comm = ctypes.c_void_p()
        self._check("ncclCommInitRank", self.lib.ncclCommInitRank(
            ctypes.byref(comm), nranks, uid, rank), with_comm=False)
        self.handle = comm

    @classmethod
    def _adopt(cls, handle):
        """A Communicator for a handle ringcc made (shrink, grow)."""
        self = cls.__new__(cls)
        self.lib, self.handle = library(), handle
        count, rank = ctypes.c_int(0), ctypes.c_int(-1)
        self._check("ncclCommCount", self.lib.ncclCommCount(handle, ctypes.byref(count)))
        self._check("ncclCommUserRank", self.lib.ncclCommUserRank(handle, ctypes.byref(rank)))
        self.nranks, self.rank = count.value, rank.value
        return self

    # Elastic jobs: shrink out dead ranks, grow back with new processes (docs/elastic.md).
    def shrink(self, exclude, abort=True):
        """ncclCommShrink: a new Communicator without the ranks in `exclude` (which do not
        call it; they may be dead), the others renumbered in order. abort=True
        (NCCL_SHRINK_ABORT) first ends what this communicator still runs: the usual case after
        a failure. This communicator stays; destroy or abort it."""
        exclude = list(exclude)
        ranks = (ctypes.c_int * max(1, len(exclude)))(*exclude)
        out = ctypes.c_void_p()
        self._check("ncclCommShrink", self.lib.ncclCommShrink(
            self.handle, ranks, len(exclude), ctypes.byref(out), None,
            SHRINK_ABORT if abort else SHRINK_DEFAULT))
        return Communicator._adopt(out)

    def grow_unique_id(self):
        """ncclCommGetUniqueId: the single-use id (bytes) a grow of this communicator needs.
        One rank (the coordinator) makes it, hands it to the new processes out of band, and
        passes it to grow(); the other existing ranks pass none."""
        uid = _lib.UniqueId()
        self._check("ncclCommGetUniqueId", self.lib.ncclCommGetUniqueId(
            self.handle, ctypes.byref(uid)))
        return ctypes.string_at(ctypes.addressof(uid), _lib.UNIQUE_ID_BYTES)

    def grow(self, nranks, unique_id=None):
        """ncclCommGrow on an existing rank (every one calls it): a new Communicator of
        nranks ranks in which this rank keeps its rank. unique_id: the coordinator's
        grow_unique_id(), None on the other existing ranks."""
        uid = None if unique_id is None else ctypes.byref(_unique_id(unique_id))
        out = ctypes.c_void_p()
        self._check("ncclCommGrow", self.lib.ncclCommGrow(
            self.handle, nranks, uid, -1, ctypes.byref(out), None))
        return Communicator._adopt(out)

    @staticmethod
    def join(unique_id, nranks, rank):
        """ncclCommGrow on a new process: joins the grow of `unique_id` (the coordinator's
        grow_unique_id()) as `rank` (at least the old size) of nranks."""
        out = ctypes.c_void_p()
        rc = library().ncclCommGrow(None, nranks, ctypes.byref(_unique_id(unique_id)), rank,
                                    ctypes.byref(out), None)
        if rc:
            raise NcclError("ncclCommGrow", rc, _last_error(None))
        return Communicator._adopt(out)

    def _check(self, call, rc, with_comm=True):
        if rc:
            raise NcclError(call, rc, _last_error(self.handle if with_comm else None))

    def async_error(self):
        err = ctypes.c_int(0)
        self.lib.ncclCommGetAsyncError(self.handle, ctypes.byref(err))
        return err.value

    def destroy(self):
        if self.handle:
            self.lib.ncclCommDestroy(self.handle)
            self.handle = None

    def abort(self):
        if self.handle:
            self.lib.ncclCommAbort(self.handle)
            self.handle = None

    @contextlib.contextmanager
    def group(self):
        """ncclGroupStart/End: the calls inside run together when the block ends."""
        self._check("ncclGroupStart", self.lib.ncclGroupStart())
        ok = False
        try:
            yield
            ok = True
        finally:
            rc = self.lib.ncclGroupEnd()
            if ok:
                self._check("ncclGroupEnd", rc)

    def premul_sum_op(self, scalar_ptr, dtype):
        """A PreMulSum op whose factor is read from scalar_ptr (of dtype) right away."""
        op = ctypes.c_int(0)
        self._check("ncclRedOpCreatePreMulSum", self.lib.ncclRedOpCreatePreMulSum(
            ctypes.byref(op), scalar_ptr, dtype, _SCALAR_HOST_IMMEDIATE, self.handle))
        return op.value

    def destroy_op(self, op):
        self._check("ncclRedOpDestroy", self.lib.ncclRedOpDestroy(op, self.handle))

    # Collectives: pointers are host addresses (ints), counts are elements of dtype.
    def all_reduce(self, send, recv, count, dtype, op):
        self._check("ncclAllReduce", self.lib.ncclAllReduce(
            send, recv, count, dtype, op, self.handle, None))

    def all_reduce_adasum(self, send, recv, count, dtype, segments=None):
        """Adasum of every rank's vector (include/ringcc.h); segments: element counts."""
        segs = (ctypes.c_size_t * len(segments))(*segments) if segments else None
        self._check("ringccAllReduceAdasum", self.lib.ringccAllReduceAdasum(
            send, recv, count, dtype, segs, len(segments) if segments else 0, self.handle, None))

    def broadcast(self, send, recv, count, dtype, root):
        self._check("ncclBroadcast", self.lib.ncclBroadcast(
            send, recv, count, dtype, root, self.handle, None))

    def reduce(self, send, recv, count, dtype, op, root):
        self._check("ncclReduce", self.lib.ncclReduce(
            send, recv, count, dtype, op, root, self.handle, None))

    def all_gather(self, send, recv, send_count, dtype):
        self._check("ncclAllGather", self.lib.ncclAllGather(
            send, recv, send_count, dtype, self.handle, None))

    def reduce_scatter(self, send, recv, recv_count, dtype, op):
        self._check("ncclReduceScatter", self.lib.ncclReduceScatter(
            send, recv, recv_count, dtype, op, self.handle, None))

    def all_to_all(self, send, recv, count, dtype):
        self._check("ncclAlltoAll", self.lib.ncclAlltoAll(
            send, recv, count, dtype, self.handle, None))

    def gather(self, send, recv, count, dtype, root):
        self._check("ncclGather", self.lib.ncclGather(
            send, recv, count, dtype, root, self.handle, None))

    def scatter(self, send, recv, count, dtype, root):
        self._check("ncclScatter", self.lib.ncclScatter(
            send, recv, count, dtype, root, self.handle, None))

    def send(self, buf, count, dtype, peer):
        self._check("ncclSend", self.lib.ncclSend(buf, count, dtype, peer, self.handle, None))

    def recv(self, buf, count, dtype, peer):
        self._check("ncclRecv", self.lib.ncclRecv(buf, count, dtype, peer, self.handle, None))
