#!/usr/bin/env bash
# The H200 benchmark in one command, for the GPU machine (no LLVM/MLIR
# there): builds the runtime alone (runtime/, any C++17 compiler), then
# checks and times the artifacts bench/h200/compile.sh made (bench.py).
# Results go to $OUT (the device tool's folder) or bench/h200/results.
# Usage: bench/h200/run.sh [bench.py options]; NCU=fp8:256:8192:16:1 bench/h200/run.sh
# (NCU_SOURCE=1: where the partial kernel's warps wait, per SASS instruction);
# RANDOM_CASES=N: the random batches checked besides the fixed ones (150);
# REQUIRE_GPU=H200: nothing run (exit 3) on another GPU (require-gpu.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/bench/h200/require-gpu.sh"
out=${OUT:-$root/bench/h200/results}
build=/tmp/mla-runtime-build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem \
  --format=csv,noheader || true
cmake -S "$root/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  > "$build.configure.log" || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" > "$build.log" || { cat "$build.log"; exit 1; }
# The artifacts checked: bench.py's --artifacts where given.
artifacts=$root/bench/h200/artifacts
args=("$@")
for i in "${!args[@]}"; do
  [ "${args[$i]}" = --artifacts ] && artifacts=${args[$((i + 1))]:-$artifacts}
done
# What ptxas makes of the PTX (the driver JITs the same): registers, spills,
# shared memory per kernel.
export PATH=$PATH:/usr/local/cuda/bin
if command -v ptxas > /dev/null; then
  for format in fp8 bf16 mxfp4; do
    tar xOf "$artifacts/${format}_h16.mla" kernels.ptx > "/tmp/${format}_h16.ptx" ||
      continue
    ptxas -arch=sm_90a -v "/tmp/${format}_h16.ptx" -o "/tmp/${format}_h16.cubin" 2>&1 |
      grep -E "Compiling|Used|spill" || true
  done
fi
# NCU=FORMAT:B:KV:H:Q_LEN: the partial kernel of that one shape under
# Nsight Compute (DRAM throughput and bytes; the clocks left alone).
# NCU_SECTIONS="WarpStateStats Occupancy ..." profiles one launch with
# those sections instead (stall reasons, occupancy).
profile=()
if [ -n "${NCU:-}" ]; then
  what=(--metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,gpu__time_duration.sum -c 3)
  if [ -n "${NCU_SECTIONS:-}" ]; then
    what=(-c 1); for s in $NCU_SECTIONS; do what+=(--section "$s"); done
  fi
  # NCU_METRICS=a,b,...: those metrics as well (e.g. the stall reasons).
  [ -n "${NCU_METRICS:-}" ] && what+=(--metrics "$NCU_METRICS")
  # NCU_SOURCE=1: one launch past the warm-up, its warps sampled every 32
  # cycles, each SASS instruction's stall samples summed by stalls.py.
  if [ -n "${NCU_SOURCE:-}" ]; then
    what=(-s 40 -c 1 --warp-sampling-interval 0 --section SourceCounters
          --section WarpStateStats -o "$out/ncu-source" -f)
  fi
  profile=(ncu --clock-control none "${what[@]}" -k regex:mla_partial_decode)
  set -- --skip-check --launches 5 --only "$NCU" "$@"
fi
mkdir -p "$out"
PYTHONUNBUFFERED=1 "${profile[@]}" python3 "$root/bench/h200/bench.py" \
  --lib "$build/lib/libMLARuntime.so" \
  --artifacts "$root/bench/h200/artifacts" --out "$out" \
  --random "${RANDOM_CASES:-150}" "$@"
if [ -n "${NCU:-}" ] && [ -n "${NCU_SOURCE:-}" ]; then
  ncu --import "$out/ncu-source.ncu-rep" --page source --csv \
    --print-source sass > "$out/ncu-source.csv"
  python3 "$root/bench/h200/stalls.py" "$out/ncu-source.csv"
fi
