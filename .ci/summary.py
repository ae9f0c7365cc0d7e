"""Prints 'N passed, N failed' from Meson's testlog.json (one JSON object per line).

Exit status: 0 when tests ran and none failed, 1 otherwise (including when no test ran).
"""
import json
import sys

passed = failed = skipped = 0
try:
    with open(sys.argv[1]) as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            result = json.loads(line)["result"]
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
except FileNotFoundError:
    print("no testlog.json: the build failed before any test ran")
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(0 if passed and not failed else 1)
