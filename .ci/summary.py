"""Prints 'N passed, N failed' from Meson's testlog.json files (one JSON object per line),
summed over every file given (the main suite, then the ASan+UBSan and TSan runs).

Exit status: 0 when tests ran and none failed, 1 otherwise (including when no test ran, or a
log is missing: its build failed before any test ran).
"""
import json
import sys

passed = failed = skipped = 0
missing = []
for path in sys.argv[1:]:
    try:
        with open(path) as log:
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
        missing.append(path)
for path in missing:
    print(f"no {path}: its build failed before any test ran")
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(0 if passed and not failed and not missing else 1)
