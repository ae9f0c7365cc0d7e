#!/usr/bin/env bash
# Source compatibility of include/nccl.h with CUDA programs (issue 12): header_half.cc, which
# uses `half` after including only nccl.h, is compiled with ringcc's include/ first and the
# CUDA toolkit's second (where NVIDIA's nccl.h also lives), by the C++ compiler and by nvcc when
# given, linked against the built libnccl.so.2 and run. Then the library's own compile commands
# are checked: none of ringcc's sources may have the toolkit's include directory on its path.
# Environment: RINGCC_SOURCE_ROOT, RINGCC_BUILD_ROOT, CXX, NVCC (may be empty), CUDA_INCLUDE.
set -euo pipefail
src=$RINGCC_SOURCE_ROOT
build=$RINGCC_BUILD_ROOT
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-I"$src/include" -I"$CUDA_INCLUDE")
link=(-L"$build" -lnccl -Wl,-rpath,"$build")
nvcc_link=(-L"$build" -lnccl -Xlinker -rpath -Xlinker "$build")
unset LD_LIBRARY_PATH  # the programs must find the build's library through their own rpath

check_program() {  # $1: executable
  # The loader must resolve libnccl.so.2 to the build's copy, not NVIDIA's.
  local resolved
  resolved=$(ldd "$1" | awk '$1 == "libnccl.so.2" { print $3 }')
  if [ "$(readlink -f "$resolved")" != "$(readlink -f "$build/libnccl.so.2")" ]; then
    echo "FAIL: $1 loads libnccl.so.2 from '$resolved', not from $build"
    exit 1
  fi
  "$1"
}

# shellcheck disable=SC2086  # CXX may be "ccache c++"
$CXX -std=c++17 -Wall -Wextra -Werror "${flags[@]}" "$src/tests/install/header_half.cc" \
  -o "$work/half_cxx" "${link[@]}"
check_program "$work/half_cxx"
echo "compiled with $CXX: ok"

if [ -n "${NVCC:-}" ]; then
  "$NVCC" -x cu "${flags[@]}" "$src/tests/install/header_half.cc" -o "$work/half_nvcc" \
    "${nvcc_link[@]}"
  check_program "$work/half_nvcc"
  echo "compiled with nvcc: ok"
fi

# The library's own sources: the toolkit's include directory on none of their command lines
# (only tests/unit/abi_real.cc, which compares against NVIDIA's header on purpose, may have it).
python3 - "$build/compile_commands.json" "$CUDA_INCLUDE" <<'PY'
import json, sys
commands, cuda = json.load(open(sys.argv[1])), sys.argv[2].rstrip('/')
bad = [c['file'] for c in commands
       if cuda in c.get('command', ' '.join(c.get('arguments', [])))
       and not c['file'].endswith('abi_real.cc')]
if bad:
    sys.exit('FAIL: these compile with %s on the include path: %s' % (cuda, ', '.join(bad)))
print('library sources: %d compile commands, none sees %s' % (len(commands), cuda))
PY
