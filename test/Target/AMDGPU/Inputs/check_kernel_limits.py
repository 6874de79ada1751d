"""Reads `mla-translate --kernel-report` output and fails unless every kernel
meets the gfx950 limits: no scratch (so no spill reaches memory: a VGPR the
allocator moves out of the 256 architected ones may only go to an AGPR of
the unified file), LDS <= 160 KiB, VGPR+AGPR <= 512, a flat workgroup size
of 256. Prints one line per kernel."""
import re
import sys

report = sys.stdin.read()
kernels = re.split(r"^kernel ", report, flags=re.M)[1:]
bad = 0
for block in kernels:
    name = block.split()[0]
    nums = lambda key: int(re.search(key + r" (\d+)", block).group(1))
    regs = int(re.search(r"vector_registers (\d+) of 512", block).group(1))
    checks = {
        "scratch_bytes == 0": nums("scratch_bytes") == 0,
        "spills only to AGPRs": nums("spills vgpr") == 0
        or (nums("scratch_bytes") == 0 and regs + nums("spills vgpr") <= 512),
        "lds_bytes <= 163840": nums("lds_bytes") <= 163840,
        "vgpr+agpr <= 512": regs <= 512,
        "flat workgroup size 256": nums("max_flat_workgroup_size") == 256,
    }
    failed = [c for c, ok in checks.items() if not ok]
    bad += len(failed)
    print(f"{name}: {'ok' if not failed else 'FAILED ' + ', '.join(failed)}")
sys.exit(1 if bad or not kernels else 0)
