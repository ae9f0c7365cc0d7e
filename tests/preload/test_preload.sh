#!/usr/bin/env bash
# docs/pytorch.md, "GPU users": PyTorch's pip wheels reach libnccl.so.2 through an old-style
# RPATH (DT_RPATH), which the loader searches before LD_LIBRARY_PATH, so only LD_PRELOAD puts
# ringcc in its place. This checks those claims without a GPU or torch: a program linked the
# same way, with its RPATH pointing at a stand-in "other" NCCL (tests/preload/fake_nccl.c, whose
# ncclGetVersion says 22800), must get
#   - the other NCCL when run plainly, and still with LD_LIBRARY_PATH=<ringcc's build dir>;
#   - ringcc (23203) under LD_PRELOAD=<ringcc's libnccl.so.2>;
# and the in-process check the doc gives (ctypes.CDLL("libnccl.so.2").ncclGetVersion) must
# report ringcc under LD_PRELOAD even when LD_LIBRARY_PATH names the other library first.
# Environment (tests/preload/meson.build): CC, RINGCC_LIB, RINGCC_FAKE_NCCL,
# RINGCC_SOURCE_ROOT, RINGCC_PYTHON (empty: the Python check is skipped, with a message).
set -euo pipefail
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
for v in CC RINGCC_LIB RINGCC_FAKE_NCCL RINGCC_SOURCE_ROOT; do
  [ -n "${!v:-}" ] || fail "$v is not set (run this through meson test)"
done
unset LD_LIBRARY_PATH LD_PRELOAD
read -r -a CC_CMD <<<"$CC"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringcc-preload-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
LIBDIR=$(dirname "$RINGCC_LIB")

mkdir "$TMP/other"
cp "$RINGCC_FAKE_NCCL" "$TMP/other/libnccl.so.2"
"${CC_CMD[@]}" -Wall -Werror -o "$TMP/probe" "$RINGCC_SOURCE_ROOT/tests/preload/preload_probe.c" \
  -I"$RINGCC_SOURCE_ROOT/include" "$RINGCC_LIB" -Wl,--disable-new-dtags,-rpath,"$TMP/other" ||
  fail "compiling the probe failed"
readelf -d "$TMP/probe" | grep -q '(RPATH).*other' || fail "the probe has no DT_RPATH"

expect() {  # expect WHAT WANT COMMAND...
  local what=$1 want=$2 got
  shift 2
  got=$("$@" 2>&1) || fail "$what: $got"
  [ "$got" = "$want" ] || fail "$what: ncclGetVersion $got, want $want"
  echo "ok $what: $got"
}
expect "RPATH alone" 22800 "$TMP/probe"
expect "RPATH beats LD_LIBRARY_PATH" 22800 env LD_LIBRARY_PATH="$LIBDIR" "$TMP/probe"
expect "LD_PRELOAD" 23203 env LD_PRELOAD="$RINGCC_LIB" "$TMP/probe"

if [ -n "${RINGCC_PYTHON:-}" ]; then
  # shellcheck disable=SC2016  # Python code
  expect "ctypes check under LD_PRELOAD" 23203 env LD_PRELOAD="$RINGCC_LIB" \
    LD_LIBRARY_PATH="$TMP/other" "$RINGCC_PYTHON" -c '
import ctypes
v = ctypes.c_int()
ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
print(v.value)'
  expect "ctypes check without it" 22800 env LD_LIBRARY_PATH="$TMP/other" "$RINGCC_PYTHON" -c '
import ctypes
v = ctypes.c_int()
ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
print(v.value)'
else
  echo "--- no Python (-Dpython=disabled): the ctypes check did not run"
fi
echo PASS
