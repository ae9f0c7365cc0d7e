#!/usr/bin/env bash
# The main job: sets up and builds, then runs the embedded default.
# Until the perf tools land this is the all-ranks demo: local ranks (threads) create
# communicators and report who they are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/ringcc_demo "$@"
