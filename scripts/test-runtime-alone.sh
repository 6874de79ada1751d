#!/usr/bin/env bash
# The runtime deploys without a compiler: runtime/ configures and builds on
# its own with no LLVM or MLIR in sight (the way a GPU machine without them
# builds it), and the library it makes needs only the C and C++ runtimes.
# Usage: scripts/test-runtime-alone.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S "$src/runtime" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
lib="$tmp/build/lib/libMLARuntime.so"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort)
echo "libMLARuntime.so needs:" $needed
for n in $needed; do
  case "$n" in
    libstdc++.so.*|libm.so.*|libgcc_s.so.*|libc.so.*|libdl.so.*|libpthread.so.*|ld-linux*) ;;
    *) echo "unexpected dependency: $n" >&2; exit 1 ;;
  esac
done
# The C API is there; the compiler is not.
symbols=$(nm -D "$lib")
grep -q ' T mla_launch$' <<< "$symbols"
if grep -qi 'mlir\|llvm' <<< "$symbols"; then
  echo "libMLARuntime.so refers to LLVM or MLIR symbols" >&2
  exit 1
fi
echo "== the runtime builds and links alone"
