#!/usr/bin/env bash
# Builds ringcc with ThreadSanitizer (build-tsan/) and runs the test groups whose ranks are
# threads of one process (docs/testing.md, "Sanitizers"). Only what those groups run is built,
# to keep CI's time down.
#
# Left out, each for a reason:
#   - groups whose ranks are forked processes: TSan sees one process, so races between ranks
#     are out of its sight, and its runtime runs a thread of its own, which runProcesses
#     refuses to fork beside (tests/support/ranks.h). ASan+UBSan runs them (scripts/sanitize.sh).
#   - the collectives' 32 MiB and tree groups, the soak, the scale simulations: TSan's slowdown
#     (5-15x), for code the smaller groups already run on threads.
# Usage: scripts/tsan.sh [extra meson test arguments]   (packages: scripts/setup.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build-tsan
start=$SECONDS
# Line tables only (-g1): stacks still symbolized with lines, and about 0.6-0.7x the compile
# time of -g. -O1, as the ASan build (scripts/sanitize.sh): built in 96 s against 113 s at -O2,
# the groups' run as long (194 s against 190 s of test time, 2026-12-07).
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Db_sanitize=thread -Db_lundef=false -Dpython=disabled \
    -Dcuda=disabled -Doptimization=1 -Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1 || exit 1
fi
# Test names as Meson lists them ("suite [tag]"), kept when they match TAKE.
# core [ranks] checks that its process runs no other thread, which TSan's runtime thread breaks.
TAKE='^core \[(params|log|errors)\]$|^bootstrap \[(bootstrap|socket)\]$|^bootstrap_fault \[bootstrap_fault\]$'
TAKE+='|^lifecycle \[(lifecycle|split|shrink|abort)\]$|^lifecycle_ucx \[(lifecycle|abort)\]$'
# Grow on threads: existing and new ranks, a group, non-blocking grows, abort, timeouts.
TAKE+='|^grow \[(grow|grow_timeout)\]$'
# The other protocols and the proxy thread (UCX), on the quick groups.
TAKE+='|^collectives_(ll|direct|ucx) \[coll_(p2p|group)\]$'
TAKE+='|^collectives \[coll_(allreduce|reducescatter|rooted|gather|p2p|group|channels)\]$'
TAKE+='|^transport \[(p2p|select|wait|conn_info|ucx)\]$|^monitor \[monitor_unit\]$|^mismatch \[mismatch_threads\]$'
mapfile -t tests < <(scripts/select_tests.py "$BUILD" "$TAKE" names)
[ ${#tests[@]} -gt 0 ] || exit 1
# Only what those groups run is built (scripts/select_tests.py reads Meson's introspection).
mapfile -t targets < <(scripts/select_tests.py "$BUILD" "$TAKE" targets)
ninja -C "$BUILD" "${targets[@]}" || exit 1
echo "tsan: built ${#targets[@]} targets in $((SECONDS - start)) s"
echo "tsan: ${#tests[@]} test groups under TSan"

supp="$PWD/tests/sanitizers"
# UCX's memory hooks (libucm) patch glibc's madvise, which a thread calls as it exits; the hook
# takes a pthread rwlock there, and TSan's interceptor crashes on a thread it has already
# finished (SIGSEGV in __tsan::MutexPreReadLock under ucm_madvise, every test). ringcc turns
# UCX's registration cache off (transports/ucx/ucx_worker.cc), so the hooks serve nothing here.
UCX_MEM_MMAP_HOOK_MODE=none \
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
  meson test -C "$BUILD" --no-rebuild --num-processes 2 --timeout-multiplier 6 \
    --print-errorlogs "$@" "${tests[@]}"
status=$?
echo "tsan: took $((SECONDS - start)) s"
exit $status
