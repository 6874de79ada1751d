#!/usr/bin/env bash
# Compiles the artifacts bench/h200/run.sh runs on the H200, with the
# project's mla-compile (sm_90a PTX; no CUDA toolkit involved): the three
# formats at H = 16 and 128 (the timed shapes), more head counts and paged
# caches for the checks. Usage: bench/h200/compile.sh [OUT_DIR]
# (default bench/h200/artifacts, git-ignored; run.sh's call carries it).
# OUT_DIR/runtime-src gets the runtime's sources beside the artifacts, so
# that ab.sh times each folder with its own runtime (a change may be half
# kernel, half runtime).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bench/h200/artifacts}
compile=${BUILD:-$root/build}/bin/mla-compile
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# examples/decode_<format>.mlir with H heads (their shapes say 16).
variant() { sed "s/?x16x/?x$2x/g" "$root/examples/$1.mlir" > "$tmp/$3.mlir"; }
for fmt in bf16 fp8 mxfp4; do
  for heads in 16 32 64 128; do
    variant "decode_$fmt" "$heads" "${fmt}_h$heads"
  done
done
# For sequences of 4 query tokens (the q_len 4 shape): NAME_qN is compiled
# with --query-tokens N.
for fmt in bf16 fp8 mxfp4; do
  variant "decode_$fmt" 16 "${fmt}_h16_q4"
done
variant decode_fp8_paged 16 fp8_h16_p64
# 64 heads, pages of 16 rows (the example's cache is ?x64x576xf8E4M3FN).
sed "s/?x64x576xf8/?xPAGEx576xf8/g; s/?x16x/?x64x/g; s/?xPAGEx/?x16x/g" \
  "$root/examples/decode_fp8_paged.mlir" > "$tmp/fp8_h64_p16.mlir"
# Paged bf16 and mxfp4 (pages of P rows) from the contiguous examples: the
# cache gains the page dimension, the page table two operands.
paged() { # FORMAT HEADS P NAME
  sed -E "s/\?x16x/?x$2x/g; s/\?x(576xbf16|288xi8|18xf8E8M0FNU)>/?x$3x\1>/g
    s/(%kv_indptr: tensor<\?xi32>)\)/\1, %kv_indices: tensor<?xi32>, %kv_last_page_len: tensor<?xi32>)/
    s/^( *)(\{kv_format)/\1pages(%kv_indices, %kv_last_page_len : tensor<?xi32>, tensor<?xi32>)\n\1\2/" \
    "$root/examples/decode_$1.mlir" > "$tmp/$4.mlir"
}
paged bf16 32 1 bf16_h32_p1
paged mxfp4 128 256 mxfp4_h128_p256
paged mxfp4 16 16 mxfp4_h16_p16
for f in "$tmp"/*.mlir; do
  name=$(basename "$f" .mlir)
  tokens=()
  [[ $name =~ _q([1-4])$ ]] && tokens=(--query-tokens "${BASH_REMATCH[1]}")
  "$compile" --target h200 --no-emu "${tokens[@]}" "$f" -o "$out/$name.mla"
done
rm -rf "$out/runtime-src" && mkdir "$out/runtime-src"
cp -r "$root/runtime" "$root/include" "$out/runtime-src/"
ls "$out"
