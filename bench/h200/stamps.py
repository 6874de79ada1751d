"""Where a one-tile decode's time goes inside the sm_90a kernels, on the GPU
machine.

Copies an fp8 artifact (its partial kernel's tiles come by bulk copies)
with its PTX instrumented: thread 0 of every partial-kernel block writes
%globaltimer at its start (P0), after its griddepcontrol.wait (P1), as it
expects its first tile's bytes (P2: the work list's dependent loads done),
after its last tile's mbarrier wait (P3: the copies and Q's load done), at
its first global store (P4: the tile's compute and the epilogue's
reductions done) and at its end (P5), and its SM; the combine's blocks of
head block 0 at their start, after their wait and at their end. Then
replays a CUDA graph of decodes (as bench.py times them, one cache copy)
and prints the phases' medians over the busy blocks, in µs from the first
block's start (the last call of the graph).

The stamps go to the partial workspace, so every sequence must be a single
work item (written by the partial kernel directly): the script refuses a
shape whose plan splits a sequence. Measurement only: the instrumented
kernels are never shipped.

  python3 bench/h200/stamps.py --lib LIB --artifact fp8_h16.mla \\
      [--heads 16] B:KV [B:KV ...]
"""
import io
import json
import os
import re
import statistics
import sys
import tarfile
import tempfile
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import mla_runtime  # noqa: E402

SLOT = 64           # bytes of stamps a block
COMBINE_AT = 32768  # the combine's stamps, after the partial kernel's blocks'
PER_GRAPH = 8

KERNELS = ("mla_partial_decode", "mla_combine")


def stamp(k):
    return ["\tmov.u64 %dbgt, %globaltimer;",
            f"\t@%dbgp st.global.u64 [%dbgb+{8 * k}], %dbgt;"]


def partial_out_param(manifest, kernel):
    """The PTX parameter of `kernel`'s partial_out pointer (its memref's
    aligned pointer, the second 8-byte field): the stamps' base."""
    for k in manifest["kernels"]:
        if k["name"] == kernel:
            arg = next(a for a in k["args"] if a["name"] == "partial_out")
            return f"{kernel}_param_{arg['kernarg_fields'][1][0] // 8}"
    sys.exit(f"stamps: the artifact has no {kernel}")


def prologue(kernel, param):
    lines = [f"\tld.param.b64 %dbgb, [{param}];",
             "\tcvta.to.global.u64 %dbgb, %dbgb;",
             "\tmov.u32 %dbgr, %ctaid.x;",
             f"\tmul.wide.u32 %dbgw, %dbgr, {SLOT};",
             "\tadd.s64 %dbgb, %dbgb, %dbgw;",
             "\tmov.u32 %dbgr, %tid.x;"]
    if kernel == "mla_combine":
        lines += [f"\tadd.s64 %dbgb, %dbgb, {COMBINE_AT};",
                  "\tmov.u32 %dbgs, %ctaid.y;",
                  "\tor.b32 %dbgr, %dbgr, %dbgs;"]
    lines.append("\tsetp.eq.u32 %dbgp, %dbgr, 0;")
    if kernel == "mla_partial_decode":  # the block's SM, in word 7
        lines += ["\tmov.u32 %dbgs, %smid;",
                  "\t@%dbgp st.global.u32 [%dbgb+56], %dbgs;"]
    return lines


def instrument(ptx, params):
    """The PTX with the stamps (`params`: each kernel's stamp base); fails
    where an anchor is missing."""
    out, kernel, seen = [], None, set()
    lines = ptx.split("\n")
    i = 0
    while i < len(lines):
        line, text = lines[i], lines[i].strip()
        entry = re.match(r"\.visible \.entry (\w+)\(", line)
        if entry:
            kernel = entry.group(1)
        if kernel in KERNELS and re.match(r"\.reg \.b64\s+%rd<", text):
            out += [line, "\t.reg .b64 %dbgb, %dbgt, %dbgw;",
                    "\t.reg .b32 %dbgr, %dbgs;", "\t.reg .pred %dbgp;"]
            i += 1
            continue
        if kernel in KERNELS and text == "griddepcontrol.wait;" and \
                (kernel, "wait") not in seen:
            out += prologue(kernel, params[kernel]) + stamp(0) + [line] + stamp(1)
            seen.add((kernel, "wait"))
        elif kernel == "mla_partial_decode" and \
                text.startswith("mbarrier.arrive.expect_tx") and \
                (kernel, "expect") not in seen:
            out += stamp(2) + [line]
            seen.add((kernel, "expect"))
        elif kernel == "mla_partial_decode" and text == "DONE:" and \
                (kernel, "landed") not in seen:
            out += [line, lines[i + 1]] + stamp(3)  # after the asm's "}"
            seen.add((kernel, "landed"))
            i += 1
        elif kernel == "mla_partial_decode" and text.startswith("st.global") \
                and (kernel, "landed") in seen and \
                (kernel, "store") not in seen:
            out += stamp(4) + [line]
            seen.add((kernel, "store"))
        elif kernel in KERNELS and text == "ret;":
            out += stamp(5 if kernel == "mla_partial_decode" else 2) + [line]
            seen.add((kernel, "ret"))
        else:
            out.append(line)
        i += 1
    wanted = {("mla_partial_decode", a)
              for a in ("wait", "expect", "landed", "store", "ret")}
    wanted |= {("mla_combine", "wait"), ("mla_combine", "ret")}
    if not wanted <= seen:
        sys.exit(f"stamps: anchors not found: {sorted(wanted - seen)} "
                 "(fp8's bulk-copy kernels only)")
    return "\n".join(out)


