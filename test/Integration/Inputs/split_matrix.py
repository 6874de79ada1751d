"""Runs mla-run's split pipeline over forced splits x KV tiles x q_len for one
format and fails unless every combination is within tolerance.

Usage: split_matrix.py MLA_RUN FORMAT [STRIDE]

STRIDE > 1 runs one combination in STRIDE, the choice rotating with the
split count so that every split count, tile and q_len still runs (lit's
%{sweep-stride}: 3 under ASan, whose runs take 3x as long; 1 otherwise).

The batch mixes the edge lengths 0 and 1, lengths below the split count, and
lengths that are not multiples of any tile; every other combination uses
sharp attention (score std ~ 4) so a misplaced mask or a wrong rescale shows.
The split level runs on the host here (--target host): its math, not a GPU
kernel's limits (bf16 tiles of 64 rows exceed the gfx950 kernel's LDS).
"""
import subprocess
import sys

mla_run, fmt = sys.argv[1], sys.argv[2]
stride = int(sys.argv[3]) if len(sys.argv) > 3 else 1
heads = {"bf16": 16, "fp8": 32, "mxfp4": 64}[fmt]
bad = []
count = 0
ran = 0
for s, splits in enumerate((1, 2, 3, 7, 32, 64)):
    for tile in (16, 32, 64):
        for q_len in (1, 4):
            count += 1
            if (count - 1 + s) % stride:
                continue
            ran += 1
            q_scale = "10000" if count % 2 else "1"
            cmd = [mla_run, "--generate", "--format", fmt, "--pipeline", "split",
                   "--target", "host", "--splits", str(splits), "--kv-tile", str(tile),
                   "--kv-len", "0,1,5,17,100,1000", "--q-len", str(q_len),
                   "--heads", str(heads), "--seed", str(count),
                   "--q-scale", q_scale]
            r = subprocess.run(cmd, capture_output=True, text=True)
            err = [l for l in r.stdout.splitlines() if l.startswith("rel_err")]
            print(f"splits={splits:2d} tile={tile:2d} q_len={q_len} "
                  f"q_scale={q_scale:>5}: {err[0] if err else '?'}")
            if r.returncode != 0:
                bad.append(" ".join(cmd) + "\n" + r.stdout + r.stderr)
if ran * stride != count:
    print(f"FAILED: ran {ran} of {count} combinations at stride {stride}")
    sys.exit(1)
for b in bad:
    print("FAILED:", b)
print(f"{fmt}: {ran - len(bad)} of {ran} combinations within tolerance")
sys.exit(1 if bad else 0)
