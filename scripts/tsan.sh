#!/usr/bin/env bash
# Builds ringcc with ThreadSanitizer (build-tsan/) and runs the test groups whose ranks are
# threads of one process (docs/testing.md, "Sanitizers"). Only the library and the test
# programs those groups need are built, to keep CI's time down.
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
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Db_sanitize=thread -Db_lundef=false -Dpython=disabled \
    -Dcuda=disabled -Dbuildtype=debugoptimized || exit 1
fi
# The test programs of the groups below, and the root helper of newUniqueId (tests/support).
TARGETS=(tests/test_core tests/test_bootstrap tests/test_lifecycle tests/test_collectives
         tests/test_transport tests/test_monitor tests/test_bootstrap_fault tests/test_mismatch
         tests/ringcc_test_root)
ninja -C "$BUILD" "${TARGETS[@]}" || exit 1
echo "tsan: built in $((SECONDS - start)) s"

# Test names as Meson lists them ("suite [tag]"), kept when they match TAKE.
# core [ranks] checks that its process runs no other thread, which TSan's runtime thread breaks.
TAKE='^core \[(params|log|errors)\]$|^bootstrap \[(bootstrap|socket)\]$|^bootstrap_fault \[bootstrap_fault\]$'
TAKE+='|^lifecycle \[(lifecycle|split|shrink|abort)\]$|^lifecycle_ucx \[(lifecycle|abort)\]$'
# The other protocols and the proxy thread (UCX), on the quick groups.
TAKE+='|^collectives_(ll|direct|ucx) \[coll_(p2p|group)\]$'
TAKE+='|^collectives \[coll_(allreduce|reducescatter|rooted|gather|p2p|group|channels)\]$'
TAKE+='|^transport \[(p2p|select|wait|conn_info|ucx)\]$|^monitor \[monitor_unit\]$|^mismatch \[mismatch_threads\]$'
mapfile -t tests < <(meson test -C "$BUILD" --list 2>/dev/null | sed 's|^ringcc / ||' | grep -E "$TAKE")
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
