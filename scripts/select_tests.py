#!/usr/bin/env python3
"""The tests of a configured Meson build whose names match a regular expression, and what
building them takes, so that a sanitizer build compiles only what its tests run.

Usage: scripts/select_tests.py BUILD REGEX names     test names, one per line ("suite [tag]")
       scripts/select_tests.py BUILD REGEX targets   the files ninja must build for them
Reads `meson introspect` (no build needed); exits 1 if nothing matches.
"""
import json
import os
import re
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", build, what], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("names", "targets"):
        print(__doc__, file=sys.stderr)
        return 2
    build, pattern, mode = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
    tests = [t for t in introspect(build, "--tests") if pattern.search(t["name"])]
    if not tests:
        print(f"select_tests: no test of {build} matches {sys.argv[2]}", file=sys.stderr)
        return 1
    if mode == "names":
        for t in tests:
            print(t["name"])
        return 0
    files = {}
    for target in introspect(build, "--targets"):
        files[target["id"]] = target["filename"]
    wanted = set()
    for t in tests:
        for dep in t.get("depends", []):
            for f in files.get(dep, []):
                wanted.add(os.path.relpath(f, os.path.abspath(build)))
    for f in sorted(wanted):
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
