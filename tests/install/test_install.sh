#!/usr/bin/env bash
# The install, as a user gets it: `meson install` into a temporary DESTDIR, then
#  1. the right files are there (library, dev symlink, headers, nccl.pc and ringcc.pc, the
#     user tools) and the internal tools are not;
#  2. examples/allreduce.c compiles with `pkg-config --cflags --libs nccl` (and ringcc) against
#     the installed copy and, run with no LD_LIBRARY_PATH, loads the installed libnccl.so.2
#     (ldd, and the example's own ncclGetVersion check: ringcc's 23203, not NVIDIA's);
#  3. the installed ringcc-run and all_reduce_perf load the installed libnccl.so.2 too (ldd,
#     ringcc-run's memory map seen from its child, and the perf tool's nccl-library= line);
#  4. the installed Python package (when built) imports from the staged tree and loads the
#     staged libnccl.so.2 (it finds it relative to itself), with RINGCC_LIB unset.
# NVIDIA's libnccl.so.2 may be in the loader's default path, so a program that found "a"
# libnccl.so.2 proves nothing: every check names the file that was loaded.
#
# Environment (tests/install/meson.build): RINGCC_BUILD_ROOT, RINGCC_SOURCE_ROOT, MESON, CC,
# PKG_CONFIG (empty when meson did not find it), RINGCC_PREFIX, RINGCC_BINDIR, RINGCC_LIBDIR,
# RINGCC_INCLUDEDIR (absolute install paths, before DESTDIR), RINGCC_PYTHON and
# RINGCC_PYTHON_DIR (the interpreter and the package's install folder; empty when the Python
# package is not built).
set -euo pipefail

EXPECTED_VERSION=23203
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "--- $*"; }

for v in RINGCC_BUILD_ROOT RINGCC_SOURCE_ROOT MESON CC RINGCC_PREFIX RINGCC_BINDIR \
  RINGCC_LIBDIR RINGCC_INCLUDEDIR; do
  [ -n "${!v:-}" ] || fail "$v is not set (run this through meson test)"
done
if [ -z "${PKG_CONFIG:-}" ] || ! command -v "$PKG_CONFIG" >/dev/null; then
  fail "pkg-config not found: install it (Debian: apt-get install pkg-config; scripts/setup.sh does)"
fi
read -r -a CC_CMD <<<"$CC"
command -v "${CC_CMD[0]}" >/dev/null || fail "C compiler '$CC' not found"
read -r -a MESON_CMD <<<"$MESON"
command -v ldd >/dev/null || fail "ldd not found"
command -v readelf >/dev/null || fail "readelf not found (Debian: binutils)"

# Nothing inherited may choose the library for us.
if [ -n "${LD_LIBRARY_PATH:-}" ]; then echo "(unsetting LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"; fi
unset LD_LIBRARY_PATH LD_PRELOAD

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringcc-install-test.XXXXXX")
TMP=$(cd "$TMP" && pwd -P)  # the loader reports physical paths
trap 'rm -rf "$TMP"' EXIT
DEST=$TMP/dest
BIN=$DEST$RINGCC_BINDIR
LIB=$DEST$RINGCC_LIBDIR
INC=$DEST$RINGCC_INCLUDEDIR

step "meson install --destdir $DEST"
"${MESON_CMD[@]}" install -C "$RINGCC_BUILD_ROOT" --no-rebuild --destdir "$DEST" \
  >"$TMP/install.log" 2>&1 || {
  cat "$TMP/install.log" >&2
  fail "meson install failed"
}

step "installed files"
[ -f "$LIB/libnccl.so.2.32.3" ] || fail "$LIB/libnccl.so.2.32.3 missing"
[ "$(readlink "$LIB/libnccl.so.2")" = libnccl.so.2.32.3 ] || fail "libnccl.so.2 symlink wrong"
[ "$(readlink "$LIB/libnccl.so")" = libnccl.so.2 ] ||
  fail "libnccl.so (the -lnccl dev symlink) missing or wrong"
for h in nccl.h ringcc.h; do [ -f "$INC/$h" ] || fail "$INC/$h missing"; done
for pc in nccl ringcc; do
  [ -f "$LIB/pkgconfig/$pc.pc" ] || fail "$LIB/pkgconfig/$pc.pc missing"
