"""Reads `mla-translate --kernel-report` of an artifact and fails unless the
partial kernel's main loop keeps up with at least the given shares of a
CU's HBM bandwidth (x_hbm overlap and serial, docs/performance.md): a floor
under the static profile, so that a change which makes the loop issue
more per cache byte shows up. Prints the figures it read."""
import re
import sys

min_overlap, min_serial = float(sys.argv[1]), float(sys.argv[2])
report = sys.stdin.read()
partial = report.split("kernel mla_partial_decode", 1)[-1].split("\nkernel ", 1)[0]
m = re.search(r"main_loop_hbm .*x_hbm overlap=([0-9.]+) serial=([0-9.]+) "
              r"bytes_from=(\w+)", partial)
if not m:
    print("no main_loop_hbm line for mla_partial_decode")
    sys.exit(1)
overlap, serial, source = float(m.group(1)), float(m.group(2)), m.group(3)
ok = overlap >= min_overlap and serial >= min_serial and source == "tile"
print(f"x_hbm overlap={overlap:.2f} (>= {min_overlap}) serial={serial:.2f} "
      f"(>= {min_serial}) bytes_from={source}: {'ok' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
