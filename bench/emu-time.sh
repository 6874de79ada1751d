#!/usr/bin/env bash
# Wall time of one emu run (compile + execute + check) of the fp8 gfx950
# kernels: bs = 4, kv_len = 1024, q_len 1, 16 heads.
#   bench/emu-time.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
start=$(date +%s%N)
"$build/bin/mla-run" --backend emu --generate --format fp8 --batch 4 \
  --kv-len 1024 --q-len 1 --heads 16 --seed 1 | grep -E "rel_err|PASS|FAIL"
end=$(date +%s%N)
echo "emu fp8 bs=4 kv_len=1024: $(((end - start) / 1000000)) ms"
