#!/usr/bin/env bash
# The main job: sets up and builds, then runs the all-reduce sweep on the embedded default:
# local ranks over shared memory (2 processes here, started by ringcc-run), float32 sum from
# 8 B to 128 MiB. Arguments replace the perf tool's defaults (nccl-tests flags), and
# RINGCC_RUN_NP sets the number of processes.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what it runs: the library, the launcher and the perf tool (the tests build with
# scripts/test.sh).
scripts/setup.sh build nccl bench/ringcc-run bench/all_reduce_perf
NP=${RINGCC_RUN_NP:-2}
if [ $# -eq 0 ]; then
  set -- -b 8 -e 128M -f 2
fi
exec build/bench/ringcc-run -n "$NP" build/bench/all_reduce_perf "$@"
