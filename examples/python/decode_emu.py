"""Decode on the emu backend from Python with NumPy, checked against a
float64 reference.

    PYTHONPATH=build/python python3 examples/python/decode_emu.py build/python/decode_fp8.mla

The emu backend runs the artifact's gfx950 kernels on the CPU with exact
MFMA semantics; swap "emu" for "hip" (and NumPy for PyTorch tensors on the
GPU) to run the same code object on an MI355X.
"""

import sys

import numpy as np

import mla


def bf16_bits(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def main(artifact):
    kernel = mla.Context("emu").load(artifact)
    info = kernel.info
    if info["kv_format"] != "bf16":
        sys.exit("this example builds a bf16 cache; compile "
                 "examples/decode_bf16.mlir")
    heads, dqk, dv = info["num_heads"], info["qk_dim"], info["v_dim"]

    # Two sequences of 300 and 17 cached tokens, one query token each.
    rng = np.random.default_rng(0)
    qo_indptr = np.array([0, 1, 2], np.int32)
    kv_indptr = np.array([0, 300, 317], np.int32)
    q = bf16_bits(0.02 * rng.standard_normal((2, heads, dqk)))
    kv = bf16_bits(0.02 * rng.standard_normal((317, dqk)))

    decode = mla.DecodeWrapper(kernel)
    decode.plan(qo_indptr, kv_indptr)          # once per batch
    out, lse = decode.run(q, kv, None, qo_indptr, kv_indptr)  # per layer

    # float64 reference: softmax(q k^T * scale) v, v = the first dv columns.
    keys, queries = bf16_values(kv), bf16_values(q)
    worst = 0.0
    for b in range(2):
        k = keys[kv_indptr[b]:kv_indptr[b + 1]]
        s = queries[b] @ k.T * info["sm_scale"]
        w = np.exp(s - s.max(axis=1, keepdims=True))
        want = (w @ k[:, :dv]) / w.sum(axis=1, keepdims=True)
        worst = max(worst, np.abs(bf16_values(out[b]) - want).max())
    print(f"out {out.shape} max |out - reference| = {worst:.2e}")
    return 0 if worst < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
