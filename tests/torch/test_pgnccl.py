"""PyTorch's own NCCL process group (ProcessGroupNCCL, CUDA tensors) can run on ringcc: with
ringcc's libnccl.so.2 under LD_PRELOAD, every NCCL call the CUDA torch wheel makes binds to
ringcc, none to the wheel's bundled NVIDIA NCCL. No GPU is needed for this; with none, no
collective runs here (tests/gpu/torch_nccl_preload.py does that on a GPU).

Why it matters: torch reaches NCCL only through the dynamic imports of libtorch_cuda.so (found
by scanning every shared object of torch and of the nvidia-* wheels). torch's import loads
libtorch_cuda with RTLD_NOW, so an import ringcc lacked would make `import torch` fail with
"undefined symbol" (as NVIDIA's NCCL 2.28 preloaded does, checked below where it is installed);
and torch's import also maps the wheel's NVIDIA copy by path even when ringcc is preloaded, so
"ringcc is mapped" proves little: the test asks which file each symbol comes from, and whether
torch's own NCCL call reaches ringcc.

Checks:
  static   every nccl*/pnccl* symbol the wheel's libraries import (nm -D --undefined-only) is
           exported by RINGCC_LIB (nm -D --defined-only); the same check run against a
           deliberately reduced export list names exactly the symbol taken out
  runtime  a child python with LD_PRELOAD=RINGCC_LIB: `import torch` works; each imported
           symbol, looked up in the process (dlsym RTLD_DEFAULT), is in ringcc's file (dladdr);
           ncclGetVersion there gives 23203 and ringccGetVersion is present; torch's own call
           torch.cuda.nccl.unique_id() (libtorch_cuda -> ncclGetUniqueId) returns an id in
           ringcc's format (src/bootstrap/unique_id.cc), which the same call without the
           preload (NVIDIA's) does not
  replaced the other route, ringcc's file in place of the wheel's nvidia/nccl/lib/libnccl.so.2,
           simulated without touching the venv: a folder first on PYTHONPATH holding
           nvidia/nccl/lib/libnccl.so.2 -> RINGCC_LIB, which torch's import preloads by path
           (torch/__init__.py, _preload_cuda_deps; RTLD_LOCAL) instead of the wheel's. Then
           ringcc's is the only libnccl mapped, torch's unique_id() is ringcc's, and
           ctypes.CDLL("libnccl.so.2") (found by soname) has ringccGetVersion (ctypes.CDLL(None),
           the global scope, has not: torch loads it RTLD_LOCAL; printed, not asserted)
  version  torch.cuda.nccl.version() is the same with and without the preload: it is the NCCL
           header version torch was compiled with (a constant in libtorch_cuda), so it cannot
           tell ringcc from NVIDIA's; ringccGetVersion can
  2.28     where /usr/local/cuda/lib64/libnccl.so.2 lacks some of the imports, the static check
           names them and preloading it makes `import torch` fail on one of them
"""

import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

OURS = os.path.realpath(os.environ["RINGCC_LIB"])
SOURCE_ROOT = os.environ["RINGCC_SOURCE_ROOT"]
OLD_NCCL = "/usr/local/cuda/lib64/libnccl.so.2"
NM = os.environ.get("NM") or shutil.which("nm")
CHILD_TIMEOUT_S = 120
SYMBOL = re.compile(r"^p?nccl[A-Z]\w*$")

# Runs in the child: argv[1] is a JSON list of symbol names. Prints one JSON line.
PROBE = r"""
import ctypes, json, os, sys
import torch

class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

libc = ctypes.CDLL(None)
libc.dlsym.restype = ctypes.c_void_p
libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]

def provider(name):
    addr = libc.dlsym(None, name.encode())  # None: RTLD_DEFAULT, the process's global scope
    info = DlInfo()
    if not addr or not libc.dladdr(addr, ctypes.byref(info)):
        return addr, None
    return addr, os.path.realpath(info.fname.decode())

addr, _ = provider("ncclGetVersion")
version = ctypes.c_int(-1)
if addr:
    ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))(addr)(ctypes.byref(version))
with open("/proc/self/maps") as f:
    maps = sorted({l.split()[-1] for l in f if "libnccl" in l})
print(json.dumps({
    "torch": torch.__version__,
    "nccl_version": list(torch.cuda.nccl.version()),
    "ncclGetVersion": version.value,
    "ringccGetVersion": hasattr(libc, "ringccGetVersion"),
    "soname_ringccGetVersion": hasattr(ctypes.CDLL("libnccl.so.2"), "ringccGetVersion"),
    "providers": {s: provider(s)[1] for s in json.loads(sys.argv[1])},
    "unique_id_head": bytes(torch.cuda.nccl.unique_id()[:4]).hex(),
    "maps": maps,
}))
"""


