"""Standalone CUDA (NVIDIA H200) port of a peer Triton MLA-decode seed kernel.

Origin: /work/shared/seeds/002_0e01e00e93ced1af.txt ("submission 739756").
The seed is a diff listing; this file is its NEW ("+ " plus context) side,
a Triton fp8-KV MLA decode kernel written for AMD (ROCm). The OLD side
(HIP C++) was discarded.

Changes made for CUDA / standalone use (kernel math left exactly as in the seed):
  * Removed `from task import input_t, output_t` and the type hints that used
    it (the `task` module only exists in the competition harness).
  * Removed the AMD-only launch option `waves_per_eu=2` from the stage-1
    launch: the CUDA backend of Triton rejects unknown launch keywords
    ("Keyword argument ... was specified but unrecognised").
  * Kept `_remap_xcd` (AMD MI3xx XCD-aware block reordering, NUM_XCDS=8): it
    is a pure bijection over [0, GRID_SIZE) (checked for every GRID_SIZE in
    1..4999), so results are unchanged on NVIDIA; it only changes the order
    in which blocks are mapped to work items.
  * Kept `tl.float8e4nv` (= torch.float8_e4m3fn, OCP e4m3), the native fp8
    e4m3 type on Hopper.
  * The body of the seed's `custom_kernel(data)` is now `seed_decode_fp8(...)`
    with explicit arguments; `custom_kernel(data)` is kept as a thin wrapper
    that unpacks the seed's original data tuple.
  * Kept `_SHAPE_CONFIGS` / `_get_config` and all block sizes, num_warps and
    num_stages as in the seed (they were tuned on AMD, where a "warp" is a
    64-lane wavefront; on NVIDIA num_warps=4 is 128 threads, not 256).

Original seed docstring:

MLA decode Triton v94: cherry-picked optimal (splits, ns) per shape.

Best configs from v84/v92/v93 experiments:
- bs4: high splits (v84), GPU underutilized
- bs32/64 kv1k: low splits + ns=3 (v92 autotune), less stage2 overhead
- bs32/64 kv8k: moderate splits (v93 autotune)
- bs256: force_single kv1k, 2-split kv8k (v93 autotune)
"""

import torch
import triton
import triton.language as tl

NUM_HEADS = 16
KV_LORA_RANK = 512
QK_HEAD_DIM = 576
V_HEAD_DIM = 512
FP8_DTYPE = tl.float8e4nv

_SHAPE_CONFIGS = {
    (4, 1024):   (16, 2),
    (4, 8192):   (32, 3),
    (32, 1024):  (4,  3),
    (32, 8192):  (8,  3),
    (64, 1024):  (4,  3),
    (64, 8192):  (8,  2),
    (256, 1024): (1,  2),
    (256, 8192): (2,  2),
}


@triton.jit
def _remap_xcd(pid, GRID_SIZE, NUM_XCDS: tl.constexpr = 8):
    pids_per_xcd = (GRID_SIZE + NUM_XCDS - 1) // NUM_XCDS
    tall_xcds = GRID_SIZE % NUM_XCDS
    tall_xcds = NUM_XCDS if tall_xcds == 0 else tall_xcds
    xcd = pid % NUM_XCDS
    local_pid = pid // NUM_XCDS
    if xcd < tall_xcds:
        return xcd * pids_per_xcd + local_pid
    else:
        return tall_xcds * pids_per_xcd + (xcd - tall_xcds) * (pids_per_xcd - 1) + local_pid


