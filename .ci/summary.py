"""Prints 'N passed, N failed' from Meson's testlog.json files (one JSON object per line),
summed over every file given (the main suite, then the ASan+UBSan and TSan runs).

Before the closing line it names every failed test with the last lines of its output, and
before them its key lines (each process's first WARN, every stall and hang-report verdict):
CI keeps only the tail of what a run prints, so a failure must be readable from there, and
with several ranks the tail often holds only the last ranks' echoes of the first one's error.

Exit status: 0 when tests ran and none failed, 1 otherwise (including when no test ran, or a
log is missing: its build failed before any test ran).
"""
import json
import sys

import re

TAIL_LINES = 25
KEY_LINES = 40
# "host:pid:tid [rank] ringcc WARN ...": the pid, to keep each process's first WARN.
WARN_PID = re.compile(r"^\S+?:(\d+):\d+ \[[-\d]+\] ringcc WARN ")
VERDICT = re.compile(r"no progress for|hang report: +rank|hang report: =>")


def key_lines(output):
    """Each process's first WARN and every stall or hang-report verdict, in order."""
    seen, keys = set(), []
    for line in output[:-TAIL_LINES]:
        m = WARN_PID.match(line)
        if (m and m.group(1) not in seen) or VERDICT.search(line):
            keys.append(line)
        if m:
            seen.add(m.group(1))
    return keys[:KEY_LINES]


passed = skipped = 0
failures = []
missing = []
for path in sys.argv[1:]:
    try:
        with open(path) as log:
            for line in log:
                line = line.strip()
                if not line:
                    continue
                test = json.loads(line)
                result = test["result"]
                if result in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failures.append((path, test))
    except FileNotFoundError:
        missing.append(path)
for path, test in failures:
    # Meson keeps stderr apart from stdout when the test wrote to both; WARN lines go to stderr.
    output = ((test.get("stdout") or "") + (test.get("stderr") or "")).rstrip().splitlines()
    keys = key_lines(output)
    if keys:
        print(f"=== {test['name']}: key lines before the tail (first WARN per process, verdicts):")
        for key in keys:
            print(f"    {key}")
    print(f"=== {test['result']}: {test['name']} ({path}, {test.get('duration', 0):.1f} s, "
          f"exit {test.get('returncode')}); last {min(TAIL_LINES, len(output))} lines:")
    for out_line in output[-TAIL_LINES:]:
        print(f"    {out_line}")
for path in missing:
    print(f"no {path}: its build failed before any test ran")
for path, test in failures:
    print(f"failed: {test['name']} ({path})")
print(f"{passed} passed, {len(failures)} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(0 if passed and not failures and not missing else 1)
