"""mla.decode for Python: load artifacts, plan split-KV work lists, launch.

    import mla
    ctx = mla.Context("emu")                  # "emu", "cpu", "hip" or "cuda"
    kernel = ctx.load("decode_fp8.mla")       # mla-compile's artifact
    decode = mla.DecodeWrapper(kernel)
    decode.plan(qo_indptr, kv_indptr)         # once per batch
    out, lse = decode.run(q, kv, kv_scale, qo_indptr, kv_indptr)  # per layer

Arrays go in and out through DLPack: NumPy arrays on emu and cpu, PyTorch
tensors on any backend, without copies. bf16 data may be NumPy uint16
holding the bits. Bad arguments raise TypeError or ValueError; runtime
failures raise the exception of their status (docs/python.md).
"""

from ._runtime import Context, Kernel, Plan
from .decode import DecodeWrapper

__all__ = ["Context", "Kernel", "Plan", "DecodeWrapper"]
