"""mla.decode on an H200: correctness against float64 and timings beside peers.

Run by bench/h200/run.sh on the GPU machine (docs/performance.md, "sm_90a on
the H200"). It loads the artifacts compiled on the build machine
(bench/h200/compile.sh) into the MLIR-free runtime's cuda backend through its
C API, and in the same process:

  1. measures the read bandwidth of the card with a plain streaming kernel;
  2. checks every artifact on random batches (variable lengths, q_len 1..4,
     sharp attention, paged caches) against a float64 reference, one
     captured launch with a device plan replaying batches of other sizes,
     and (--random N) N random batches on random artifacts: empty
     sequences and tile edges, q_len mixed in a batch, outlier cache rows,
     pools with spare rows or pages of NaN codes;
  3. times the shapes of the issue for our kernels, a PyTorch
     implementation and the seed's Triton kernel (fp8): CUDA events around
     replays of a CUDA graph of 8 or more calls (the device time without the
     host's launch gaps; our launches are graph-capturable), >= 50 calls
     after 0.1 s of warm-up calls, the cache rotated over copies larger
     than the L2; ours also launched eagerly from the host. Then writes
     the table.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mla_runtime  # noqa: E402

DQK, DV = 576, 512
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
TOLERANCE = {"bf16": 4e-3, "fp8": 5e-3, "mxfp4": 5e-3}
L2_BYTES = 60 << 20


# --- inputs ------------------------------------------------------------------

def make_cache(fmt, rows, gen, dqk=DQK, outliers=0):
    """A random cache of `rows` rows in `fmt`: (kv, kv_scale). `outliers`
    random rows are 8 times larger (fp8: up to e4m3's 448)."""
    dev = "cuda"
    picked = torch.randint(0, max(rows, 1), (outliers if rows else 0,),
                           device=dev, generator=gen)
    if fmt == "bf16":
        kv = torch.randn(rows, dqk, device=dev, generator=gen)
        kv[picked] *= 8.0
        return kv.bfloat16(), None
    if fmt == "fp8":
        codes = (torch.randn(rows, dqk, device=dev, generator=gen) * 4.0)
        codes[picked] = (codes[picked] * 8.0).clamp(-448.0, 448.0)
        return (codes.to(torch.float8_e4m3fn),
                torch.tensor([0.25], device=dev, dtype=torch.float32))
    codes = torch.randint(0, 256, (rows, dqk // 2), device=dev,
                          dtype=torch.uint8, generator=gen)
    scales = torch.randint(124, 129, (rows, dqk // 32), device=dev,
                           dtype=torch.uint8, generator=gen)
    scales[picked] += 3
    return codes, scales


def nan_rows(fmt, rows, like):
    """`rows` cache rows of NaN codes (mxfp4: NaN block scales) shaped as
    `like`'s rows: (kv rows, scale rows or None)."""
    shape = (rows,) + tuple(like[0].shape[1:])
    if fmt == "mxfp4":
        return (torch.full(shape, 255, dtype=torch.uint8, device="cuda"),
                torch.full((rows,) + tuple(like[1].shape[1:]), 255,
                           dtype=torch.uint8, device="cuda"))
    nan = torch.full(shape, float("nan"), device="cuda").to(like[0].dtype)
    return nan, None


_TABLES = {}


def e2m1_table(device, dtype):
    """The 16 E2M1 values on the device, made once (a graph capture may not
    copy from the host)."""
    key = (str(device), dtype)
    if key not in _TABLES:
        _TABLES[key] = torch.tensor(E2M1, device=device, dtype=dtype)
    return _TABLES[key]


def dequantize(fmt, kv, scale, dtype):
    """The cache's values (rows of Dqk) in `dtype`."""
    if fmt == "bf16":
        return kv.to(dtype)
    if fmt == "fp8":
        return kv.to(dtype) * scale.to(dtype)
    table = e2m1_table(kv.device, dtype)
    lo = table[(kv & 15).long()]
    hi = table[(kv >> 4).long()]
    rows, width = kv.shape[0], 2 * kv.shape[1]  # explicit: rows may be 0
    values = torch.stack([lo, hi], dim=-1).reshape(rows, width)
    blocks = torch.exp2(scale.to(dtype) - 127.0)
    return (values.view(rows, width // 32, 32) *
            blocks.unsqueeze(-1)).reshape(rows, width)


def make_batch(fmt, heads, kv_lens, q_lens, seed, q_scale=1.0, page_size=0,
               outliers=0, spare=0):
    """Sequences of `kv_lens` rows and `q_lens` tokens. `spare`: rows (or,
    paged, pages) of NaN codes in the pool besides the batch's, never to be
    read."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    qo = [0]
    for n in q_lens:
        qo.append(qo[-1] + n)
    rows = sum(kv_lens)
    kv, scale = make_cache(fmt, rows, gen, outliers=outliers)
    q = (torch.randn(qo[-1], heads, DQK, device="cuda", generator=gen)
         * q_scale).bfloat16()
    batch = {"fmt": fmt, "heads": heads, "q": q, "kv": kv, "scale": scale,
             "qo": qo, "kv_lens": list(kv_lens), "page_size": page_size}
    kv_indptr = [0]
    for n in kv_lens:
        kv_indptr.append(kv_indptr[-1] + n)
    batch["kv_rows"] = kv_indptr  # the contiguous rows of each sequence
    if page_size == 0:
        batch["kv_indptr"] = kv_indptr
        if spare:
            nan_kv, nan_scale = nan_rows(fmt, spare, (kv, scale))
            batch["kv"] = torch.cat([kv, nan_kv])
            if fmt == "mxfp4":
                batch["scale"] = torch.cat([scale, nan_scale])
        return batch
    # Paged: each sequence's rows scattered into pages of a shuffled pool.
    pages = [max(0, -(-n // page_size)) for n in kv_lens]
    used_pages = sum(pages)
    total = used_pages + spare
    order = torch.randperm(total, generator=torch.Generator().manual_seed(seed))
    pool_kv, pool_scale = nan_rows(fmt, total * page_size, (kv, scale))
    indices, indptr, last, used = [], [0], [], 0
    for b, n in enumerate(kv_lens):
        for p in range(pages[b]):
            page = int(order[used + p])
            indices.append(page)
            first = kv_indptr[b] + p * page_size
            count = min(page_size, n - p * page_size)
            dst = slice(page * page_size, page * page_size + count)
            pool_kv[dst] = kv[first:first + count]
            if pool_scale is not None:
                pool_scale[dst] = scale[first:first + count]
        used += pages[b]
        indptr.append(used)
        last.append(n - (pages[b] - 1) * page_size if pages[b] else 0)
    batch.update(kv=pool_kv, scale=pool_scale if fmt == "mxfp4" else scale,
                 kv_indptr=indptr, last_page_len=last,
                 kv_indices=torch.tensor(indices or [0], dtype=torch.int32,
                                         device="cuda"),
                 contiguous_kv=kv, contiguous_scale=scale)
    return batch


# --- the float64 reference ---------------------------------------------------

def reference(batch, sm_scale, sample=None, dtype=torch.float64):
    """out [T, H, Dv] and lse [T, H] in float64 (or `dtype`) for the
    sequences in `sample` (all when None); the others stay NaN."""
    fmt = batch["fmt"]
    kv = batch.get("contiguous_kv", batch["kv"])
    scale = batch.get("contiguous_scale", batch["scale"])
    q, qo, rows = batch["q"], batch["qo"], batch["kv_rows"]
    T, H = q.shape[0], q.shape[1]
    out = torch.full((T, H, DV), float("nan"), dtype=dtype, device="cuda")
    lse = torch.full((T, H), float("nan"), dtype=dtype, device="cuda")
    seqs = range(len(qo) - 1) if sample is None else sample
    for b in seqs:
        k = dequantize(fmt, kv[rows[b]:rows[b + 1]],
                       None if scale is None else
                       (scale if fmt == "fp8" else scale[rows[b]:rows[b + 1]]),
                       dtype)
        n_q, n_kv = qo[b + 1] - qo[b], rows[b + 1] - rows[b]
        qs = q[qo[b]:qo[b + 1]].to(dtype)                  # [n_q, H, Dqk]
        s = torch.einsum("thd,nd->thn", qs, k) * sm_scale  # [n_q, H, n_kv]
        # Token i sees positions < n_kv - (n_q - 1 - i).
        pos = torch.arange(n_kv, device="cuda")
        limit = n_kv - (n_q - 1 - torch.arange(n_q, device="cuda"))
        s = s.masked_fill(pos[None, None, :] >= limit[:, None, None],
                          float("-inf"))
        m = torch.logsumexp(s, dim=-1)                     # [n_q, H]
        p = torch.exp(s - m[..., None]).nan_to_num(0.0)
        out[qo[b]:qo[b + 1]] = torch.einsum("thn,nd->thd", p, k[:, :DV])
        lse[qo[b]:qo[b + 1]] = m
    return out, lse


# --- our kernels through the runtime -----------------------------------------

class Ours:
    def __init__(self, rt, kernel, batch, copies=1):
        self.rt, self.kernel = rt, kernel
        qo, kv_indptr = batch["qo"], batch["kv_indptr"]
        self.plan, info, work = rt.plan(kernel, qo, kv_indptr,
                                        batch.get("last_page_len"))
        self.info = info
        dev = "cuda"
        self.work = torch.frombuffer(bytearray(work), dtype=torch.uint8).to(dev)
        self.workspace = torch.empty(max(1, info.workspace_bytes),
                                     dtype=torch.uint8, device=dev)
        self.qo = torch.tensor(qo, dtype=torch.int32, device=dev)
        self.kv_indptr = torch.tensor(kv_indptr, dtype=torch.int32, device=dev)
        self.last = (torch.tensor(batch["last_page_len"], dtype=torch.int32,
                                  device=dev)
                     if "last_page_len" in batch else None)
        T, H = batch["q"].shape[0], batch["q"].shape[1]
        self.out = torch.empty(T, H, DV, dtype=torch.bfloat16, device=dev)
        self.lse = torch.empty(T, H, dtype=torch.float32, device=dev)
        self.caches = [(batch["kv"], batch["scale"])]
        for _ in range(copies - 1):
            self.caches.append((batch["kv"].clone(),
                                None if batch["scale"] is None
                                else batch["scale"].clone()))
        self.args = [self._args(batch, kv, scale, info)
                     for kv, scale in self.caches]
        self.calls = 0

    def _args(self, batch, kv, scale, info):
        a = mla_runtime.DecodeArgs()
        a.q, a.kv = batch["q"].data_ptr(), kv.data_ptr()
        a.kv_scale = scale.data_ptr() if scale is not None else None
        a.qo_indptr, a.kv_indptr = self.qo.data_ptr(), self.kv_indptr.data_ptr()
        a.work_list = self.work.data_ptr()
        a.out, a.lse = self.out.data_ptr(), self.lse.data_ptr()
        a.workspace = self.workspace.data_ptr()
        a.workspace_bytes = self.workspace.numel()
        a.num_seqs = len(batch["qo"]) - 1
        a.num_tokens = batch["q"].shape[0]
        a.num_kv_rows = kv.shape[0]
        if self.last is not None:
            a.kv_indices = batch["kv_indices"].data_ptr()
            a.kv_last_page_len = self.last.data_ptr()
        return a

    def __call__(self):
        args = self.args[self.calls % len(self.args)]
        self.calls += 1
        self.rt.launch(self.kernel, self.plan, args,
                       torch.cuda.current_stream().cuda_stream)
        return self.out


# --- peers -------------------------------------------------------------------

def torch_decode(batch, sm_scale, copies=1):
    """Equal-length sequences, q_len tokens each: dequantize, bmm in bf16,
    softmax in f32 (what a PyTorch user would write)."""
    fmt, q, H = batch["fmt"], batch["q"], batch["heads"]
    B = len(batch["qo"]) - 1
    L = batch["kv_lens"][0]
    n_q = q.shape[0] // B
    caches = [(batch["kv"], batch["scale"])]
    for _ in range(copies - 1):
        caches.append((batch["kv"].clone(), None if batch["scale"] is None
                       else batch["scale"].clone()))
    pos = torch.arange(L, device="cuda")
    limit = L - (n_q - 1 - torch.arange(n_q, device="cuda"))
    mask = (pos[None, :] >= limit[:, None])                 # [n_q, L]
    calls = [0]

    def run():
        kv, scale = caches[calls[0] % len(caches)]
        calls[0] += 1
        k = dequantize(fmt, kv, scale, torch.bfloat16).view(B, L, DQK)
        qb = q.view(B, n_q * H, DQK)
        s = torch.bmm(qb, k.transpose(1, 2)).float() * sm_scale
        s = s.view(B, n_q, H, L).masked_fill(mask[None, :, None, :],
                                             float("-inf"))
        p = torch.softmax(s, dim=-1).to(torch.bfloat16).view(B, n_q * H, L)
        return torch.bmm(p, k[:, :, :DV]).view(B * n_q, H, DV)
    return run


def seed_decode(batch, sm_scale, copies=1):
    import seed_triton
    B = len(batch["qo"]) - 1
    caches = [(batch["kv"], batch["scale"])]
    for _ in range(copies - 1):
        caches.append((batch["kv"].clone(), batch["scale"].clone()))
    qo = torch.tensor(batch["qo"], dtype=torch.int32, device="cuda")
    kvp = torch.tensor(batch["kv_indptr"], dtype=torch.int32, device="cuda")
    calls = [0]

    def run():
        kv, scale = caches[calls[0] % len(caches)]
        calls[0] += 1
        return seed_triton.seed_decode_fp8(batch["q"], kv, scale, qo, kvp, B,
                                           sm_scale)
    return run


# --- measuring ---------------------------------------------------------------

# Calls before a timing: at least this long. The first ~30 ms of calls after
# a new cache is allocated beside freed ones ran slower on an H100 (fp8, B =
# 256, kv = 8192: 475 us, then 400 in every later timing; docs/performance.md);
# a decode in service reads a cache it has held for long.
WARMUP_SECONDS = 0.1


def warm_up(fn):
    """Calls `fn` (in doubling batches) for at least WARMUP_SECONDS."""
    start, calls = time.perf_counter(), 1
    while True:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() - start >= WARMUP_SECONDS:
            return
        calls *= 2


def median_ms(fn, launches=50):
    """Median milliseconds of one call of `fn`, launched from the host each
    time: the launch overhead counts when the GPU outruns the host."""
    warm_up(fn)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def shape_tool_args(description):
    """The command line of the per-shape tools (timeline.py, stamps.py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--lib", required=True, help="libMLARuntime.so")
    ap.add_argument("--artifact", required=True, help="an .mla file")
    ap.add_argument("--format", default="fp8")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("shapes", nargs="+", help="B:KV (q_len 1)")
    return ap.parse_args()


def shape_batch(args, shape):
    """B, kv and the batch of a per-shape tool's B:KV (q_len 1)."""
    B, L = (int(v) for v in shape.split(":"))
    return B, L, make_batch(args.format, args.heads, [L] * B, [1] * B,
                            seed=B * L + args.heads)


def captured_graph(fn, per_graph):
    """A CUDA graph of `per_graph` calls of `fn`, warmed up and replayed
    once."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def graph_median_ms(fn, launches=50, per_graph=10):
    """Median milliseconds of one call of `fn` replayed from a CUDA graph of
    `per_graph` calls (the device time without the host's launch gaps), over
    at least `launches` calls."""
    graph = captured_graph(fn, per_graph)
    warm_up(graph.replay)
    replays = max(5, -(-launches // per_graph))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for s, e in zip(starts, ends):
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    del graph
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) \
        / per_graph


def read_bandwidth():
    """Bytes per second a plain streaming read reaches: the sum of 4 GiB."""
    x = torch.ones(1 << 30, dtype=torch.float32, device="cuda")
    ms = median_ms(lambda: x.sum(), launches=20)
    del x
    return (4 << 30) / (ms * 1e-3)


def errors(out, lse, ref_out, ref_lse, rows):
    """rel_err ||out - ref|| / ||ref|| and the worst lse error past
    1e-4 + 1e-6 |lse| (<= 0 passes), over the token rows `rows`."""
    o = out[rows].to(torch.float64)
    r = ref_out[rows]
    rel = (torch.linalg.vector_norm(o - r) /
           torch.linalg.vector_norm(r).clamp_min(1e-30)).item()
    if lse is None:
        return rel, None
    l, rl = lse[rows].to(torch.float64), ref_lse[rows]
    both_inf = torch.isinf(l) & torch.isinf(rl)
    excess = ((l - rl).abs() - (1e-4 + 1e-6 * rl.abs())).masked_fill(both_inf,
                                                                     -1.0)
    return rel, excess.max().item()


def cache_bytes(fmt, rows, dqk=DQK):
    return rows * {"bf16": 2 * dqk, "fp8": dqk, "mxfp4": dqk // 2 + dqk // 32}[fmt]


def token_rows(batch, seqs):
    return torch.tensor([t for b in seqs
                         for t in range(batch["qo"][b], batch["qo"][b + 1])],
                        dtype=torch.long, device="cuda")


# --- the runs ----------------------------------------------------------------

def check_artifacts(rt, artifacts, log):
    """Random batches through every artifact against float64."""
    results = []
    rng = torch.Generator().manual_seed(7)
    for name, (kernel, info) in sorted(artifacts.items()):
        fmt = mla_runtime.FORMATS[info.kv_format]
        for trial in range(4):
            B = [1, 3, 8, 17][trial]
            q_len = 1 + trial % 4
            lens = torch.randint(1, 3000, (B,), generator=rng).tolist()
            q_scale = 30.0 if trial == 3 else 1.0  # sharp attention
            batch = make_batch(fmt, info.num_heads, lens, [q_len] * B,
                               seed=100 * trial + len(results), q_scale=q_scale,
                               page_size=info.page_size)
            ours = Ours(rt, kernel, batch)
            ours.out.fill_(float("nan"))
            ours.lse.fill_(float("nan"))
            ours()
            torch.cuda.synchronize()
            ref_out, ref_lse = reference(batch, info.sm_scale)
            rows = token_rows(batch, range(B))
            rel, lse_excess = errors(ours.out, ours.lse, ref_out, ref_lse, rows)
            ok = rel <= TOLERANCE[fmt] and lse_excess <= 0 and \
                not math.isnan(rel)
            results.append({"artifact": name, "B": B, "q_len": q_len,
                            "q_scale": q_scale, "rel_err": rel,
                            "lse_excess": lse_excess, "pass": ok})
            log(f"check {name:24s} B={B:3d} q_len={q_len} q_scale={q_scale:4g}"
                f" rel_err={rel:.3e} lse_excess={lse_excess:.2e} "
                f"{'PASS' if ok else 'FAIL'}")
            rt.destroy_plan(ours.plan)
    return results


def random_lengths(rng):
    """1..6 kv lengths: empty, the tile edges, short and long (to 9000)."""
    return [rng.choice([0, 1, 2, 63, 64, 65, 127, 128, 129,
                        rng.randint(1, 80), rng.randint(60, 3000),
                        rng.randint(3000, 9000)])
            for _ in range(rng.randint(1, 6))]


def check_random(rt, artifacts, log, count, seed):
    """`count` random valid batches on random artifacts against float64
    (what scripts/random-shapes.py draws for the emu, on the GPU): lengths
    from random_lengths, one q_len of 1..4 or one a sequence, sharp
    attention, outlier cache rows, pools with spare rows or pages of NaN
    codes. The same seed draws the same cases."""
    import random
    rng = random.Random(seed)
    results = []
    for case in range(count):
        name = rng.choice(sorted(artifacts))
        kernel, info = artifacts[name]
        fmt = mla_runtime.FORMATS[info.kv_format]
        lens = random_lengths(rng)
        q_lens = [rng.randint(1, 4)] * len(lens)
        if rng.random() < 0.5:
            q_lens = [rng.randint(1, 4) for _ in lens]
        q_scale = rng.choice([1.0, 1.0, 10.0, 30.0])
        outliers = rng.choice([0, 0, 1, 8])
        spare = rng.choice([0, 0, 1, 40])
        if sum(lens) == 0:
            spare = max(spare, 1)  # a pool of at least one row or page
        batch = make_batch(fmt, info.num_heads, lens, q_lens,
                           seed=rng.randint(0, 10**6), q_scale=q_scale,
                           page_size=info.page_size, outliers=outliers,
                           spare=spare)
        ours = Ours(rt, kernel, batch)
        ours.out.fill_(float("nan"))
        ours.lse.fill_(float("nan"))
        ours()
        torch.cuda.synchronize()
        ref_out, ref_lse = reference(batch, info.sm_scale)
        rel, excess = errors(ours.out, ours.lse, ref_out, ref_lse,
                             token_rows(batch, range(len(lens))))
        ok = rel <= TOLERANCE[fmt] and excess <= 0 and not math.isnan(rel)
        note = ""
        if not ok:  # how far float32 arithmetic itself lands from float64
            ref32 = reference(batch, info.sm_scale, dtype=torch.float32)
            rel32, excess32 = errors(ref32[0], ref32[1], ref_out, ref_lse,
                                     token_rows(batch, range(len(lens))))
            note = (f" (a float32 reference: rel_err={rel32:.3e} "
                    f"lse_excess={excess32:.2e})")
        results.append({"artifact": name, "kv_lens": lens, "q_lens": q_lens,
                        "q_scale": q_scale, "outliers": outliers,
                        "spare": spare, "rel_err": rel,
                        "lse_excess": excess, "pass": ok})
        log(f"random {case:3d} {name:16s} kv={lens} q_len={q_lens} "
            f"q_scale={q_scale:g} outliers={outliers} spare={spare} "
            f"rel_err={rel:.3e} lse_excess={excess:.2e} "
            f"{'PASS' if ok else 'FAIL'}{note}")
        rt.destroy_plan(ours.plan)
    return results


def check_device_plan(rt, artifacts, log, steps=5, max_seqs=8, max_kv=40000):
    """One captured launch with a device plan replays batches of different
    sizes: the plan kernel plans each on the GPU from the device indptrs
    (docs/runtime.md). Each step's output is checked against float64 and
    its status word must be 0. The last step is the largest batch (every
    sequence at max_kv / max_seqs rows): the most work items the plan's
    buffers must hold (more than the SMs: the persistent grid's)."""
    results = []
    rng = torch.Generator().manual_seed(11)
    for name in ("fp8_h16", "mxfp4_h16", "bf16_h128"):
        if name not in artifacts:
            continue
        kernel, info = artifacts[name]
        fmt = mla_runtime.FORMATS[info.kv_format]
        H, max_tokens = info.num_heads, 4 * max_seqs
        plan, pinfo = rt.device_plan(kernel, max_seqs, max_tokens, max_kv)
        gen = torch.Generator(device="cuda").manual_seed(5)
        kv, scale = make_cache(fmt, max_kv, gen)
        q = torch.empty(max_tokens, H, DQK, dtype=torch.bfloat16, device="cuda")
        qo = torch.zeros(max_seqs + 1, dtype=torch.int32, device="cuda")
        kvp = torch.zeros(max_seqs + 1, dtype=torch.int32, device="cuda")
        work = torch.empty(pinfo.work_list_bytes, dtype=torch.uint8,
                           device="cuda")
        space = torch.empty(max(1, pinfo.workspace_bytes), dtype=torch.uint8,
                            device="cuda")
        out = torch.empty(max_tokens, H, DV, dtype=torch.bfloat16,
                          device="cuda")
        lse = torch.empty(max_tokens, H, dtype=torch.float32, device="cuda")
        a = mla_runtime.DecodeArgs()
        a.q, a.kv = q.data_ptr(), kv.data_ptr()
        a.kv_scale = scale.data_ptr() if scale is not None else None
        a.qo_indptr, a.kv_indptr = qo.data_ptr(), kvp.data_ptr()
        a.work_list, a.out, a.lse = work.data_ptr(), out.data_ptr(), \
            lse.data_ptr()
        a.workspace, a.workspace_bytes = space.data_ptr(), space.numel()
        a.num_seqs, a.num_tokens, a.num_kv_rows = max_seqs, max_tokens, max_kv
        stream = torch.cuda.Stream()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            rt.launch(kernel, plan, a, torch.cuda.current_stream().cuda_stream)
        for step in range(steps):
            B = int(torch.randint(1, max_seqs + 1, (1,), generator=rng))
            # Each sequence its own q_len (1..4): the plan kernel's row
            # blocks and the causal limits differ within a batch.
            q_lens = torch.randint(1, 5, (B,), generator=rng).tolist()
            lens = torch.randint(1, max_kv // max_seqs, (B,),
                                 generator=rng).tolist()
            if step == steps - 1:
                B, q_lens = max_seqs, [1] * max_seqs
                lens = [max_kv // max_seqs] * max_seqs
            qo_host = [0]
            for b in range(max_seqs):
                qo_host.append(qo_host[-1] + (q_lens[b] if b < B else 0))
            kv_host = [0]
            for b in range(max_seqs):
                kv_host.append(kv_host[-1] + (lens[b] if b < B else 0))
            qo.copy_(torch.tensor(qo_host, dtype=torch.int32))
            kvp.copy_(torch.tensor(kv_host, dtype=torch.int32))
            q.copy_(torch.randn(max_tokens, H, DQK, generator=gen,
                                device="cuda").bfloat16())
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            status = int(work[pinfo.status_offset:pinfo.status_offset + 4]
                         .cpu().view(torch.int32)[0])
            batch = {"fmt": fmt, "q": q, "kv": kv, "scale": scale,
                     "qo": qo_host[:B + 1], "kv_rows": kv_host[:B + 1]}
            ref_out, ref_lse = reference(batch, info.sm_scale)
            rows = token_rows(batch, range(B))
            rel, excess = errors(out, lse, ref_out, ref_lse, rows)
            ok = status == 0 and rel <= TOLERANCE[fmt] and excess <= 0
            q_len = ",".join(str(n) for n in q_lens[:B])
            results.append({"artifact": name, "step": step, "B": B,
                            "q_len": q_len, "status": status, "rel_err": rel,
                            "pass": ok})
            log(f"device plan {name:10s} step {step}: B={B} q_len={q_len} "
                f"status={status} rel_err={rel:.3e} "
                f"{'PASS' if ok else 'FAIL'}")
        del graph
        rt.destroy_plan(plan)
    return results


SHAPES = [(b, kv, 16, 1) for b in (4, 32, 64, 256) for kv in (1024, 8192)] + \
    [(64, 8192, 128, 1), (64, 8192, 16, 4)]


def time_shapes(rt, artifacts, bandwidth, formats, launches, log,
                shapes=SHAPES, peers=True):
    rows_out = []
    for fmt in formats:
        for (B, L, H, n_q) in shapes:
            # An artifact compiled for the shape's query tokens where there
            # is one (compile.sh: --query-tokens), else the format's at H.
            key = next((k for k in (f"{fmt}_h{H}_q{n_q}", f"{fmt}_h{H}")
                        if k in artifacts), None)
            if key is None:
                continue
            kernel, info = artifacts[key]
            batch = make_batch(fmt, H, [L] * B, [n_q] * B, seed=B * L + H)
            size = cache_bytes(fmt, B * L)
            copies = max(1, min(16, -(-4 * L2_BYTES // size)))
            row = {"format": fmt, "B": B, "kv": L, "H": H, "q_len": n_q,
                   "artifact": key, "cache_bytes": size}
            ours = Ours(rt, kernel, batch, copies)
            ours()
            torch.cuda.synchronize()
            sample = sorted(set([0, B // 2, B - 1] + list(range(min(B, 8)))))
            ref_out, ref_lse = reference(batch, info.sm_scale, sample)
            rows = token_rows(batch, sample)
            row["rel_err"], row["lse_excess"] = errors(
                ours.out, ours.lse, ref_out, ref_lse, rows)
            per_graph = max(8, copies)
            row["ours_us"] = 1e3 * graph_median_ms(ours, launches, per_graph)
            row["ours_eager_us"] = 1e3 * median_ms(ours, launches)
            io = size + batch["q"].numel() * 2 + B * n_q * H * DV * 2
            row["floor_us"] = 1e6 * io / bandwidth
            row["ours_gbps"] = size / (row["ours_us"] * 1e-6) / 1e9
            row["ours_share"] = size / (row["ours_us"] * 1e-6) / bandwidth
            rt.destroy_plan(ours.plan)
            del ours
            for peer, make in (("torch", torch_decode), ("seed", seed_decode)):
                if not peers:
                    break
                if peer == "seed" and (fmt != "fp8" or H != 16 or n_q != 1):
                    continue
                try:
                    fn = make(batch, info.sm_scale, copies)
                    out = fn()
                    torch.cuda.synchronize()
                    row[f"{peer}_rel_err"], _ = errors(out, None, ref_out,
                                                       None, rows)
                    row[f"{peer}_us"] = 1e3 * graph_median_ms(fn, launches,
                                                              per_graph)
                except Exception as e:  # a peer that fails is reported
                    row[f"{peer}_error"] = f"{type(e).__name__}: {e}"[:200]
                torch.cuda.empty_cache()
            log(json.dumps(row))
            rows_out.append(row)
            del batch
            torch.cuda.empty_cache()
    return rows_out


def table(rows, bandwidth):
    lines = ["| format | B | kv | H | q_len | ours µs | floor µs | ours GB/s "
             "| % of read BW | rel_err | PyTorch µs | seed Triton µs "
             "| ours µs, eager launches |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def peer(name):
            if f"{name}_us" in r:
                return f"{r[name + '_us']:.1f}"
            return "failed" if f"{name}_error" in r else "—"
        lines.append(
            f"| {r['format']} | {r['B']} | {r['kv']} | {r['H']} | {r['q_len']} "
            f"| {r['ours_us']:.1f} | {r['floor_us']:.1f} | {r['ours_gbps']:.0f} "
            f"| {100 * r['ours_share']:.0f}% | {r['rel_err']:.1e} "
            f"| {peer('torch')} | {peer('seed')} | {r['ours_eager_us']:.1f} |")
    lines.append("")
    lines.append(f"read bandwidth (streaming sum of 4 GiB): "
                 f"{bandwidth / 1e9:.0f} GB/s")
    for fmt in ("bf16", "fp8", "mxfp4"):
        eight = [r for r in rows if r["format"] == fmt and r["H"] == 16
                 and r["q_len"] == 1]
        if len(eight) == 8:
            g = math.exp(sum(math.log(r["ours_us"]) for r in eight) / 8)
            f = math.exp(sum(math.log(r["floor_us"]) for r in eight) / 8)
            lines.append(f"{fmt}: geomean over the eight shapes {g:.1f} µs "
                         f"(floor {f:.1f} µs, {g / f:.2f}x)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libMLARuntime.so")
    ap.add_argument("--artifacts", required=True, help="folder of .mla files")
    ap.add_argument("--out", default=".", help="folder for the results")
    ap.add_argument("--formats", default="bf16,fp8,mxfp4")
    ap.add_argument("--launches", type=int, default=50)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-peers", action="store_true",
                    help="time our kernels only (A/B runs)")
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="also check N random batches (check_random)")
    ap.add_argument("--random-seed", type=int, default=1)
    ap.add_argument("--only", default="",
                    help="time these shapes only, FORMAT:B:KV:H:Q_LEN[,...] "
                    "(one for ncu)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    logfile = open(os.path.join(args.out, "bench.log"), "w")

    def log(line):
        print(line, flush=True)
        logfile.write(line + "\n")

    torch.cuda.init()
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    rt = mla_runtime.Runtime(args.lib)
    artifacts = {}
    for f in sorted(os.listdir(args.artifacts)):
        if f.endswith(".mla"):
            t0 = time.time()
            artifacts[f[:-4]] = rt.load(os.path.join(args.artifacts, f))
            log(f"loaded {f} (PTX JIT) in {time.time() - t0:.2f} s")
    bandwidth = read_bandwidth()
    log(f"read bandwidth {bandwidth / 1e9:.0f} GB/s")
    results = {"bandwidth": bandwidth}
    if not args.skip_check:
        results["checks"] = check_artifacts(rt, artifacts, log)
        results["checks"] += check_device_plan(rt, artifacts, log)
        results["checks"] += check_random(rt, artifacts, log, args.random,
                                          args.random_seed)
    if not args.skip_timing:
        runs = [(args.formats.split(","), SHAPES)]
        if args.only:
            runs = [([fmt], [tuple(int(d) for d in dims)])
                    for fmt, *dims in (s.split(":")
                                       for s in args.only.split(","))]
        results["timings"] = [row for formats, shapes in runs
                              for row in time_shapes(rt, artifacts, bandwidth,
                                                     formats, args.launches,
                                                     log, shapes,
                                                     not args.skip_peers)]
        text = table(results["timings"], bandwidth)
        log(text)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    failed = [c for c in results.get("checks", []) if not c["pass"]]
    bad = [r for r in results.get("timings", [])
           if not r["rel_err"] <= TOLERANCE[r["format"]]]
    if failed or bad:
        log(f"FAILED: {len(failed)} checks, {len(bad)} timed shapes out of "
            "tolerance")
        return 1
    log("all checks PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
