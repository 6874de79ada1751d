#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's warp-state samples per
SASS instruction (`ncu --import R --page source --csv --print-source sass`;
run.sh writes it with NCU=... NCU_SOURCE=1).

Prints the samples by stall reason, the instructions that hold the most
samples, and the samples of each window of consecutive instructions (the
kernel's phases lie in order: work list, copies, Q, the KV loop, the
epilogue) with the opcodes that mark it.

Usage: stalls.py SOURCE.csv [--top N] [--window W]
"""
import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
# Opcodes that name a phase: global and shared memory, barriers, tensor
# cores, shuffles, special functions.
LANDMARKS = ("LDG", "STG", "LDS", "STS", "LDSM", "BAR", "SYNCS", "UBLKCP",
             "HMMA", "HGMMA", "SHFL", "MUFU", "EXIT")


def read(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        sys.exit(f"stalls.py: cannot read {path}: {e}")
    # The first row names the kernel; the header follows.
    start = next((i for i, r in enumerate(rows) if SAMPLES in r), None)
    if start is None:
        sys.exit(f"stalls.py: no '{SAMPLES}' column in {path}: not ncu's "
                 "source page (--page source --csv --print-source sass)")
    header = rows[start]
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header
               if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    for r in rows[start + 1:]:
        if len(r) < len(header):
            continue
        num = lambda name: int(float(r[col[name]] or 0))
        out.append({
            "sass": r[col["Source"]].strip(),
            "samples": num(SAMPLES),
            "executed": num(EXECUTED),
            "reasons": {h[len("stall_"):]: num(h) for h in reasons},
        })
    return out


def opcode(sass):
    words = [w for w in sass.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else ""


def reason_totals(instructions):
    """Samples by stall reason over `instructions`."""
    totals = {}
    for i in instructions:
        for k, v in i["reasons"].items():
            totals[k] = totals.get(k, 0) + v
    return totals


def top_reasons(reasons, n):
    ranked = sorted(reasons.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {v}" for k, v in ranked if v)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--window", type=int, default=40)
    a = p.parse_args()
    ins = read(a.csv)
    if not ins:
        sys.exit(f"stalls.py: no SASS rows in {a.csv}")
    total = sum(i["samples"] for i in ins) or 1
    print(f"{len(ins)} instructions, {total} samples")
    print("by reason:", top_reasons(reason_totals(ins), 8))
    print(f"\nthe {a.top} instructions with the most samples "
          "(index, % of samples, executions, reasons, SASS):")
    ranked = sorted(range(len(ins)), key=lambda n: -ins[n]["samples"])
    for n in sorted(ranked[:a.top]):
        i = ins[n]
        print(f"{n:5d} {100 * i['samples'] / total:5.1f}% {i['executed']:7d} "
              f"[{top_reasons(i['reasons'], 2)}] {i['sass'][:70]}")
    print(f"\nwindows of {a.window} instructions with >= 1% of the samples:")
    for s in range(0, len(ins), a.window):
        seg = ins[s:s + a.window]
        samples = sum(i["samples"] for i in seg)
        if samples * 100 < total:
            continue
        reasons = reason_totals(seg)
        marks = sorted({opcode(i["sass"]) for i in seg} & set(LANDMARKS))
        most = max(i["executed"] for i in seg)
        print(f"{s:5d} {100 * samples / total:5.1f}% exec<={most:7d} "
              f"[{top_reasons(reasons, 3)}] {' '.join(marks)}")


if __name__ == "__main__":
    main()
