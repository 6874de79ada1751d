"""Where a decode's time goes between its kernels, on the GPU machine.

Replays a CUDA graph of decodes (as bench.py times them: the cache rotated
over copies larger than the L2) under the PyTorch profiler and prints, per
shape, the time a call takes and the median time each kernel runs after
the kernel before it ends. With programmatic dependent launch a kernel
starts while its predecessor runs and waits for it: its own span says
little, its end after the predecessor's says what it costs.

  python3 bench/h200/timeline.py --lib LIB --artifact fp8_h16.mla \\
      [--format fp8] [--heads 16] B:KV [B:KV ...]
"""
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import mla_runtime  # noqa: E402

REPLAYS = 4


def kernel_spans(graph):
    """(start, end, name) of every kernel of REPLAYS replays, in µs."""
    activity = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activity) as prof:
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
    spans = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
             if e.get("cat") == "kernel"]
    return sorted(spans)


def main():
    args = bench.shape_tool_args(__doc__.splitlines()[0])
    rt = mla_runtime.Runtime(args.lib)
    kernel, _ = rt.load(args.artifact)
    for shape in args.shapes:
        B, L, batch = bench.shape_batch(args, shape)
        size = bench.cache_bytes(args.format, B * L)
        copies = max(1, min(16, -(-4 * bench.L2_BYTES // size)))
        ours = bench.Ours(rt, kernel, batch, copies)
        per_graph = max(8, copies)
        graph = bench.captured_graph(ours, per_graph)
        spans = kernel_spans(graph)
        after = {}
        for (_, prev_end, _), (start, end, name) in zip(spans, spans[1:]):
            kind = name.split("(")[0]
            after.setdefault(kind, []).append(end - max(start, prev_end))
        call = (spans[-1][1] - spans[0][0]) / (REPLAYS * per_graph)
        parts = "; ".join(f"{k} {statistics.median(v):.2f}"
                          for k, v in sorted(after.items()))
        print(f"{args.format} B={B} kv={L}: {call:.2f} us a call; "
              f"median us after the kernel before: {parts}", flush=True)
        rt.destroy_plan(ours.plan)
        del ours, graph


if __name__ == "__main__":
    main()
