"""Finds and loads ringcc's libnccl.so.2 with ctypes, and declares the NCCL calls we use.

The library is loaded BY PATH, never by name: NVIDIA's NCCL is also called libnccl.so.2 and
is often first in the loader's path, and it cannot run collectives on host memory. After
loading, the library must export ringccGetVersion (NVIDIA's does not; both give 23203 from
ncclGetVersion, the NCCL API level) and it must say RINGCC_VERSION_CODE, or the import fails.
"""

import ctypes
import os

RINGCC_VERSION_CODE = 23203
UNIQUE_ID_BYTES = 128
_SONAME = "libnccl.so.2"


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def _install_libdir():
    """The installed libdir, from _install_paths.py (written by meson install; None in a
    source checkout), taken relative to where this package really is."""
    try:
        from . import _install_paths
    except ImportError:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(
        here, os.path.relpath(_install_paths.LIBDIR, _install_paths.PACKAGE_DIR)))


def candidate_paths():
    """Where we look for libnccl.so.2, in order, as (origin, path) pairs.

    RINGCC_LIB (a file, or a folder holding libnccl.so.2) wins and is the only candidate when
    set, so a wrong value fails loudly instead of falling back to another copy.
    """
    env = os.environ.get("RINGCC_LIB")
    if env:
        path = os.path.join(env, _SONAME) if os.path.isdir(env) else env
        return [("RINGCC_LIB", path)]
    found = []
    # A source checkout: python/ringcc/ next to the default build folder build/.
    here = os.path.dirname(os.path.abspath(__file__))
    found.append(("build tree", os.path.join(here, "..", "..", "build", _SONAME)))
    libdir = _install_libdir()
    if libdir:
        found.append(("install prefix", os.path.join(libdir, _SONAME)))
    return found


def _declare(lib):
    c_int, c_size_t, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    comm_t = c_void_p
    sigs = {
        "ncclGetVersion": [ctypes.POINTER(c_int)],
        "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
        "ncclCommInitRank": [ctypes.POINTER(comm_t), c_int, UniqueId, c_int],
        "ncclCommDestroy": [comm_t],
        "ncclCommCount": [comm_t, ctypes.POINTER(c_int)],
        "ncclCommUserRank": [comm_t, ctypes.POINTER(c_int)],
        "ncclCommShrink": [comm_t, ctypes.POINTER(c_int), c_int, ctypes.POINTER(comm_t),
                           c_void_p, c_int],
        "ncclCommGetUniqueId": [comm_t, ctypes.POINTER(UniqueId)],
        "ncclCommGrow": [comm_t, c_int, ctypes.POINTER(UniqueId), c_int, ctypes.POINTER(comm_t),
                         c_void_p],
        "ncclCommAbort": [comm_t],
        "ncclCommGetAsyncError": [comm_t, ctypes.POINTER(c_int)],
        "ncclRedOpCreatePreMulSum": [ctypes.POINTER(c_int), c_void_p, c_int, c_int, comm_t],
        "ncclRedOpDestroy": [c_int, comm_t],
        "ncclAllReduce": [c_void_p, c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclBroadcast": [c_void_p, c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclReduce": [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, comm_t, c_void_p],
        "ncclAllGather": [c_void_p, c_void_p, c_size_t, c_int, comm_t, c_void_p],
        "ncclReduceScatter": [c_void_p, c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclAlltoAll": [c_void_p, c_void_p, c_size_t, c_int, comm_t, c_void_p],
        "ncclGather": [c_void_p, c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclScatter": [c_void_p, c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclSend": [c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ncclRecv": [c_void_p, c_size_t, c_int, c_int, comm_t, c_void_p],
        "ringccAllReduceAdasum": [c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_int, comm_t,
                                  c_void_p],
        "ncclGroupStart": [],
        "ncclGroupEnd": [],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c_int
    lib.ncclGetErrorString.argtypes = [c_int]
    lib.ncclGetErrorString.restype = c_char_p
    lib.ncclGetLastError.argtypes = [comm_t]
    lib.ncclGetLastError.restype = c_char_p


def load():
    """Loads the first candidate that exists; returns (CDLL, path). Raises ImportError."""
    tried = []
    for origin, path in candidate_paths():
        path = os.path.realpath(path)
        if not os.path.exists(path):
            tried.append(f"{origin}: {path} (missing)")
            continue
        try:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            nccl_get_version = lib.ncclGetVersion
        except (OSError, AttributeError) as e:
            raise ImportError(f"ringcc: cannot load {path} ({origin}) as libnccl.so.2: {e}")
        try:
            get_version = lib.ringccGetVersion
        except AttributeError:
            nccl_version = ctypes.c_int(0)
            nccl_get_version(ctypes.byref(nccl_version))
            raise ImportError(
                f"ringcc: {path} ({origin}) is not ringcc's libnccl.so.2: it has no "
                f"ringccGetVersion (another NCCL; its ncclGetVersion gives {nccl_version.value})")
        version = ctypes.c_int(0)
        get_version(ctypes.byref(version))
        if version.value != RINGCC_VERSION_CODE:
            raise ImportError(
                f"ringcc: {path} ({origin}) is ringcc {version.value}, this package is "
                f"{RINGCC_VERSION_CODE}")
        _declare(lib)
        return lib, path
    raise ImportError("ringcc: libnccl.so.2 not found; set RINGCC_LIB to its path. Tried: "
                      + "; ".join(tried))
