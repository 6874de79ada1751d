#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds and runs the two
# consumers against that prefix only: examples/c-api (C, <mla/runtime.h>)
# and examples/embed (a separate CMake project using find_package).
# Usage: scripts/test-install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" > /dev/null
echo "== installed into a temporary prefix"

cc -std=c99 -Wall -Wextra -Werror "$src/examples/c-api/decode_emu.c" \
  -I"$prefix/include" -L"$prefix/lib" -lMLARuntime -Wl,-rpath,"$prefix/lib" \
  -lm -o "$tmp/decode_emu"
"$prefix/bin/mla-compile" "$src/examples/decode_fp8.mlir" -o "$tmp/decode_fp8.mla"
echo "== examples/c-api"
"$tmp/decode_emu" "$tmp/decode_fp8.mla"

# The runtime loads no compiler: its NEEDED entries name no LLVM or MLIR,
# and without libMLARuntimeJit in the prefix an emu context is refused with
# a clear status instead of failing to load the program.
if readelf -d "$prefix/lib/libMLARuntime.so" | grep NEEDED | grep -Ei 'llvm|mlir'; then
  echo "libMLARuntime.so needs LLVM or MLIR" >&2
  exit 1
fi
mv "$prefix/lib/libMLARuntimeJit.so" "$tmp/"
if "$tmp/decode_emu" "$tmp/decode_fp8.mla" 2> "$tmp/nojit.txt"; then
  echo "decode_emu ran without libMLARuntimeJit" >&2
  exit 1
fi
grep -q "MLA_ERROR_BACKEND_UNAVAILABLE: .*libMLARuntimeJit.so, which is not installed" "$tmp/nojit.txt" || {
  cat "$tmp/nojit.txt" >&2
  exit 1
}
mv "$tmp/libMLARuntimeJit.so" "$prefix/lib/"
echo "== examples/c-api without libMLARuntimeJit: MLA_ERROR_BACKEND_UNAVAILABLE"

echo "== the Python package from the prefix"
if [ -d "$prefix/lib/python3/dist-packages/mla" ]; then
  PYTHONPATH="$prefix/lib/python3/dist-packages" /usr/bin/python3 -c "
import mla
k = mla.Context('emu').load('$tmp/decode_fp8.mla')
assert k.info['kv_format'] == 'fp8', k.info
print('mla from the prefix: loaded', k.info['kv_format'], 'on', k.backend)"
fi

echo "== examples/embed"
cmake -S "$src/examples/embed" -B "$tmp/embed" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir > /dev/null
cmake --build "$tmp/embed" > /dev/null
mkdir -p "$tmp/out"
"$tmp/embed/embed-decode" "$tmp/out"
test -s "$tmp/out/decode.hsaco"
echo "== both consumers pass"
