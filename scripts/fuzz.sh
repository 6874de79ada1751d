#!/usr/bin/env bash
# `make fuzz FUZZ_SECONDS=N`: builds the libFuzzer targets of fuzz/ with
# clang-22 (ASan + UBSan, coverage on the project's own code) in their own
# build directory and runs each for N seconds, starting from its checked-in
# corpus (grown corpora stay in BUILD/corpus between runs). One line per
# target; exit 1 on any crash, leak or timeout, whose input is kept in
# BUILD/crashes (copy it into fuzz/corpus/NAME to make it a regression test).
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS SOURCE_DIR
set -euo pipefail
build=$1
seconds=$2
src=$(cd "$3" && pwd)
llvm=/usr/lib/llvm-22

mkdir -p "$build"
if [ ! -f "$build/build.ninja" ]; then
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=$llvm/bin/lit \
    -DLLVM_USE_SANITIZER="Address;Undefined" -DMLA_FUZZ=ON \
    > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
fi
ninja -C "$build" mla-fuzzers > "$build/fuzzers.log" 2>&1 ||
  { tail -30 "$build/fuzzers.log"; exit 1; }

status=0
mkdir -p "$build/crashes"
for fuzzer in "$build"/bin/mla-fuzz-*; do
  name=${fuzzer##*/mla-fuzz-}
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  cp -n "$src/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null || true
  extra=()
  asan=detect_leaks=1
  if [ "$name" = mlir ] || [ "$name" = passes ]; then
    extra+=(-dict="$src/fuzz/mlir.dict")
    # LLVM's allocators poison their free space when the headers are built
    # with ASan, but libMLIR itself is not: its reads of such memory are
    # false reports. Real heap errors are still caught.
    asan+=:allow_user_poisoning=0
  fi
  log="$build/fuzz-$name.log"
  if ASAN_OPTIONS=$asan "$fuzzer" "$corpus" -max_total_time="$seconds" \
       -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix="$build/crashes/$name-" "${extra[@]}" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $name: ${runs:-?} executions in ${seconds} s, corpus $(ls "$corpus" | wc -l) inputs, no crash"
  else
    echo "fuzz $name: FAILED (crash, leak or timeout; input in $build/crashes, log $log)"
    grep -m3 -E "ERROR|SUMMARY|Test unit written" "$log" || true
    status=1
  fi
done
exit $status