def nm_symbols(path, kind):
    """The nccl*/pnccl* names nm lists for path; kind: 'undefined' or 'defined'."""
    r = subprocess.run([NM, "-D", f"--{kind}-only", path], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        return set()  # not an ELF shared object (a linker script, a stub, ...)
    names = {line.split()[-1].split("@")[0] for line in r.stdout.splitlines() if line.strip()}
    return {n for n in names if SYMBOL.match(n)}


def wheel_imports(site):
    """{library path: nccl symbols it imports}, for every .so of torch and the nvidia-* wheels
    except NVIDIA's NCCL itself."""
    found = {}
    for top in ("torch", "nvidia"):
        for root, dirs, files in os.walk(os.path.join(site, top)):
            if os.path.join(site, "nvidia", "nccl") in root:
                continue
            for name in files:
                path = os.path.join(root, name)
                if ".so" in name and not os.path.islink(path):
                    syms = nm_symbols(path, "undefined")
                    if syms:
                        found[os.path.relpath(path, site)] = syms
    return found


def missing(imports, exports):
    """Sorted 'symbol (library)' for each import that exports lacks."""
    return sorted(f"{s} ({lib})" for lib, syms in imports.items() for s in syms - exports)


def child(symbols, preload, pythonpath=None):
    env = dict(os.environ, NCCL_DEBUG="WARN")
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", PROBE, json.dumps(sorted(symbols))], env=env,
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)


def probe(symbols, preload, pythonpath=None):
    r = child(symbols, preload, pythonpath)
    assert r.returncode == 0, f"LD_PRELOAD={preload or ''}: the probe failed: {r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def ringcc_id_head():
    """The first 4 bytes of every ringcc unique id: kIdFormat, little-endian (as written)."""
    with open(os.path.join(SOURCE_ROOT, "src/bootstrap/unique_id.cc")) as f:
        m = re.search(r"kIdFormat\s*=\s*(0x[0-9a-fA-F]+)", f.read())
    assert m, "kIdFormat not found in src/bootstrap/unique_id.cc"
    return struct.pack("<I", int(m.group(1), 16)).hex()


