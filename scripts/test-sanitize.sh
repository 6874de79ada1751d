#!/usr/bin/env bash
# `make test-sanitize`: the whole project built with clang-22 under ASan +
# UBSan (-fno-sanitize-recover) in BUILD-asan, and its test suite run there
# (lit, the unit tests, the fuzz corpus replays, docs-in-sync); then the
# runtime and emu stack under TSan in BUILD-tsan, running the concurrent
# launch test. docs/reliability.md says what runs where and why.
# Usage: scripts/test-sanitize.sh BUILD SOURCE_DIR JOBS
set -euo pipefail
build=$1
src=$(cd "$2" && pwd)
jobs=$3
llvm=/usr/lib/llvm-22

# configure DIR LLVM_USE_SANITIZER EXTRA_FLAGS (LLVM_USE_SANITIZER adds the
# sanitizer and frame pointers, and lets shared libraries leave the
# sanitizer runtime to the executable)
configure() {
  local dir=$1 sanitizers=$2 flags=$3
  mkdir -p "$dir"
  [ -f "$dir/build.ninja" ] && return 0
  # -O1 with line tables: readable reports at a fraction of -O2's build time.
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=$llvm/bin/lit \
    -DLLVM_USE_SANITIZER="$sanitizers" -DMLA_PYTHON=OFF \
    > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
}

# build DIR TARGET...
build() {
  local dir=$1
  shift
  ninja -C "$dir" -j "$jobs" "$@" > "$dir/build.log" 2>&1 ||
    { tail -40 "$dir/build.log"; exit 1; }
}

# allow_user_poisoning=0: LLVM's allocators poison their free space from
# headers compiled with ASan, but Debian's libLLVM/libMLIR are not, so their
# own reads of it would be false reports (docs/reliability.md). The build
# runs instrumented tools too (mla-compile makes the tests' artifacts).
# detect_stack_use_after_return=0: with it every emu lane (a fiber) would get
# its own fake stack at each start, mapped and faulted in anew; that made
# instrumented emu runs 2x slower again. Heap errors, stack overflows and
# uses after scope are still caught.
export ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0:strict_string_checks=1:detect_stack_use_after_return=0:max_malloc_fill_size=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
start=$SECONDS
asan=$build-asan
# UBSan as LLVM builds itself with it (its flags are not exported to
# projects): everything but vptr (no RTTI) and function (calls into JIT'd
# code), no recovery.
configure "$asan" Address \
  "-fsanitize=undefined -fno-sanitize=vptr,function -fno-sanitize-recover=all"
build "$asan"
echo "test-sanitize: ASan + UBSan build in $((SECONDS - start)) s ($asan)"

# Not run here: python (an instrumented extension cannot load into
# Debian's python3), runtime-alone and install-and-embed (they build other
# trees with the host compiler; the code they run is tested here).
start=$SECONDS
ctest --test-dir "$asan" --output-on-failure -j "$jobs" \
  -E '^(python|runtime-alone|install-and-embed)$'
echo "test-sanitize: ASan + UBSan tests in $((SECONDS - start)) s"

start=$SECONDS
tsan=$build-tsan
configure "$tsan" Thread ""
build "$tsan" mla-unittests
unset ASAN_OPTIONS UBSAN_OPTIONS
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  "$tsan/unittests/mla-unittests" --gtest_filter='Runtime.Concurrent*'
echo "test-sanitize: TSan concurrent launches in $((SECONDS - start)) s"
