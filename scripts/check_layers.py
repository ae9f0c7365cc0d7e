#!/usr/bin/env python3
"""Fails on an #include that points up the layer order (docs/architecture.md, "Layers").

Every file under src/, kernels/ and transports/ belongs to the layer of its folder; it may
include files of its own layer and of the layers below it, the public headers (include/) and
anything outside the tree (system and generated headers). Lower layers that need a service of
a higher one declare an interface and are handed an implementation: the include still points
down.

Usage: scripts/check_layers.py [root]   (default: the repository this script is in)
Prints each offending include as "file:line: includes path (layer X above layer Y)" and exits
1 if there is any, else prints a one-line summary and exits 0.
"""
import os
import re
import sys

# Bottom first. A folder's files may include their own folder and any folder listed before it.
LAYERS = [
    "src/base",       # log, error, param, peer identity, PCI bus ids, the CUDA driver's entry points
    "kernels",        # device-clean: dtypes, RedOp, reduce-copy, Program, connector view, runner
    "transports",     # p2p, shm, ucx behind transport.h; the proxy thread that progresses them
    "src/bootstrap",  # TCP rendezvous: allgather, barrier, tagged setup messages
    "src/sched",      # Program builders, trees: pure
    "src/topo",       # topology model, detection, ring search
    "src/tune",       # cost model: algorithm, protocol, chunk, channels
    "src/plan",       # CollArgs and call signatures; batch -> jobs
    "src/trace",      # per-call records, call state, the hang report's format
    "src/core",       # the communicator: config, peers, topology, engine interface, errors
    "src/monitor",    # the hang watcher thread
    "src/exec",       # group layer, host engine, connections
    "src/cuda",       # CUDA engine: kernels on streams, memory kinds
    "src/rma",        # one-sided windows, puts and signals (host; CUDA through the engine)
    "src/init",       # making communicators (init, split, shrink) and their engines
    "src/adasum",     # Adasum over grouped send/recv
    "src/api",        # the C entry points
]
FREE = ("include/",)  # the public headers: any layer may include them

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".cc", ".cu", ".cuh")


def layer_of(path):
    """Index of the layer holding `path` (relative to the root), or None outside the layers."""
    best = None
    for i, prefix in enumerate(LAYERS):
        if path == prefix or path.startswith(prefix + "/"):
            if best is None or len(prefix) > len(LAYERS[best]):
                best = i
    return best


def resolve(root, including, name):
    """The repository path an include names, or None if it is not a file of the tree."""
    for candidate in (os.path.join(os.path.dirname(including), name), name,
                      os.path.join("include", name)):
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def violations(root):
    found = []
    checked = 0
    for top in ("src", "kernels", "transports"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                own = layer_of(path)
                if own is None:
                    found.append(f"{path}:1: is in no layer (add its folder to LAYERS)")
                    continue
                checked += 1
                with open(os.path.join(root, path), errors="replace") as text:
                    for lineno, line in enumerate(text, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        if target is None or target.startswith(FREE):
                            continue
                        theirs = layer_of(target)
                        if theirs is None:
                            found.append(f"{path}:{lineno}: includes {target}, which is in no layer")
                        elif theirs > own:
                            found.append(f"{path}:{lineno}: includes {target} "
                                         f"({LAYERS[theirs]} is above {LAYERS[own]})")
    return found, checked


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found, checked = violations(os.path.abspath(root))
    for v in found:
        print(v)
    if found:
        print(f"check_layers: {len(found)} include(s) against the layer order", file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files, {len(LAYERS)} layers, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
