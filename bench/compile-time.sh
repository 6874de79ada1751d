#!/usr/bin/env bash
# Median wall time of the whole mla.decode -> hsaco compile of an example:
#   bench/compile-time.sh [BUILD_DIR] [RUNS] [EXAMPLE]
set -euo pipefail
build=${1:-build}
runs=${2:-7}
example=${3:-examples/decode_fp8.mlir}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$build/bin/mla-opt" "$example" --mla-decode-to-gfx950 |
    "$build/bin/mla-translate" --mla-to-hsaco -o "$out/kernel.hsaco"
  end=$(date +%s%N)
  times+=($(((end - start) / 1000000)))
done
median_ms=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "compile $example -> hsaco: median ${median_ms} ms over $runs runs"
