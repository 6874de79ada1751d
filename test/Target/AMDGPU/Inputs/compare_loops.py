"""Compares the main loops of two `mla-translate --kernel-report` outputs:
usage: compare_loops.py BASE.txt OTHER.txt TOLERANCE. For the partial
kernel's HBM estimates (x_hbm overlap and serial), prints whether OTHER's is
within TOLERANCE (a fraction) below BASE's; exits 1 if either is not."""
import re
import sys


def estimates(path):
    text = open(path).read()
    block = text.split("kernel mla_partial_decode", 1)[1].split("\nkernel ", 1)[0]
    m = re.search(r"x_hbm overlap=([0-9.]+) serial=([0-9.]+)", block)
    return {"overlap": float(m.group(1)), "serial": float(m.group(2))}


base, other, tolerance = estimates(sys.argv[1]), estimates(sys.argv[2]), float(sys.argv[3])
bad = 0
for key in ("overlap", "serial"):
    ok = other[key] >= base[key] * (1 - tolerance)
    bad += not ok
    print(f"{key} {'within' if ok else 'NOT within'} {tolerance:.0%}: "
          f"{other[key]} vs {base[key]}")
sys.exit(1 if bad else 0)