done
USER_TOOLS=(ringcc-run ringcc-topo all_reduce_perf all_gather_perf broadcast_perf reduce_perf
  reduce_scatter_perf alltoall_perf sendrecv_perf ringcc-pairprobe)
for t in "${USER_TOOLS[@]}"; do [ -x "$BIN/$t" ] || fail "$BIN/$t not installed"; done
[ -x "$BIN/ringcc-monitor" ] || fail "$BIN/ringcc-monitor not installed (or not executable)"
[ "$(head -1 "$BIN/ringcc-monitor")" = "#!/usr/bin/python3" ] ||
  fail "$BIN/ringcc-monitor does not start with #!/usr/bin/python3"
for t in comm_init_bench memcpy_bench ring_reference mpi_allreduce_bench oneccl_allreduce_bench; do
  found=$(find "$DEST" -name "$t*")
  [ -z "$found" ] || fail "internal tool installed: $found"
done
# No installed binary may search the build tree (meson swaps the build RUNPATH for
# install_rpath); the library itself needs none.
for f in "$LIB/libnccl.so.2.32.3" "${USER_TOOLS[@]/#/$BIN/}"; do
  runpath=$(readelf -d "$f" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
  case "$runpath" in
    *"$RINGCC_BUILD_ROOT"*) fail "$f keeps the build tree in its RUNPATH: $runpath" ;;
  esac
  [ "$f" = "$LIB/libnccl.so.2.32.3" ] || [ -n "$runpath" ] || fail "$f has no RUNPATH"
  echo "$(basename "$f"): RUNPATH ${runpath:-(none)}"
done

# ringcc-topo carries the library's internals (no libnccl.so.2 needed): it runs as installed.
step "installed ringcc-topo"
topo_out=$(env -u LD_LIBRARY_PATH "$BIN/ringcc-topo" --ranks 1) || fail "ringcc-topo failed: $topo_out"
grep -q "^Topology detected on this host" <<<"$topo_out" || fail "ringcc-topo printed: $topo_out"
grep -q "^Channel 00/" <<<"$topo_out" || fail "ringcc-topo printed no rings: $topo_out"

# `ldd PROGRAM` must resolve libnccl.so.2 to the installed copy.
check_ldd() {
  local resolved
  resolved=$(ldd "$1" | awk '$1 == "libnccl.so.2" { print $3 }')
  [ -n "$resolved" ] || fail "$1 does not need libnccl.so.2 (ldd: $(ldd "$1"))"
  resolved=$(readlink -f "$resolved")
  [ "$resolved" = "$LIB/libnccl.so.2.32.3" ] ||
    fail "$1 resolves libnccl.so.2 to $resolved, not the installed $LIB/libnccl.so.2.32.3"
  echo "$(basename "$1"): libnccl.so.2 => $resolved"
}

for pc in nccl ringcc; do
  step "examples/allreduce.c built with pkg-config $pc"
  # The .pc files name the configured prefix; under DESTDIR it is moved, and every path in
  # them (includedir, libdir, the rpath) follows it.
  PC=("$PKG_CONFIG" --define-variable=prefix="$DEST$RINGCC_PREFIX")
  cflags=$(PKG_CONFIG_PATH="$LIB/pkgconfig" PKG_CONFIG_LIBDIR="$LIB/pkgconfig" \
    "${PC[@]}" --cflags "$pc") || fail "pkg-config --cflags $pc failed"
  libs=$(PKG_CONFIG_PATH="$LIB/pkgconfig" PKG_CONFIG_LIBDIR="$LIB/pkgconfig" \
    "${PC[@]}" --libs "$pc") || fail "pkg-config --libs $pc failed"
  echo "cflags: $cflags"
  echo "libs:   $libs"
  [[ " $cflags " == *" -I$INC "* ]] || fail "$pc cflags do not name $INC"
  [[ " $libs " == *" -L$LIB "* ]] || fail "$pc libs do not name -L$LIB"
  [[ " $libs " == *" -lnccl "* ]] || fail "$pc libs do not name -lnccl"
  exe=$TMP/allreduce_$pc
  # shellcheck disable=SC2086  # pkg-config output is a list of flags
  "${CC_CMD[@]}" -Wall -Werror -o "$exe" "$RINGCC_SOURCE_ROOT/examples/allreduce.c" $cflags $libs ||
    fail "compiling examples/allreduce.c against the installed library failed"
  check_ldd "$exe"
  out=$(env -u LD_LIBRARY_PATH "$exe" 2>&1) || fail "example failed: $out"
  echo "$out"
  grep -qx "ncclGetVersion: $EXPECTED_VERSION" <<<"$out" || fail "example did not load ringcc"
  grep -qx "ringccGetVersion: $EXPECTED_VERSION" <<<"$out" || fail "example found no ringccGetVersion"
