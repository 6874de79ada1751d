#!/usr/bin/env bash
# A/B timing on the GPU machine: the artifact folders given (each as
# bench/h200/compile.sh DIR made them) timed by bench.py in turn, ROUNDS
# times (default 2), alternating, so that every variant sees the same
# clocks and neighbours; no checks, no peers (run.sh checks the one that
# lands). Prints a line of µs (and % of the streaming read) per shape and
# the geomean over the GPU MODE eight per folder and round. Each folder is
# timed with the runtime built from its runtime-src (compile.sh copies it
# there), else with this checkout's.
# Usage: FORMATS=fp8 ROUNDS=2 bench/h200/ab.sh DIR_A DIR_B [...];
# ONLY=FORMAT:B:KV:H:Q_LEN[,...] times those shapes instead of FORMATS';
# REQUIRE_GPU=H200: nothing run (exit 3) on another GPU (require-gpu.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/bench/h200/require-gpu.sh"
build=/tmp/mla-runtime-build
[ $# -ge 1 ] || { echo "usage: $0 ARTIFACT_DIR..." >&2; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader || true
runtime_build() { # SOURCE BUILD_DIR
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    > "$2.configure.log" || { cat "$2.configure.log"; exit 1; }
  cmake --build "$2" > "$2.log" || { cat "$2.log"; exit 1; }
}
libs=()
for i in $(seq $#); do
  dir=${!i}
  if [ -d "$dir/runtime-src/runtime" ]; then
    # A build folder per artifact folder: a warm machine keeps it for the
    # next call, whose folders may come in another order.
    dir_build=$build-$(printf %s "$(cd "$dir" && pwd)" | md5sum | cut -c1-8)
    runtime_build "$dir/runtime-src/runtime" "$dir_build"
    libs+=("$dir_build/lib/libMLARuntime.so")
  else
    [ -n "${checkout_built:-}" ] || runtime_build "$root/runtime" "$build"
    checkout_built=1
    libs+=("$build/lib/libMLARuntime.so")
  fi
done
for round in $(seq "${ROUNDS:-2}"); do
  for i in $(seq $#); do
    dir=${!i}
    out=$(mktemp -d)
    python3 "$root/bench/h200/bench.py" --lib "${libs[$((i - 1))]}" \
      --artifacts "$dir" --out "$out" --formats "${FORMATS:-fp8}" \
      --skip-check --skip-peers ${ONLY:+--only "$ONLY"} > "$out/log" 2>&1 ||
      { tail -5 "$out/log"; exit 1; }
    echo "== $dir, round $round"
    # format B kv H q_len: µs (% of read BW)
    awk -F'|' '/^\| (bf16|fp8|mxfp4) /{gsub(/ /,"");
      printf "%s %s/%s/%s/%s: %s (%s); ", $2,$3,$4,$5,$6,$7,$10}' \
      "$out/table.md"
    echo
    grep geomean "$out/table.md" || true
    rm -rf "$out"
  done
done
