#!/usr/bin/env python3
"""scripts/check_layers.py passes on the tree, and fails, naming the include, on copies of the
tree with an include against the order (a kernel header reaching into the host engine, a
transport into the communicator) and with a source file outside every layer."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check_layers.py")
failures = []
passed = []


def check(root):
    r = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, cond, detail):
    print(("ok   " if cond else "FAIL ") + name)
    (passed if cond else failures).append(name)
    if not cond:
        print(detail)


def copy_tree(dst):
    for d in ("include", "src", "kernels", "transports"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(dst, d))


def append_include(root, path, target):
    with open(os.path.join(root, path), "a") as f:
        f.write(f'\n#include "{target}"\n')


rc, out = check(ROOT)
expect("the tree passes", rc == 0 and "every include points down" in out, out)

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    append_include(tmp, "kernels/reduce_copy.h", "src/exec/host_engine.h")
    rc, out = check(tmp)
    expect("a kernel including the host engine fails", rc == 1, out)
    expect("... naming the file and both layers",
           "kernels/reduce_copy.h" in out and "src/exec/host_engine.h" in out and
           "src/exec is above kernels" in out, out)

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    append_include(tmp, "transports/shm/shm_transport.cc", "src/core/comm.h")
    append_include(tmp, "src/base/log.cc", "src/bootstrap/bootstrap.h")
    rc, out = check(tmp)
    expect("a transport including the communicator fails", rc == 1 and
           "transports/shm/shm_transport.cc" in out and "src/core is above transports" in out, out)
    expect("base including the bootstrap fails, both reported",
           "src/bootstrap is above src/base" in out and "2 include(s)" in out, out)

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    os.makedirs(os.path.join(tmp, "src", "stray"))
    with open(os.path.join(tmp, "src", "stray", "stray.cc"), "w") as f:
        f.write('#include "src/base/log.h"\n')
    rc, out = check(tmp)
    expect("a folder in no layer fails", rc == 1 and "src/stray/stray.cc" in out and
           "in no layer" in out, out)

print(f"{len(passed)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