def main():
    assert NM, "nm not found (binutils; scripts/setup.sh installs it)"
    site = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
    imports = wheel_imports(site)
    symbols = set().union(*imports.values()) if imports else set()
    counts = ", ".join(f"{lib}: {len(s)}" for lib, s in sorted(imports.items()))
    print(f"the wheel imports {len(symbols)} nccl symbols ({counts})")
    assert "ncclCommInitRankConfig" in imports.get("torch/lib/libtorch_cuda.so", set()), (
        f"libtorch_cuda.so does not import ncclCommInitRankConfig: the scan is broken ({counts})")

    # static
    exports = nm_symbols(OURS, "defined")
    assert "ncclGetVersion" in exports, f"nm -D lists no ncclGetVersion in {OURS}"
    gaps = missing(imports, exports)
    assert not gaps, f"{OURS} lacks {len(gaps)} symbols the torch wheel imports: {gaps}"
    print(f"ok static: all {len(symbols)} exported by {OURS} ({len(exports)} nccl exports)")
    dropped = sorted(symbols)[len(symbols) // 2]
    got = missing(imports, exports - {dropped})
    assert got == [f"{dropped} (torch/lib/libtorch_cuda.so)"], f"reduced list: {got}"
    print(f"ok the check fails: without {dropped} in the exports it names {got}")

    # runtime, ringcc preloaded; then the same probe without it (the wheel's NVIDIA NCCL)
    ours = probe(symbols, OURS)
    wrong = {s: p for s, p in ours["providers"].items() if p != OURS}
    assert not wrong, f"with ringcc preloaded these resolve elsewhere (file or None): {wrong}"
    assert ours["ncclGetVersion"] == 23203, f"ncclGetVersion {ours['ncclGetVersion']}"
    assert ours["ringccGetVersion"], "ringccGetVersion not found in the process"
    assert ours["soname_ringccGetVersion"], 'CDLL("libnccl.so.2") lacks ringccGetVersion'
    head = ringcc_id_head()
    assert ours["unique_id_head"] == head, (
        f"torch.cuda.nccl.unique_id() starts {ours['unique_id_head']}, ringcc's {head}")
    print(f"ok preloaded (torch {ours['torch']}): import torch, all {len(symbols)} symbols from "
          f"{OURS}, ncclGetVersion 23203, ringccGetVersion present, torch's unique_id() is "
          f"ringcc's ({head}); libnccl mapped: {ours['maps']}")
    theirs = probe(symbols, None)
    assert not theirs["ringccGetVersion"], "ringccGetVersion found without the preload"
    assert not theirs["soname_ringccGetVersion"], 'CDLL("libnccl.so.2") is ringcc without it'
    assert theirs["unique_id_head"] != head, "without the preload unique_id() is ringcc's too"
    where = sorted({str(p) for p in theirs["providers"].values()})
    assert OURS not in where, f"without the preload some symbols resolve to {OURS}"
    print(f"ok not preloaded: no ringccGetVersion, the symbols resolve to {where} in the global "
          f"scope, unique_id() starts {theirs['unique_id_head']} (NVIDIA's); libnccl mapped: "
          f"{theirs['maps']}")

    # replaced
    with tempfile.TemporaryDirectory() as fake_site:
        lib_dir = os.path.join(fake_site, "nvidia", "nccl", "lib")
        os.makedirs(lib_dir)
        os.symlink(OURS, os.path.join(lib_dir, "libnccl.so.2"))
        swap = probe(symbols, None, pythonpath=fake_site)
    assert swap["maps"] == [OURS], f"replaced: libnccl mapped {swap['maps']}, want [{OURS}]"
    assert swap["unique_id_head"] == head, f"replaced: unique_id() starts {swap['unique_id_head']}"
    assert swap["soname_ringccGetVersion"], 'replaced: CDLL("libnccl.so.2") lacks ringccGetVersion'
    print(f"ok replaced: only {OURS} mapped, torch's unique_id() is ringcc's, "
          f'CDLL("libnccl.so.2") has ringccGetVersion (CDLL(None) '
          f"{'has it too' if swap['ringccGetVersion'] else 'has not: torch loads it RTLD_LOCAL'})")

    # version
    assert ours["nccl_version"] == theirs["nccl_version"], (
        f"torch.cuda.nccl.version() is {ours['nccl_version']} preloaded, "
        f"{theirs['nccl_version']} not: it now reports the loaded library; update this test "
        f"and docs/pytorch.md")
    print(f"ok torch.cuda.nccl.version() is {tuple(ours['nccl_version'])} either way (the "
          f"headers torch was built with), not evidence of which library runs")

    # 2.28
    if not os.path.exists(OLD_NCCL):
        print(f"note: no {OLD_NCCL}; its check was not run")
        return
    old_gaps = missing(imports, nm_symbols(OLD_NCCL, "defined"))
    if not old_gaps:
        print(f"note: {OLD_NCCL} exports every import; its check was not run")
        return
    r = child(symbols, OLD_NCCL)
    names = [g.split()[0] for g in old_gaps]
    m = re.search(r"undefined symbol: (\w+)", r.stderr)
    assert r.returncode != 0 and m and m.group(1) in names, (
        f"{OLD_NCCL} preloaded: want `import torch` to fail on one of {names}, got rc "
        f"{r.returncode}: {r.stderr[-2000:]}")
    print(f"ok {OLD_NCCL} lacks {len(names)} imports {names}; preloaded, `import torch` fails: "
          f"undefined symbol: {m.group(1)}")


if __name__ == "__main__":
    main()