def instrumented_artifact(path, directory):
    with tarfile.open(path) as t:
        names = t.getnames()
        files = {n: t.extractfile(n).read() for n in names}
    manifest = json.loads(files["manifest.json"])
    params = {k: partial_out_param(manifest, k) for k in KERNELS}
    grid = next(int(k["grid"][0]) for k in manifest["kernels"]
                if k["name"] == KERNELS[0])
    if grid * SLOT > COMBINE_AT:
        sys.exit(f"stamps: a grid of {grid} blocks overruns the stamps")
    ptx = instrument(files["kernels.ptx"].decode(), params).encode()
    files["kernels.ptx"] = ptx
    for f in manifest["files"]:
        if f["name"] == "kernels.ptx":
            f["bytes"], f["crc32"] = len(ptx), zlib.crc32(ptx)
    files["manifest.json"] = json.dumps(manifest, indent=1).encode()
    out = os.path.join(directory, os.path.basename(path))
    with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
        for n in names:
            info = tarfile.TarInfo(n)
            info.size, info.mode = len(files[n]), 0o644
            t.addfile(info, io.BytesIO(files[n]))
    return out, grid


def report(B, L, grid, words):
    part = [words[8 * j:8 * j + 8] for j in range(grid)]
    base = COMBINE_AT // 8
    comb = [words[base + 8 * j:base + 8 * j + 3] for j in range(min(B, 64))]
    t0 = min(p[0] for p in part if p[0])
    busy = [p for p in part if p[2]]

    def med(i, j):
        return statistics.median((p[j] - p[i]) / 1e3 for p in busy)

    def at(vals, f):
        return (f(vals) - t0) / 1e3
    line = (f"B={B} kv={L}: {len(busy)} busy blocks, last start "
            f"{at([p[0] for p in part if p[0]], max):.2f}; phases (median): "
            f"wait {med(0, 1):.2f}, work list {med(1, 2):.2f}, "
            f"tiles+Q {med(2, 3):.2f}, compute {med(3, 4):.2f}, "
            f"stores {med(4, 5):.2f}; last busy end "
            f"{at([p[5] for p in busy], max):.2f}")
    # Busy blocks that share their SM with another busy block: their
    # median end against the others'.
    sms = [p[7] & 0xFFFFFFFF for p in busy]
    shared = [p for p, sm in zip(busy, sms) if sms.count(sm) > 1]
    alone = [p for p, sm in zip(busy, sms) if sms.count(sm) == 1]
    for name, group in (("sharing an SM", shared), ("alone", alone)):
        if group:
            line += (f"; {len(group)} {name} end (median) "
                     f"{at([statistics.median(p[5] for p in group)], max):.2f}")
    # Where the hardware put the blocks (two an SM): the first half on as
    # many SMs, or j beside j + grid / 2, or beside j + 1?
    every, half = [p[7] & 0xFFFFFFFF for p in part], grid // 2
    line += (f"; blocks 0-{half - 1} on {len(set(every[:half]))} SMs, "
             f"block j and j + {half} on one for "
             f"{sum(a == b for a, b in zip(every, every[half:]))}, j and j + 1 "
             f"for {sum(a == b for a, b in zip(every, every[1:]))}")
    comb = [c for c in comb if c[0]]
    if comb:
        line += (f"; combine start {at([c[0] for c in comb], min):.2f}, "
                 f"wait done {at([c[1] for c in comb], max):.2f}, end "
                 f"{at([c[2] for c in comb], max):.2f}")
    return line


def main():
    args = bench.shape_tool_args(__doc__.splitlines()[0])
    if args.format != "fp8":
        sys.exit("stamps: fp8 artifacts only (bulk-copy kernels)")
    rt = mla_runtime.Runtime(args.lib)
    with tempfile.TemporaryDirectory() as tmp:
        path, grid = instrumented_artifact(args.artifact, tmp)
        kernel, _ = rt.load(path)
    for shape in args.shapes:
        B, L, batch = bench.shape_batch(args, shape)
        ours = bench.Ours(rt, kernel, batch)
        items = ours.info.num_work_items
        if items != B:
            sys.exit(f"stamps: B={B} kv={L} splits its sequences "
                     f"({items} items): one item a sequence only")
        if ours.workspace.numel() < COMBINE_AT + 64 * SLOT:
            sys.exit(f"stamps: B={B} kv={L}: workspace too small")
        graph = bench.captured_graph(ours, PER_GRAPH)
        for _ in range(3):
            ours.workspace.zero_()
            graph.replay()
            torch.cuda.synchronize()
            words = ours.workspace[:COMBINE_AT + 64 * SLOT].view(torch.int64)
            print(report(B, L, grid, words.cpu().tolist()), flush=True)
        rt.destroy_plan(ours.plan)
        del ours, graph


if __name__ == "__main__":
    main()
