#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs the whole test suite.
# Extra arguments go to `meson test` (for example a test name, or --suite).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec meson test -C build --print-errorlogs --num-processes 2 "$@"