@triton.jit
def _stage1_kernel(
    Q, KV, Mid_O, Out,
    qo_indptr, kv_indptr,
    sm_scale, kv_scale_ptr,
    stride_qt, stride_qh, stride_kvt,
    stride_mb, stride_mh, stride_ms,
    stride_ot, stride_oh,
    NUM_KV_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
    DIRECT_OUT: tl.constexpr, GRID_SIZE: tl.constexpr,
):
    raw_pid = tl.program_id(0)
    pid = _remap_xcd(raw_pid, GRID_SIZE)
    cur_batch = pid // NUM_KV_SPLITS
    split_id = pid % NUM_KV_SPLITS
    heads = tl.arange(0, BLOCK_H)
    kv_scale = tl.load(kv_scale_ptr).to(tl.float32)
    score_scale = sm_scale * kv_scale
    q_tok = tl.load(qo_indptr + cur_batch)
    kv_s = tl.load(kv_indptr + cur_batch)
    kv_e = tl.load(kv_indptr + cur_batch + 1)
    kv_len = kv_e - kv_s
    kv_per_split = tl.cdiv(kv_len, NUM_KV_SPLITS)
    sp_start = kv_per_split * split_id
    sp_end = tl.minimum(sp_start + kv_per_split, kv_len)
    offs_c = tl.arange(0, BLOCK_C)
    offs_r = tl.arange(0, BLOCK_R)
    q_base = q_tok * stride_qt
    q_nope = tl.load(Q + q_base + heads[:, None] * stride_qh + offs_c[None, :]).to(FP8_DTYPE)
    q_rope = tl.load(Q + q_base + heads[:, None] * stride_qh + (512 + offs_r[None, :])).to(FP8_DTYPE)
    e_max = tl.full([BLOCK_H], value=float("-inf"), dtype=tl.float32)
    e_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    num_tokens = sp_end - sp_start
    num_full = num_tokens // BLOCK_N
    full_end = sp_start + num_full * BLOCK_N

    for start_n in range(sp_start, full_end, BLOCK_N):
        kv_idx = kv_s + start_n + tl.arange(0, BLOCK_N)
        kv_nope = tl.load(KV + kv_idx[:, None] * stride_kvt + offs_c[None, :],
                          cache_modifier=".cg")
        kv_rope = tl.load(KV + kv_idx[:, None] * stride_kvt + (512 + offs_r[None, :]),
                          cache_modifier=".cg")
        k_nope = tl.trans(kv_nope)
        k_rope = tl.trans(kv_rope)
        qk = tl.dot(q_nope, k_nope) + tl.dot(q_rope, k_rope)
        qk = qk * score_scale
        new_max = tl.maximum(tl.max(qk, 1), e_max)
        rescale = tl.exp(e_max - new_max)
        p = tl.exp(qk - new_max[:, None])
        acc = acc * rescale[:, None]
        acc = acc + tl.dot(p.to(FP8_DTYPE), kv_nope)
        e_sum = e_sum * rescale + tl.sum(p, 1)
        e_max = new_max

    if full_end < sp_end:
        offs_n = full_end + tl.arange(0, BLOCK_N)
        mask_n = offs_n < sp_end
        kv_idx = kv_s + offs_n
        kv_nope = tl.load(KV + kv_idx[:, None] * stride_kvt + offs_c[None, :],
                          mask=mask_n[:, None], other=0.0, cache_modifier=".cg")
        kv_rope = tl.load(KV + kv_idx[:, None] * stride_kvt + (512 + offs_r[None, :]),
                          mask=mask_n[:, None], other=0.0, cache_modifier=".cg")
        k_nope = tl.trans(kv_nope)
        k_rope = tl.trans(kv_rope)
        qk = tl.dot(q_nope, k_nope) + tl.dot(q_rope, k_rope)
        qk = qk * score_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        new_max = tl.maximum(tl.max(qk, 1), e_max)
        rescale = tl.exp(e_max - new_max)
        p = tl.exp(qk - new_max[:, None])
        acc = acc * rescale[:, None]
        acc = acc + tl.dot(p.to(FP8_DTYPE), kv_nope)
        e_sum = e_sum * rescale + tl.sum(p, 1)
        e_max = new_max

    safe_esum = tl.where(e_sum > 0, e_sum, 1.0)
    result = acc / safe_esum[:, None]
    if DIRECT_OUT:
        o_base = q_tok * stride_ot
        tl.store(Out + o_base + heads[:, None] * stride_oh + offs_c[None, :],
                 (result * kv_scale).to(tl.bfloat16))
    else:
        mid_base = cur_batch * stride_mb + heads * stride_mh + split_id * stride_ms
        tl.store(Mid_O + mid_base[:, None] + offs_c[None, :], result)
        lse = tl.where(e_sum > 0, e_max + tl.log(e_sum), float("-inf"))
        tl.store(Mid_O + mid_base + 512, lse)


@triton.jit
def _stage2_kernel(
    Mid_O, Out, qo_indptr, kv_scale_ptr,
    stride_mb, stride_mh, stride_ms, stride_ot, stride_oh,
    NUM_KV_SPLITS: tl.constexpr, BLOCK_DV: tl.constexpr,
    batch: tl.constexpr, GRID_SIZE: tl.constexpr,
):
    raw_pid = tl.program_id(0)
    pid = _remap_xcd(raw_pid, GRID_SIZE)
    cur_batch = pid % batch
    cur_head = pid // batch
    kv_scale = tl.load(kv_scale_ptr).to(tl.float32)
    q_tok = tl.load(qo_indptr + cur_batch)
    offs_d = tl.arange(0, BLOCK_DV)
    e_max = float("-inf")
    e_sum = 0.0
    acc = tl.zeros([BLOCK_DV], dtype=tl.float32)
    mid_base = cur_batch * stride_mb + cur_head * stride_mh
    for s in range(NUM_KV_SPLITS):
        tv = tl.load(Mid_O + mid_base + s * stride_ms + offs_d)
        lse = tl.load(Mid_O + mid_base + s * stride_ms + 512)
        new_max = tl.maximum(lse, e_max)
        old_scale = tl.exp(e_max - new_max)
        exp_lse = tl.exp(lse - new_max)
        acc = acc * old_scale + exp_lse * tv
        e_sum = e_sum * old_scale + exp_lse
        e_max = new_max
    result = acc / tl.maximum(e_sum, 1e-12) * kv_scale
    o_base = q_tok * stride_ot + cur_head * stride_oh
    tl.store(Out + o_base + offs_d, result.to(tl.bfloat16))


