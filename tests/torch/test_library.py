"""The Python package loads ringcc's libnccl.so.2 on purpose, by path, and refuses any other:
NVIDIA's NCCL is also libnccl.so.2 and may be first in the loader's path.

Checks: the library given in RINGCC_LIB is the one loaded (ncclGetVersion 23203, and it is the
only libnccl in /proc/self/maps that torch did not map itself: a CUDA build of torch loads
NVIDIA's at import); a folder in RINGCC_LIB works; a missing file, a file that is
not libnccl and a libnccl that is not ringcc (tests/preload/fake_nccl.c says 22800) raise
ImportError naming the path; with RINGCC_LIB unset a source checkout finds the build tree;
with NVIDIA's libnccl.so.2 already loaded in the process (where this machine has it), ringcc
still loads its own; `import ringcc.torch` refuses a torch version it cannot serve.
"""

import os
import subprocess
import sys

OURS = os.path.realpath(os.environ["RINGCC_LIB"])
FAKE = os.environ["RINGCC_FAKE_NCCL"]
BUILD_ROOT = os.path.realpath(os.environ["RINGCC_BUILD_ROOT"])
SOURCE_ROOT = os.path.realpath(os.environ["RINGCC_SOURCE_ROOT"])
PROBE = ("import ringcc, torch.distributed as dist, ringcc.torch; "
         "assert dist.Backend('ringcc') == 'ringcc'; "
         "print(ringcc.version(), ringcc.library_path())")


def child(code, **env):
    """Runs code in a fresh python (this one's) with env changes (None unsets)."""
    full = dict(os.environ)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=60)


def expect_loads(what, path, **env):
    r = child(PROBE, **env)
    assert r.returncode == 0, f"{what}: import failed: {r.stderr}"
    assert r.stdout.split() == ["23203", path], f"{what}: loaded {r.stdout!r}, want {path}"
    print(f"ok {what}: 23203 {path}")


def expect_refused(what, words, **env):
    r = child(PROBE, **env)
    assert r.returncode != 0, f"{what}: import succeeded: {r.stdout}"
    assert "ImportError" in r.stderr, f"{what}: not an ImportError: {r.stderr}"
    missing = [w for w in words if w not in r.stderr]
    assert not missing, f"{what}: message lacks {missing}: {r.stderr}"
    print(f"ok {what}: refused")


def nccl_maps():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if "libnccl" in line}


def mapped(name):
    """The path of a library this process has mapped (a real .so that is not libnccl)."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if name in line})
    assert paths, f"{name} is not mapped"
    return paths[0]


def main():
    import torch  # noqa: F401  a CUDA build of torch (the 2.x wheel) maps NVIDIA's NCCL itself
    torch_own = nccl_maps()
    assert OURS not in torch_own, f"{OURS} mapped before ringcc was imported"
    import ringcc
    import ringcc.torch  # noqa: F401
    assert ringcc.version() == 23203, f"ncclGetVersion {ringcc.version()}, ringcc's is 23203"
    assert ringcc.library_path() == OURS, f"loaded {ringcc.library_path()}, want {OURS}"
    assert nccl_maps() == torch_own | {OURS}, (
        f"libnccl mappings {nccl_maps()}, want {OURS} besides torch's own {torch_own}")
    others = f" (besides torch's own {sorted(torch_own)})" if torch_own else ""
    print(f"ok in process: 23203 {OURS}, the only libnccl ringcc mapped{others}")

    expect_loads("RINGCC_LIB as a folder", OURS, RINGCC_LIB=os.path.dirname(OURS))
    expect_refused("fake NCCL", ["is not ringcc's", "22800", FAKE], RINGCC_LIB=FAKE)
    expect_refused("missing file", ["RINGCC_LIB", "/nonexistent/libnccl.so.2", "missing"],
                   RINGCC_LIB="/nonexistent/libnccl.so.2")
    expect_refused("not a libnccl", ["cannot load", "ncclGetVersion", mapped("libm.so")],
                   RINGCC_LIB=mapped("libm.so"))
    # A source checkout without RINGCC_LIB finds build/ next to python/.
    default_build = os.path.join(SOURCE_ROOT, "build")
    if BUILD_ROOT == default_build:
        expect_loads("build tree", OURS, RINGCC_LIB=None)
    else:
        expect_refused("build tree elsewhere", [default_build], RINGCC_LIB=None)

    # A torch the backend cannot serve fails at import, naming its version.
    for fake in ("1.12.1", "3.0.0"):
        r = child(f"import torch; torch.__version__ = {fake!r}; import ringcc.torch")
        assert r.returncode != 0 and "ImportError" in r.stderr and fake in r.stderr, (
            f"torch {fake}: {r.returncode} {r.stderr}")
    print("ok an unsupported torch version (1.12.1, 3.0.0) is refused at import, by version")

    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch 1.13 runs as usual; torch 2.x's wrapper cannot
    # serve a Python backend, so the group is refused when made, with a message saying so.
    r = child("import torch, torch.distributed as dist, ringcc.torch\n"
              "try:\n"
              "    dist.init_process_group('ringcc', store=dist.HashStore(), rank=0, "
              "world_size=1)\n"
              "except RuntimeError as e:\n"
              "    print('refused', e)\n"
              "else:\n"
              "    t = torch.ones(2); dist.all_reduce(t); print('ran', t.tolist())\n",
              TORCH_DISTRIBUTED_DEBUG="DETAIL")
    want = "refused" if not torch.__version__.startswith("1.") else "ran [1.0, 1.0]"
    assert r.returncode == 0 and r.stdout.startswith(want), f"DETAIL: {r.stdout} {r.stderr}"
    if want == "refused":
        assert "TORCH_DISTRIBUTED_DEBUG" in r.stdout, f"DETAIL message: {r.stdout}"
    print(f"ok TORCH_DISTRIBUTED_DEBUG=DETAIL: {r.stdout.strip()}")

    if torch_own:
        # A CUDA torch (the 2.x wheel) mapped NVIDIA's NCCL before ringcc: the asserts above
        # were that check. (Loading the system's older NCCL globally first, as below, would
        # break that torch's own import: its libtorch_cuda needs newer NCCL symbols.)
        print(f"ok NVIDIA's NCCL ({sorted(torch_own)}) mapped by torch first, ringcc still "
              "loads its own")
        return
    # NVIDIA's libnccl.so.2 loaded first, by name, as a CUDA torch would.
    r = child("import ctypes; l = ctypes.CDLL('libnccl.so.2'); v = ctypes.c_int(); "
              "l.ncclGetVersion(ctypes.byref(v)); print(v.value)", RINGCC_LIB=None,
              LD_LIBRARY_PATH=None)
    version = r.stdout.strip()
    if r.returncode == 0 and version != "23203":
        r = child("import ctypes; ctypes.CDLL('libnccl.so.2', mode=ctypes.RTLD_GLOBAL); "
                  + PROBE, LD_LIBRARY_PATH=None)
        assert r.returncode == 0 and r.stdout.split() == ["23203", OURS], (
            f"with NVIDIA's NCCL loaded first: {r.stdout} {r.stderr}")
        print(f"ok NVIDIA's NCCL ({version}) loaded first, ringcc still loads its own")
    else:
        print("note: no other libnccl.so.2 in the loader's path here; that check did not run")


if __name__ == "__main__":
    main()
