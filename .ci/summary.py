"""Prints 'N passed, N failed' from Meson's testlog.json files (one JSON object per line),
summed over every file given (the main suite, then the ASan+UBSan and TSan runs).

Before the closing line it names every failed test with the last lines of its output: CI
keeps only the tail of what a run prints, so a failure must be readable from there.

Exit status: 0 when tests ran and none failed, 1 otherwise (including when no test ran, or a
log is missing: its build failed before any test ran).
"""
import json
import sys

TAIL_LINES = 25

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
