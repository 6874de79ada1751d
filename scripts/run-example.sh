#!/usr/bin/env bash
# The main job: parse and verify the example mla.decode, lower it for the host,
# and run it on generated inputs, checked against the float64 reference.
set -euo pipefail
build=${1:-build}
bin="$build/bin"

echo "== mla-opt: parse, verify and print examples/decode_fp8.mlir"
"$bin/mla-opt" examples/decode_fp8.mlir

echo "== mla-opt --mla-decode-to-cpu: lowers to the LLVM dialect"
"$bin/mla-opt" examples/decode_fp8.mlir --mla-decode-to-cpu | grep -c "llvm\." |
  xargs printf '   %s LLVM dialect ops\n'

echo "== mla-run: fp8 KV, a variable-length batch, 2 query tokens per sequence"
"$bin/mla-run" --generate --format fp8 --kv-len 1000,17,1,0 --q-len 2 --heads 16 --seed 1

echo "== mla-run: the same batch through planned split-KV and KV tiles with online softmax"
"$bin/mla-run" --generate --format fp8 --kv-len 1000,17,1,0 --q-len 2 --heads 16 --seed 1 --pipeline split

echo "== mla-opt --mla-decode-to-gfx950 | mla-translate --mla-to-hsaco: the gfx950 code object"
"$bin/mla-opt" examples/decode_fp8.mlir --mla-decode-to-gfx950 |
  "$bin/mla-translate" --mla-to-hsaco -o "$build/decode_fp8.hsaco"
"$bin/mla-translate" --kernel-report "$build/decode_fp8.hsaco"

echo "== mla-run --backend emu: those gfx950 kernels on the CPU, checked against the reference"
echo "   (--kv-traffic: where the cache bytes come from; HBM reads per byte = 1)"
"$bin/mla-run" --backend emu --generate --format fp8 --kv-len 1000,17,1,0 --q-len 2 --heads 16 --seed 1 --kv-traffic
