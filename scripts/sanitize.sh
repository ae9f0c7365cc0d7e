#!/usr/bin/env bash
# Builds ringcc with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/) and runs
# the test groups that are fit for it (docs/testing.md, "Sanitizers").
#
# Forked ranks are included: tests/support/ranks.h forks them only from a process that runs
# no other thread (with GCC 12's ASan runtime a child could otherwise inherit the allocator's
# lock held by another thread and block forever), and fails the test if one runs.
#
# Left out, each for a reason:
#   - install, preload, torch: programs built without ASan (or Python) load the instrumented
#     library, which ASan refuses; fuzz: it is its own sanitized clang build.
#   - timing checks (fault_revoke; bootstrap_fault's thread cases, whose flood of 1200
#     connections against a 3 s timeout failed once under ASan on a loaded machine, and which
#     scripts/tsan.sh runs) and the 4096-rank simulation (sim_scale): ASan's slowdown.
# Usage: scripts/sanitize.sh [extra meson test arguments]   (packages: scripts/setup.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build-asan
start=$SECONDS
# Line tables only (-g1): stacks still symbolized with lines, and about 0.6-0.7x the compile
# time of -g. -O1, as ASan's authors advise: the library compiles in about 0.6x the time of -O2.
# test_reduce_copy stays at -O2 (tests/meson.build: at -O1 its packed and element-wise walks
# propagate different NaN payloads, and its bit-for-bit check fails).
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Db_sanitize=address,undefined -Db_lundef=false -Dpython=disabled \
    -Dcuda=disabled -Doptimization=1 -Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1 || exit 1
fi
# Test names as Meson lists them ("suite [tag]"), kept when they match TAKE.
TAKE='^(core|reduce_copy|tune|abi|api_args|bootstrap|bench|topo|sched) |^sched_scale \[sched_scale\]$'
TAKE+='|^transport |^lifecycle \[(lifecycle|split|shrink|abort)\]$|^collectives \[coll_(allreduce|reducescatter|rooted|gather|p2p|group|channels|large)\]$'
TAKE+='|^monitor \[monitor_unit\]$|^soak$|^net \[net_hosts\]$|^adasum \[(adasum|adasum_fork)\]$'
# Ranks in forked processes (tests/support/ranks.h).
# Links over UCX closed as a process exits (the proxy drains them first: transports/proxy/proxy.cc).
TAKE+='|^lifecycle_ucx \[(lifecycle|split|shrink|abort)\]$'
TAKE+='|^lifecycle \[lifecycle_fork\]$|^collectives \[coll_(fork|tree_fork)\]$|^bootstrap_fault \[bootstrap_fault_fork\]$'
TAKE+='|^fault \[fault_(kill|exit|shrink|shm|abort|timeout|init|errors)\]$|^mismatch '
TAKE+='|^monitor \[(trace|hang)\]$|^net \[net_faults\]$'
# Grow (threads, processes, timeouts) and the elastic loop end to end, on one host and across hosts.
TAKE+='|^grow \[|^example_elastic$|^net \[net_elastic\]$'
# Suspend/resume, windows and one-sided signals (memfd mappings, process_vm_writev, the
# bootstrap listener's copies), on threads, processes and hosts.
TAKE+='|^suspend \[|^rma \[|^net \[net_rma\]$'
mapfile -t tests < <(scripts/select_tests.py "$BUILD" "$TAKE" names)
[ ${#tests[@]} -gt 0 ] || exit 1
# Only what those groups run is built (their test programs, the library, the tools they start).
mapfile -t targets < <(scripts/select_tests.py "$BUILD" "$TAKE" targets)
ninja -C "$BUILD" "${targets[@]}" || exit 1
echo "sanitize: built ${#targets[@]} targets in $((SECONDS - start)) s"
echo "sanitize: ${#tests[@]} test groups under ASan+UBSan"

supp="$PWD/tests/sanitizers"
# Full stack unwinding at every allocation: hwloc's plugins are unloaded before the leak check,
# and only a full stack still reaches the frame its suppression names (tests/sanitizers).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 \
LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C "$BUILD" --no-rebuild --num-processes 2 --timeout-multiplier 4 \
    --print-errorlogs "$@" "${tests[@]}"
status=$?
echo "sanitize: took $((SECONDS - start)) s"
exit $status
