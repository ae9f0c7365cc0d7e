#!/usr/bin/env bash
# Builds, here and without a GPU, everything the device check (tests/gpu/run.sh --bundle DIR)
# needs, into DIR: the lent machine's image has nvcc, PyTorch, meson and ninja but no UCX, no
# Catch2, no hwloc headers and no package registry, and its time is short, so nothing is built
# there. At most 64 MiB (what the device tool carries).
#
#   DIR/libnccl.so.2.32.3, libnccl.so.2, libnccl.so    the library (UCX disabled)
#   DIR/libhwloc.so.15                                 copied from this machine when libnccl
#                                                      needs it (the image may lack it)
#   DIR/bench/*_perf, DIR/bench/ringcc-run             the perf tools and the launcher
#   DIR/tests/gpu/gpu_coll, gpu_kernel_launch, gpu_reduce_copy_bw, run.sh,
#                 torch_nccl_preload.py                the checks
#   DIR/MANIFEST                                       commit, options, what each file needs
#
# The layout is the build tree's, so the tools' build RUNPATH ($ORIGIN/..) finds DIR's
# libnccl.so.2 before any other (NVIDIA's sits in the loader's cache on CUDA machines); run.sh
# also puts DIR first on LD_LIBRARY_PATH, for libnccl's own libhwloc and for PyTorch.
# Binaries are copied without debug sections (symbols stay): 12.5 MiB; with them 97 MiB.
#
# Usage: tests/gpu/bundle.sh DIR
#   BUNDLE_BUILD  the meson build dir (default: build-bundle beside build/, at the same depth, so
#                 ccache's hits from build/ apply); configured -Dcuda=enabled -Ducx=disabled
#                 -Dtests=false -Dpython=disabled -Dmpi=disabled
#   BUNDLE_JOBS   ninja's -j (default: ninja's own)
#   BUNDLE_FATBIN_FROM  a build dir of the same sources (default: build/ beside this one) whose
#                 kernels/batch_kernel.fatbin is taken instead of running nvcc again, when it is
#                 current there (`ninja -n` has nothing to do for it): minutes of nvcc saved
#                 (-Dkernel_fatbin); the MANIFEST says which fatbin the library embeds
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
die() {
  echo "bundle: $*" >&2
  exit 1
}
[ $# -eq 1 ] || die "usage: tests/gpu/bundle.sh DIR"
DIR=$1
BUILD=${BUNDLE_BUILD:-$ROOT/build-bundle}
LIMIT=$((64 * 1024 * 1024))
start=$SECONDS

[ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null ||
  die "needs nvcc (/usr/local/cuda/bin/nvcc): the bundle carries the CUDA kernels"
# DIR is emptied first: only a directory that is empty or holds an earlier bundle.
if [ -e "$DIR" ]; then
  [ -d "$DIR" ] || die "$DIR exists and is not a directory"
  if [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/MANIFEST" ]; then
    die "$DIR is not empty and holds no earlier bundle (no MANIFEST): refusing to empty it"
  fi
fi

# The main build's fatbin, if it is there and current: nvcc's flags do not depend on the
# build's options (kernels/meson.build), so it is the very file this build would make. A dry
# run writes nothing, so this is safe while that build runs its tests.
FROM=${BUNDLE_FATBIN_FROM:-$ROOT/build}
FATBIN=""
if [ -f "$FROM/build.ninja" ] && [ -f "$FROM/kernels/batch_kernel.fatbin" ] &&
   ninja -C "$FROM" -n kernels/batch_kernel.fatbin 2>/dev/null | grep -q "no work to do"; then
  FATBIN=$(cd "$FROM/kernels" && pwd -P)/batch_kernel.fatbin
fi
OPTIONS=(-Dcuda=enabled -Ducx=disabled -Dtests=false -Dpython=disabled -Dmpi=disabled
         -Dbuildtype=debugoptimized "-Dkernel_fatbin=$FATBIN")
[ "${CI:-}" = "true" ] && OPTIONS+=(--werror)
if [ -f "$BUILD/build.ninja" ]; then
  meson configure "$BUILD" "${OPTIONS[@]}" >/dev/null
else
  meson setup "$BUILD" "$ROOT" "${OPTIONS[@]}" >/dev/null ||
    die "meson setup $BUILD failed (run it by hand to see why)"
fi

PERF=(all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf
      alltoall_perf sendrecv_perf ringcc-run)
GPU=(gpu_coll gpu_kernel_launch gpu_reduce_copy_bw)
TARGETS=(nccl)
for t in "${PERF[@]}"; do TARGETS+=("bench/$t"); done
for t in "${GPU[@]}"; do TARGETS+=("tests/gpu/$t"); done
JOBS=()
# As scripts/setup.sh compiles build/: ccache's hash without the working directory, so the
# library's sources (the same compile commands) hit build/'s objects.
export CCACHE_NOHASHDIR=1
[ -n "${BUNDLE_JOBS:-}" ] && JOBS=(-j "$BUNDLE_JOBS")
meson compile -C "$BUILD" "${JOBS[@]}" "${TARGETS[@]}" || die "building ${TARGETS[*]} failed"
built=$SECONDS

rm -rf "$DIR"
mkdir -p "$DIR/bench" "$DIR/tests/gpu"
# Meson pads a build RUNPATH that install rewrites ("$ORIGIN/..:XXXX..."); the padding is a
# relative directory the loader would look for under the current one. Cut it off in place, as
# meson's own install does (NULs after the real entries).
unpad_runpath() {
  python3 - "$1" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
fixed = re.sub(rb"(\$ORIGIN[^\0:]*):(X+)\0",
               lambda m: m.group(1) + b"\0" * (len(m.group(2)) + 2), data)
if fixed != data:
    open(sys.argv[1], "wb").write(fixed)
PY
}
copy() {  # copy SRC DST: an ELF without its debug sections, anything else as it is
  if head -c 4 "$1" | grep -q 'ELF'; then
    strip --strip-debug -o "$2" "$1"
    unpad_runpath "$2"
  else
    cp "$1" "$2"
  fi
}
copy "$BUILD/libnccl.so.2.32.3" "$DIR/libnccl.so.2.32.3"
ln -s libnccl.so.2.32.3 "$DIR/libnccl.so.2"
ln -s libnccl.so.2 "$DIR/libnccl.so"
for t in "${PERF[@]}"; do copy "$BUILD/bench/$t" "$DIR/bench/$t"; done
for t in "${GPU[@]}"; do copy "$BUILD/tests/gpu/$t" "$DIR/tests/gpu/$t"; done
cp "$ROOT/tests/gpu/run.sh" "$ROOT/tests/gpu/torch_nccl_preload.py" "$DIR/tests/gpu/"

# libhwloc: libnccl (and the statically linked gpu tools) need it at run time when this
# machine's build found it; the device image has no hwloc headers and may have no library.
hwloc=none
if readelf -d "$DIR/libnccl.so.2.32.3" | grep -q 'NEEDED.*\[libhwloc\.so\.15\]'; then
  lib=$(ldd "$BUILD/libnccl.so.2.32.3" | awk '$1 == "libhwloc.so.15" { print $3 }')
  [ -n "$lib" ] && [ -f "$lib" ] || die "libnccl needs libhwloc.so.15 and ldd finds none"
  cp -L "$lib" "$DIR/libhwloc.so.15"
  hwloc="copied from $lib ($(readlink -f "$lib"))"
fi

elfs=()
while IFS= read -r f; do
  head -c 4 "$f" | grep -q 'ELF' && elfs+=("$f")
done < <(find "$DIR" -type f | sort)
needs() {  # the newest glibc and libstdc++ symbol versions the bundle's ELFs ask for
  for f in "${elfs[@]}"; do objdump -T "$f"; done | grep -o "$1_[0-9.]*" | sort -uV | tail -1
}
{
  echo "ringcc device bundle (tests/gpu/bundle.sh)"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(
    git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "built: $(date -u +%FT%TZ) on $(uname -n)"
  echo "options: ${OPTIONS[*]}"
  echo "fatbin: ${FATBIN:-built here by nvcc}"
  echo "toolkit: CUDA $(grep RINGCC_CUDA_TOOLKIT_VERSION "$BUILD/ringcc_config.h" | awk '{print $3}' | tr -d '"')"
  echo "needs: $(needs GLIBC) $(needs GLIBCXX), libcuda.so.1 from the driver"
  echo "libhwloc: $hwloc"
  echo "files:"
  (cd "$DIR" && find . \( -type f -o -type l \) | sort | while IFS= read -r f; do
     if [ -L "$f" ]; then echo "  ${f#./} -> $(readlink "$f")"; else
       echo "  ${f#./} $(stat -c %s "$f")"; fi
   done)
} >"$DIR/MANIFEST"

total=$(du -sb --apparent-size "$DIR" | awk '{print $1}')
[ "$total" -le $LIMIT ] || die "the bundle is $total bytes, over the 64 MiB limit"
echo "bundle: $DIR: $((total / 1024)) KiB in $(find "$DIR" -type f | wc -l) files; built in" \
     "$((built - start)) s, copied in $((SECONDS - built)) s"
