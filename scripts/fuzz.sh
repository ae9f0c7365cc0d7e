#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan in build-fuzz/ (or
# $FUZZ_BUILD), then
# runs each one, starting from its seed corpus (tests/fuzz/corpus/NAME, read only; new inputs
# go to a scratch directory). Arguments go to every harness, e.g.
#   scripts/fuzz.sh -runs=10000000            (the long run: 10^7 inputs each)
#   scripts/fuzz.sh -max_total_time=60        (a minute each)
# Default: -runs=20000 (CI's short run). Exits non-zero if a harness finds a crash; the
# crashing input is left in build-fuzz/crashes/. The test suite runs the short run as the
# test `fuzz` (tests/meson.build: its own build under the main build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FUZZ_BUILD:-build-fuzz}
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-runs=20000)
HARNESSES=(env unique_id conn_info root topo_xml)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD" -Dfuzz=true -Dtests=false -Dcuda=disabled \
    -Dmpi=disabled -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C "$BUILD" "${HARNESSES[@]/#/tests/fuzz/fuzz_}"

mkdir -p "$BUILD/crashes"
status=0
for h in "${HARNESSES[@]}"; do
  scratch=$(mktemp -d)
  echo "fuzz: $h ${ARGS[*]}"
  # detect_leaks=0: the harnesses keep process-wide state (a bootstrap root) on purpose.
  if ! ASAN_OPTIONS=detect_leaks=0 "$BUILD/tests/fuzz/fuzz_$h" "${ARGS[@]}" \
      -artifact_prefix="$BUILD/crashes/$h-" "$scratch" "tests/fuzz/corpus/$h" \
      >"$BUILD/fuzz_$h.log" 2>&1; then
    echo "fuzz: $h FAILED (log: $BUILD/fuzz_$h.log)" >&2
    tail -30 "$BUILD/fuzz_$h.log" >&2
    status=1
  else
    grep -E "^Done|#[0-9]+.*DONE" "$BUILD/fuzz_$h.log" | tail -1
  fi
  rm -rf "$scratch"
done
exit $status
