#!/usr/bin/env bash
# A/B timing on the GPU machine: the artifact folders given (each as
# bench/h200/compile.sh DIR made them) timed by bench.py in turn, ROUNDS
# times (default 2), alternating, so that every variant sees the same
# clocks and neighbours; no checks, no peers (run.sh checks the one that
# lands). Prints a line of µs (and % of the streaming read) per shape and
# the geomean over the GPU MODE eight per folder and round.
# Usage: FORMATS=fp8 ROUNDS=2 bench/h200/ab.sh DIR_A DIR_B [...];
# ONLY=FORMAT:B:KV:H:Q_LEN[,...] times those shapes instead of FORMATS'.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=/tmp/mla-runtime-build
[ $# -ge 1 ] || { echo "usage: $0 ARTIFACT_DIR..." >&2; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader || true
cmake -S "$root/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  > "$build.configure.log" || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" > "$build.log" || { cat "$build.log"; exit 1; }
for round in $(seq "${ROUNDS:-2}"); do
  for dir in "$@"; do
    out=$(mktemp -d)
    python3 "$root/bench/h200/bench.py" --lib "$build/lib/libMLARuntime.so" \
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
