"""Inputs and an independent float64 reference for the Python tests, in
NumPy alone: the cache formats decoded from their definitions (docs/abi.md),
attention with the causal rule of several query tokens."""

import numpy as np

HEADS, QK_DIM, V_DIM = 16, 576, 512


def to_bf16_bits(x):
    """float32 -> bf16 bits, round to nearest even."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_to_float(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp8_e4m3_values():
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp, man = (codes >> 3) & 0xF, codes & 0x7
    value = np.where(exp == 0, man / 8.0 * 2.0**-6,
                     (1.0 + man / 8.0) * 2.0 ** (exp - 7.0))
    value = sign * value
    value[(exp == 15) & (man == 7)] = np.nan
    return value


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def dequantize(fmt, kv, kv_scale):
    """The cache as float64 [N, QK_DIM]."""
    if fmt == "bf16":
        return bf16_to_float(kv).astype(np.float64)
    if fmt == "fp8":
        return fp8_e4m3_values()[kv] * float(kv_scale[0])
    nibbles = np.empty((kv.shape[0], kv.shape[1] * 2), np.uint8)
    nibbles[:, 0::2] = kv & 0xF  # low nibble: the even element
    nibbles[:, 1::2] = kv >> 4
    values = E2M1[nibbles & 7] * np.where(nibbles & 8, -1.0, 1.0)
    scales = 2.0 ** (kv_scale.astype(np.float64) - 127.0)
    return values * np.repeat(scales, 32, axis=1)


def make_problem(fmt, kv_lens, q_len=1, seed=0, spare_rows=0):
    """A batch with q, kv ~ 0.02 N(0,1) in the format's encoding."""
    rng = np.random.default_rng(seed)
    batch = len(kv_lens)
    qo_indptr = np.arange(batch + 1, dtype=np.int32) * q_len
    kv_indptr = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    tokens, rows = int(qo_indptr[-1]), int(kv_indptr[-1]) + spare_rows
    q = to_bf16_bits(0.02 * rng.standard_normal((tokens, HEADS, QK_DIM)))
    latent = 0.02 * rng.standard_normal((rows, QK_DIM))
    if fmt == "bf16":
        kv, kv_scale = to_bf16_bits(latent), None
    elif fmt == "fp8":
        # Codes of finite values only; the per-tensor scale maps them to ~latent.
        kv = rng.integers(0, 0x7E, (rows, QK_DIM), dtype=np.uint8)
        kv |= rng.integers(0, 2, (rows, QK_DIM), dtype=np.uint8) << 7
        kv_scale = np.array([0.02 / 64], np.float32)
    else:
        kv = rng.integers(0, 256, (rows, QK_DIM // 2), dtype=np.uint8)
        kv_scale = rng.integers(118, 122, (rows, QK_DIM // 32), dtype=np.uint8)
    return dict(q=q, kv=kv, kv_scale=kv_scale, qo_indptr=qo_indptr,
                kv_indptr=kv_indptr)


def reference(fmt, p, sm_scale=None):
    """float64 out [T, H, V_DIM] and lse [T, H] (-inf where nothing is seen)."""
    scale = sm_scale or 1.0 / np.sqrt(QK_DIM)
    keys_all = dequantize(fmt, p["kv"], p["kv_scale"])
    q = bf16_to_float(p["q"]).astype(np.float64)
    tokens = q.shape[0]
    out = np.zeros((tokens, HEADS, V_DIM))
    lse = np.full((tokens, HEADS), -np.inf)
    qo, kvp = p["qo_indptr"], p["kv_indptr"]
    for b in range(len(qo) - 1):
        q_len, kv_len = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        keys = keys_all[kvp[b]:kvp[b + 1]]
        for i in range(q_len):
            visible = max(0, kv_len - (q_len - 1 - i))
            if visible == 0:
                continue
            t = qo[b] + i
            scores = q[t] @ keys[:visible].T * scale  # [H, visible]
            top = scores.max(axis=1, keepdims=True)
            weights = np.exp(scores - top)
            total = weights.sum(axis=1, keepdims=True)
            out[t] = weights @ keys[:visible, :V_DIM] / total
            lse[t] = (np.log(total) + top)[:, 0]
    return out, lse


def check(fmt, out_bits, lse, want_out, want_lse):
    """The public benchmark's elementwise bars, and lse to 1e-4."""
    atol, rtol = {"bf16": (8e-3, 2e-2), "fp8": (1e-2, 5e-2),
                  "mxfp4": (5e-2, 1e-1)}[fmt]
    got = bf16_to_float(out_bits).astype(np.float64)
    assert np.all(np.abs(got - want_out) <= atol + rtol * np.abs(want_out))
    seen = np.isfinite(want_lse)
    assert np.all(np.abs(lse[seen] - want_lse[seen]) <= 1e-4 + 1e-6 * np.abs(want_lse[seen]))
    assert np.all(lse[~seen] == -np.inf)
    rel = np.linalg.norm(got - want_out) / max(np.linalg.norm(want_out), 1e-30)
    assert rel < 5e-3, f"relative error {rel}"  # what bf16 rounding allows
    return rel