done

step "installed ringcc-run and all_reduce_perf"
check_ldd "$BIN/ringcc-run"
check_ldd "$BIN/all_reduce_perf"
# ringcc-run's child reads its parent's memory map: the libnccl that ringcc-run loaded.
# shellcheck disable=SC2016  # $PPID is the child shell's
maps=$(env -u LD_LIBRARY_PATH "$BIN/ringcc-run" -n 1 --timeout 60 -- \
  /bin/sh -c 'grep libnccl "/proc/$PPID/maps"') || fail "ringcc-run -n 1 sh failed: $maps"
loaded=$(awk '{ print $6 }' <<<"$maps" | sort -u)
echo "ringcc-run mapped: $loaded"
[ "$loaded" = "$LIB/libnccl.so.2.32.3" ] || fail "ringcc-run loaded $loaded, not $LIB/libnccl.so.2.32.3"
out=$(env -u LD_LIBRARY_PATH "$BIN/ringcc-run" -n 2 --timeout 120 -- \
  "$BIN/all_reduce_perf" -b 8 -e 8 2>&1) || fail "ringcc-run -n 2 all_reduce_perf failed: $out"
echo "$out"
grep -q "nccl-library=$EXPECTED_VERSION\b" <<<"$out" ||
  fail "installed all_reduce_perf did not load ringcc (no nccl-library=$EXPECTED_VERSION)"
grep -q "Out of bounds values : 0 OK" <<<"$out" || fail "all_reduce_perf reported errors"

step "installed ringcc-monitor --heatmap (runs the installed ringcc-run and ringcc-pairprobe)"
HEAT=$TMP/heatmap
out=$(env -u LD_LIBRARY_PATH /usr/bin/python3 "$BIN/ringcc-monitor" --heatmap -n 2 --max 1K \
  --timeout 60 "$HEAT" 2>&1) || fail "installed ringcc-monitor --heatmap failed: $out"
echo "$out"
grep -q "^ringcc-monitor: $BIN/ringcc-run " <<<"$out" ||
  fail "ringcc-monitor did not run the ringcc-run installed beside it"
[ -s "$HEAT/pairs.json" ] && [ -s "$HEAT/heatmap.png" ] || fail "no pairs.json or heatmap.png"

if [ -n "${RINGCC_PYTHON_DIR:-}" ]; then
  step "installed Python package"
  PYDIR=$DEST${RINGCC_PYTHON_DIR%/}
  [ -f "$PYDIR/ringcc/_install_paths.py" ] || fail "$PYDIR/ringcc/_install_paths.py missing"
  # Every module of the source package is installed (python/meson.build lists them by hand).
  for f in "$RINGCC_SOURCE_ROOT"/python/ringcc/*.py; do
    [ -f "$PYDIR/ringcc/$(basename "$f")" ] || fail "python/ringcc/$(basename "$f") not installed"
  done
  out=$(cd "$TMP" && env -u RINGCC_LIB PYTHONPATH="$PYDIR" "$RINGCC_PYTHON" -c \
    'import ringcc; print(ringcc.__file__); print(ringcc.version(), ringcc.library_path())' 2>&1) ||
    fail "importing the installed package failed: $out"
  echo "$out"
  [ "$(sed -n 1p <<<"$out")" = "$PYDIR/ringcc/__init__.py" ] || fail "imported another ringcc package"
  [ "$(sed -n 2p <<<"$out")" = "$EXPECTED_VERSION $LIB/libnccl.so.2.32.3" ] ||
    fail "the installed package did not load $LIB/libnccl.so.2.32.3"
else
  echo "--- Python package not built (-Dpython=disabled, or no /usr/bin/python3): not checked"
fi
echo "PASS"
