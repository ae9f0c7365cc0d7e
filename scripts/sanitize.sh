#!/usr/bin/env bash
# Builds ringcc under the sanitizers and runs the tests there (docs/testing.md, "Sanitizers"):
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/), every C++ suite
#         (torch and fuzz aside: the first runs our library inside Debian's Python, the second
#         is its own sanitized clang build);
#   tsan: ThreadSanitizer (build-tsan/), the suites whose ranks are threads of one process.
# Usage: scripts/sanitize.sh [asan|tsan|all] [extra meson test arguments]
# Assumes scripts/setup.sh has installed the packages. Each run leaves its testlog.json in
# BUILD/meson-logs/ for .ci/summary.py.
set -uo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
shift || true
supp="$PWD/tests/sanitizers"
status=0

configure() {  # dir, sanitizers
  if [ ! -f "$1/build.ninja" ]; then
    meson setup "$1" -Db_sanitize="$2" -Db_lundef=false -Dpython=disabled -Dcuda=disabled \
      -Dbuildtype=debugoptimized || return 1
  fi
  ninja -C "$1"
}

if [ "$which" = asan ] || [ "$which" = all ]; then
  start=$SECONDS
  if configure build-asan address,undefined; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    LSAN_OPTIONS=suppressions=$supp/lsan.supp \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      meson test -C build-asan --num-processes 2 --no-suite torch --no-suite fuzz \
        --timeout-multiplier 4 --print-errorlogs "$@" || status=1
  else
    status=1
  fi
  echo "sanitize: asan took $((SECONDS - start)) s"
fi

if [ "$which" = tsan ] || [ "$which" = all ]; then
  start=$SECONDS
  if configure build-tsan thread; then
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$supp/tsan.supp" \
      meson test -C build-tsan --num-processes 2 --timeout-multiplier 4 --print-errorlogs \
        "${TSAN_TESTS[@]}" "$@" || status=1
  else
    status=1
  fi
  echo "sanitize: tsan took $((SECONDS - start)) s"
fi
exit $status
