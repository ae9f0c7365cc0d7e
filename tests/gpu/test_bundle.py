"""The device check's two halves, run here without a GPU (Meson tests gpu_bundle, gpu_run_no_gpu).

  test_bundle.py bundle SOURCE_ROOT     tests/gpu/bundle.sh into a temporary DIR: at most 64 MiB,
                                        exactly the expected files, no bundled ELF needs UCX or
                                        Catch2 (DT_NEEDED), every RUNPATH is $ORIGIN-relative
                                        and every perf tool's libnccl.so.2 resolves to DIR's
  test_bundle.py no-gpu SOURCE_ROOT     tests/gpu/run.sh --bundle DIR with no GPU visible
                                        (CUDA_VISIBLE_DEVICES empty hides one where there is
                                        one): exits 2 without hanging, says "no GPU", and leaves
                                        a summary naming every check
Exit 0 when every assertion holds; the first failed one is printed.
"""
import os
import subprocess
import sys
import tempfile

LIMIT = 64 * 1024 * 1024
PERF = ["all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf",
        "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf", "ringcc-run"]
GPU_TOOLS = ["gpu_coll", "gpu_kernel_launch", "gpu_reduce_copy_bw"]
SCRIPTS = ["tests/gpu/run.sh", "tests/gpu/torch_nccl_preload.py"]
FORBIDDEN = ("libucp", "libucs", "libuct", "libCatch2")


def fail(what):
    print(f"test_bundle: FAIL: {what}")
    sys.exit(1)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def dynamic(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    needed, runpath = [], []
    for line in out.stdout.splitlines():
        if "(NEEDED)" in line:
            needed.append(line.split("[")[1].rstrip("]"))
        if "(RUNPATH)" in line or "(RPATH)" in line:
            runpath += line.split("[")[1].rstrip("]").split(":")
    return needed, runpath


def bundle(root):
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "bundle")
        r = subprocess.run([os.path.join(root, "tests/gpu/bundle.sh"), d])
        if r.returncode != 0:
            fail(f"bundle.sh exited {r.returncode}")
        files = set()
        total = 0
        for dirpath, _, names in os.walk(d):
            for name in names:
                p = os.path.join(dirpath, name)
                files.add(os.path.relpath(p, d))
                if not os.path.islink(p):
                    total += os.path.getsize(p)
        if total > LIMIT:
            fail(f"the bundle is {total} bytes, over 64 MiB")
        want = ({"libnccl.so.2.32.3", "libnccl.so.2", "libnccl.so", "MANIFEST"} |
                {f"bench/{t}" for t in PERF} | {f"tests/gpu/{t}" for t in GPU_TOOLS} |
                set(SCRIPTS))
        needed_nccl, _ = dynamic(os.path.join(d, "libnccl.so.2.32.3"))
        if "libhwloc.so.15" in needed_nccl:
            want.add("libhwloc.so.15")
        if files != want:
            fail(f"files: unexpected {sorted(files - want)}, missing {sorted(want - files)}")
        for link, target in (("libnccl.so.2", "libnccl.so.2.32.3"), ("libnccl.so", "libnccl.so.2")):
            if os.readlink(os.path.join(d, link)) != target:
                fail(f"{link} does not point to {target}")
        elfs = [f for f in sorted(files) if not os.path.islink(os.path.join(d, f)) and
                is_elf(os.path.join(d, f))]
        if len(elfs) < 1 + len(PERF) + len(GPU_TOOLS):
            fail(f"only {len(elfs)} ELF files: {elfs}")
        for f in elfs:
            needed, runpath = dynamic(os.path.join(d, f))
            bad = [n for n in needed if n.startswith(FORBIDDEN)]
            if bad:
                fail(f"{f} needs {bad} at run time")
            if any(n.startswith(("libcuda.so", "libcudart.so")) for n in needed):
                fail(f"{f} links the CUDA driver or runtime dynamically: {needed}")
            absolute = [p for p in runpath if p and not p.startswith("$ORIGIN")]
            if absolute:
                fail(f"{f} has a RUNPATH outside the bundle: {absolute}")
        if "libnccl.so.2" in dynamic(os.path.join(d, "libnccl.so.2.32.3"))[0]:
            fail("libnccl needs itself")
        # The tools find the bundle's libnccl.so.2 by their own RUNPATH, with no help from
        # LD_LIBRARY_PATH (NVIDIA's is in this machine's loader cache).
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        ours = os.path.realpath(os.path.join(d, "libnccl.so.2"))
        for t in PERF:
            out = subprocess.run(["ldd", os.path.join(d, "bench", t)], capture_output=True,
                                 text=True, env=env).stdout
            lines = [l.split() for l in out.splitlines() if l.strip().startswith("libnccl.so.2")]
            if not lines or len(lines[0]) < 3 or os.path.realpath(lines[0][2]) != ours:
                fail(f"bench/{t} resolves libnccl.so.2 to {lines}, not the bundle's")
        # The kernels are in the bundle's library (stripping kept them).
        with open(os.path.join(d, "libnccl.so.2.32.3"), "rb") as f:
            lib = f.read()
        if b"ringccBatchKernel" not in lib:
            fail("the bundle's libnccl.so.2 has no embedded batch kernel")
        # nvcc ran once: the bundle embeds the test's own build's fatbin, byte for byte, when
        # that build has one (it does wherever this test exists: it is built with CUDA).
        source = os.environ.get("BUNDLE_FATBIN_FROM")
        if source:
            fatbin = os.path.join(source, "kernels", "batch_kernel.fatbin")
            with open(os.path.join(d, "MANIFEST")) as f:
                manifest = f.read()
            if f"fatbin: {os.path.realpath(fatbin)}" not in manifest:
                fail(f"the bundle did not take {fatbin} (nvcc ran again): MANIFEST says "
                     f"{[l for l in manifest.splitlines() if l.startswith('fatbin:')]}")
            with open(fatbin, "rb") as f:
                if f.read() not in lib:
                    fail(f"the bundle's libnccl.so.2 does not embed {fatbin}")
        if b"built without UCX" not in lib:  # transports/ucx/ucx_disabled.cc, not UCX's code
            fail("the bundle's libnccl.so.2 lacks the no-UCX transport")
        with open(os.path.join(d, "MANIFEST")) as f:
            manifest = f.read()
        for key in ("commit:", "options:", "-Ducx=disabled", "toolkit:", "needs: GLIBC_"):
            if key not in manifest:
                fail(f"MANIFEST lacks {key!r}")
        print(f"test_bundle: ok: {len(files)} files, {total} bytes, {len(elfs)} ELFs checked")


