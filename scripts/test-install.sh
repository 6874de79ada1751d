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

echo "== examples/embed"
cmake -S "$src/examples/embed" -B "$tmp/embed" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir > /dev/null
cmake --build "$tmp/embed" > /dev/null
mkdir -p "$tmp/out"
"$tmp/embed/embed-decode" "$tmp/out"
test -s "$tmp/out/decode.hsaco"
echo "== both consumers pass"
