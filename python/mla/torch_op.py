"""mla::decode as a PyTorch custom op (torch.library), where PyTorch is
installed: `torch.ops.mla.decode(q, kv, kv_scale, qo_indptr, kv_indptr,
kernel_id)` with a kernel registered by `register(kernel)`. It has a Meta
implementation (shapes only), so tracing tools see its outputs without
running it. The CPU implementation plans on the host and launches on the
kernel's context (emu or cpu backends).
"""

import torch

from .decode import DecodeWrapper

_kernels = {}
_lib = torch.library.Library("mla", "DEF")
_lib.define(
    "decode(Tensor q, Tensor kv, Tensor? kv_scale, Tensor qo_indptr, "
    "Tensor kv_indptr, int kernel_id) -> (Tensor, Tensor)")


def register(kernel):
    """Makes `kernel` callable as torch.ops.mla.decode; returns its id."""
    kernel_id = len(_kernels)
    _kernels[kernel_id] = kernel
    return kernel_id


def _kernel(kernel_id):
    if kernel_id not in _kernels:
        raise ValueError(f"mla::decode: no kernel {kernel_id} (register() it first)")
    return _kernels[kernel_id]


def _decode_cpu(q, kv, kv_scale, qo_indptr, kv_indptr, kernel_id):
    wrapper = DecodeWrapper(_kernel(kernel_id))
    wrapper.plan(qo_indptr.numpy(), kv_indptr.numpy())
    return wrapper.run(q.contiguous(), kv.contiguous(),
                       None if kv_scale is None else kv_scale.contiguous(),
                       qo_indptr.contiguous(), kv_indptr.contiguous())


def _decode_meta(q, kv, kv_scale, qo_indptr, kv_indptr, kernel_id):
    info = _kernel(kernel_id).info
    tokens, heads = q.shape[0], q.shape[1]
    out = torch.empty((tokens, heads, info["v_dim"]), dtype=torch.bfloat16,
                      device="meta")
    lse = torch.empty((tokens, heads), dtype=torch.float32, device="meta")
    return out, lse


_lib.impl("decode", _decode_cpu, "CPU")
_lib.impl("decode", _decode_meta, "Meta")
# No gradient: meta tensors reach the op through the autograd key first
# (PyTorch 1.13 has no fallthrough for it on new namespaces).
_lib.impl("decode", _decode_meta, "AutogradMeta")