def no_gpu(root):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        env.pop("OUT", None)
        try:
            r = subprocess.run([os.path.join(root, "tests/gpu/run.sh"), "--bundle",
                                os.path.join(tmp, "no-bundle"), "--out", out],
                               capture_output=True, text=True, env=env, timeout=60)
        except subprocess.TimeoutExpired:
            fail("run.sh did not stop within 60 s without a GPU")
        text = r.stdout + r.stderr
        if r.returncode != 2:
            fail(f"run.sh exited {r.returncode}, not 2:\n{text}")
        if "no GPU" not in r.stderr:
            fail(f"run.sh did not say 'no GPU' on stderr:\n{text}")
        summary_path = os.path.join(out, "summary.txt")
        if not os.path.isfile(summary_path):
            fail("no summary.txt")
        with open(summary_path) as f:
            summary = f.read().splitlines()
        rows = {l.split()[0]: l for l in summary[1:] if l and not l.startswith(" ")}
        if "FAILED: no GPU" not in rows.get("gpu", ""):
            fail(f"summary's gpu line: {rows.get('gpu')}")
        for check in ("kernel-launch", "coll-8", "sanitize-memcheck", "perf-g2", "torch-nvidia"):
            if "not run (no GPU)" not in rows.get(check, ""):
                fail(f"summary's {check} line: {rows.get(check)}")
        print(f"test_bundle: ok: run.sh without a GPU: {r.stderr.strip()}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("bundle", "no-gpu"):
        fail("usage: test_bundle.py bundle|no-gpu SOURCE_ROOT")
    (bundle if sys.argv[1] == "bundle" else no_gpu)(sys.argv[2])
