"""The PyTorch custom op torch.ops.mla.decode, where Debian's python3-torch
is installed: on CPU tensors (emu backend) it gives the C API's numbers bit
for bit, and its Meta implementation gives the output shapes alone."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mla  # noqa: E402
from mla import torch_op  # noqa: E402
from reference import HEADS, V_DIM, check, make_problem, reference  # noqa: E402


def bf16(bits):
    return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)


def as_torch(p):
    kv = bf16(p["kv"]) if p["kv"].dtype == np.uint16 else torch.from_numpy(p["kv"])
    scale = p["kv_scale"]
    return (bf16(p["q"]), kv,
            None if scale is None else torch.from_numpy(scale),
            torch.from_numpy(p["qo_indptr"]), torch.from_numpy(p["kv_indptr"]))


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_custom_op_matches_the_c_api(artifacts, fmt):
    kernel = mla.Context("emu").load(str(artifacts[fmt]))
    kernel_id = torch_op.register(kernel)
    p = make_problem(fmt, [90, 2], q_len=2, seed=11)
    out, lse = torch.ops.mla.decode(*as_torch(p), kernel_id)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (4, HEADS, V_DIM)
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (4, HEADS)

    # The same decode through the C API's launch on NumPy buffers.
    decode = mla.DecodeWrapper(kernel)
    decode.plan(p["qo_indptr"], p["kv_indptr"])
    want_out, want_lse = decode.run(p["q"], p["kv"], p["kv_scale"],
                                    p["qo_indptr"], p["kv_indptr"])
    got_out = out.view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got_out, want_out)
    assert np.array_equal(lse.numpy(), want_lse)
    check(fmt, got_out, lse.numpy(), *reference(fmt, p))


def test_meta_gives_shapes(artifacts):
    kernel_id = torch_op.register(mla.Context("emu").load(str(artifacts["fp8"])))
    meta = lambda *shape, dtype: torch.empty(shape, dtype=dtype, device="meta")
    out, lse = torch.ops.mla.decode(
        meta(6, HEADS, 576, dtype=torch.bfloat16), meta(107, 576, dtype=torch.uint8),
        meta(1, dtype=torch.float32), meta(4, dtype=torch.int32),
        meta(4, dtype=torch.int32), kernel_id)
    assert out.device.type == "meta" and tuple(out.shape) == (6, HEADS, V_DIM)
    assert tuple(lse.shape) == (6, HEADS) and lse.dtype == torch.float32


def test_wrapper_takes_torch_tensors(artifacts):
    kernel = mla.Context("emu").load(str(artifacts["bf16"]))
    p = make_problem("bf16", [40], seed=12)
    q = torch.from_numpy(p["q"].view(np.int16)).view(torch.bfloat16)
    kv = torch.from_numpy(p["kv"].view(np.int16)).view(torch.bfloat16)
    decode = mla.DecodeWrapper(kernel)
    decode.plan(p["qo_indptr"], p["kv_indptr"])
    out, lse = decode.run(q, kv, None, torch.from_numpy(p["qo_indptr"]),
                          torch.from_numpy(p["kv_indptr"]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    check("bf16", out.view(torch.int16).numpy().view(np.uint16), lse.numpy(),
          *reference("bf16", p))


def test_unregistered_kernel_is_refused():
    with pytest.raises(ValueError, match="no kernel 12345"):
        torch.ops.mla.decode(torch.zeros(1, HEADS, 576, dtype=torch.bfloat16),
                             torch.zeros(1, 576, dtype=torch.uint8), None,
                             torch.zeros(2, dtype=torch.int32),
                             torch.zeros(2, dtype=torch.int32), 12345)