def _get_config(batch_size, kv_len):
    key = (batch_size, kv_len)
    if key in _SHAPE_CONFIGS:
        return _SHAPE_CONFIGS[key]
    max_tiles = max(1, kv_len // 64)
    if batch_size >= 256:
        splits = min(2, max_tiles)
    elif batch_size >= 64:
        splits = min(max(1, 512 // batch_size), max_tiles)
    else:
        splits = min(max(1, 768 // batch_size), max_tiles)
    while splits > 1 and batch_size * splits > 912:
        splits -= 1
    grid_size = batch_size * splits
    ns = 3 if grid_size < 512 else 2
    return splits, ns


def seed_decode_fp8(q, kv_fp8, kv_scale, qo_indptr, kv_indptr, batch_size, sm_scale):
    """MLA decode with an fp8 (e4m3) KV cache; the seed's `custom_kernel` body.

    q:          [T, 16, 576] bf16 cuda (T = total query tokens; decode, one per sequence).
    kv_fp8:     [N, 576] torch.float8_e4m3fn cuda (uint8 or [N, 1, 576] also
                accepted: it is viewed as float8_e4m3fn and reshaped to [-1, 576]).
    kv_scale:   [1] float32 cuda tensor (read in-kernel via a pointer; must be a tensor).
    qo_indptr:  int32 cuda [B+1]; the kernels read only qo_indptr[b], i.e. one query
                token per sequence.
    kv_indptr:  int32 cuda [B+1]; per-sequence KV ranges used by the kernels.
    batch_size: int B.
    sm_scale:   float softmax scale.
    Returns out [T, 16, 512] bf16.

    Assumption kept from the seed: kv_len = N // batch_size is used only to pick
    (num_splits, num_stages) from _get_config, i.e. it assumes every sequence has
    the same KV length. The kernels themselves index KV through kv_indptr, so
    unequal lengths should still be handled (untested), just with a config chosen
    for the mean length; a sequence with zero KV tokens would give NaN through
    stage 2 when num_splits > 1.
    """
    kv = kv_fp8.view(torch.float8_e4m3fn).view(-1, QK_HEAD_DIM)
    kv_scale_t = kv_scale
    total_q = q.shape[0]
    kv_len = kv.shape[0] // batch_size if batch_size > 0 else 0

    num_splits, ns = _get_config(batch_size, kv_len)

    dev = q.device
    direct_out = (num_splits == 1)
    mid_o = torch.empty(
        (batch_size, NUM_HEADS, num_splits, KV_LORA_RANK + 1),
        dtype=torch.float32, device=dev,
    ) if not direct_out else torch.empty(1, dtype=torch.float32, device=dev)

    out = torch.empty((total_q, NUM_HEADS, V_HEAD_DIM), dtype=torch.bfloat16, device=dev)

    grid_size1 = batch_size * num_splits
    _stage1_kernel[(grid_size1,)](
        q, kv, mid_o, out, qo_indptr, kv_indptr,
        sm_scale, kv_scale_t,
        q.stride(0), q.stride(1), kv.stride(0),
        mid_o.stride(0) if not direct_out else 0,
        mid_o.stride(1) if not direct_out else 0,
        mid_o.stride(2) if not direct_out else 0,
        out.stride(0), out.stride(1),
        NUM_KV_SPLITS=num_splits, BLOCK_N=64, BLOCK_H=16,
        BLOCK_C=512, BLOCK_R=64, DIRECT_OUT=direct_out,
        GRID_SIZE=grid_size1,
        num_warps=4, num_stages=ns,
    )

    if not direct_out:
        grid_size2 = NUM_HEADS * batch_size
        _stage2_kernel[(grid_size2,)](
            mid_o, out, qo_indptr, kv_scale_t,
            mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
            out.stride(0), out.stride(1),
            NUM_KV_SPLITS=num_splits, BLOCK_DV=512,
            batch=batch_size, GRID_SIZE=grid_size2,
            num_warps=4, num_stages=2,
        )

    return out


def custom_kernel(data):
    """Seed-compatible entry: data = (q, {"fp8": (kv_fp8, kv_scale)}, qo_indptr,
    kv_indptr, {"batch_size": B, "sm_scale": s})."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv_fp8, kv_scale_t = kv_data["fp8"]
    return seed_decode_fp8(q, kv_fp8, kv_scale_t, qo_indptr, kv_indptr,
                           config["batch_size"], config["sm_scale"])
