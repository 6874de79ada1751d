"""The Python package against an independent NumPy float64 reference on the
emu and cpu backends, its bad-argument errors, and plan reuse."""

import numpy as np
import pytest

import mla
from reference import HEADS, QK_DIM, V_DIM, check, make_problem, reference

FORMATS = ("bf16", "fp8", "mxfp4")


@pytest.fixture(scope="module")
def kernels(artifacts):
    loaded = {}
    for backend in ("emu", "cpu"):
        ctx = mla.Context(backend)
        for fmt in FORMATS:
            loaded[backend, fmt] = ctx.load(str(artifacts[fmt]))
    return loaded


@pytest.mark.parametrize("backend", ["emu", "cpu"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_matches_reference(kernels, backend, fmt):
    kernel = kernels[backend, fmt]
    assert kernel.info["kv_format"] == fmt
    assert kernel.info["num_heads"] == HEADS
    # Tile edges, a one-row and an empty sequence, several query tokens,
    # and a pool with rows no sequence owns.
    p = make_problem(fmt, [130, 1, 0, 64], q_len=2, seed=1, spare_rows=5)
    decode = mla.DecodeWrapper(kernel)
    decode.plan(p["qo_indptr"], p["kv_indptr"])
    out, lse = decode.run(p["q"], p["kv"], p["kv_scale"], p["qo_indptr"],
                          p["kv_indptr"])
    assert out.shape == (8, HEADS, V_DIM) and out.dtype == np.uint16
    assert lse.shape == (8, HEADS) and lse.dtype == np.float32
    want_out, want_lse = reference(fmt, p)
    check(fmt, out, lse, want_out, want_lse)


def test_plan_reused_across_launches(kernels):
    """One plan, one work list and one workspace for ten layers, outputs
    reused: each layer's answer is its own."""
    kernel = kernels["emu", "fp8"]
    p = make_problem("fp8", [200, 33], seed=2)
    decode = mla.DecodeWrapper(kernel)
    decode.plan(p["qo_indptr"], p["kv_indptr"])
    out = np.empty((2, HEADS, V_DIM), np.uint16)
    lse = np.empty((2, HEADS), np.float32)
    rng = np.random.default_rng(3)
    for layer in range(10):
        p["q"] = make_problem("fp8", [200, 33], seed=10 + layer)["q"]
        p["kv"] = rng.permutation(p["kv"])
        got_out, got_lse = decode.run(p["q"], p["kv"], p["kv_scale"],
                                      p["qo_indptr"], p["kv_indptr"],
                                      out=out, lse=lse)
        assert got_out is out and got_lse is lse
        want_out, want_lse = reference("fp8", p)
        check("fp8", out, lse, want_out, want_lse)


def test_torch_style_bf16_is_accepted_as_uint16(kernels):
    kernel = kernels["cpu", "bf16"]
    p = make_problem("bf16", [5], seed=4)
    plan = kernel.plan([0, 1], [0, 5])
    out = np.empty((1, HEADS, V_DIM), np.uint16)
    lse = np.empty((1, HEADS), np.float32)
    kernel.launch(plan, q=p["q"], kv=p["kv"], kv_scale=None,
                  qo_indptr=p["qo_indptr"], kv_indptr=p["kv_indptr"], out=out,
                  lse=lse, work_list=None, workspace=None)
    check("bf16", out, lse, *reference("bf16", p))


#===----------------------------------------------------------------------===#
# Bad arguments: the documented exception, with the argument's name
#===----------------------------------------------------------------------===#


@pytest.fixture
def launchable(kernels):
    kernel = kernels["emu", "fp8"]
    p = make_problem("fp8", [70, 3], seed=5)
    plan = kernel.plan(p["qo_indptr"], p["kv_indptr"])
    info = plan.info
    work_list = np.zeros(info["work_list_bytes"], np.uint8)
    plan.write_work_list(work_list)
    args = dict(q=p["q"], kv=p["kv"], kv_scale=p["kv_scale"],
                qo_indptr=p["qo_indptr"], kv_indptr=p["kv_indptr"],
                out=np.empty((2, HEADS, V_DIM), np.uint16),
                lse=np.empty((2, HEADS), np.float32), work_list=work_list,
                workspace=np.empty(info["workspace_bytes"], np.uint8))
    return kernel, plan, args


BAD_ARGUMENTS = [
    ("q", [[1, 2]], TypeError, "q: expected an array with __dlpack__"),
    ("q", np.zeros((2, HEADS, QK_DIM), np.float32), TypeError, "q: expected bfloat16"),
    ("q", np.zeros((3, HEADS, QK_DIM), np.uint16), ValueError, "q: expected shape [2, 16, 576]"),
    ("q", np.zeros((2, QK_DIM, HEADS), np.uint16).transpose(0, 2, 1), ValueError, "q: must be contiguous"),
    ("kv", np.zeros((73, QK_DIM // 2), np.uint8), ValueError, "kv: expected shape [?, 576]"),
    ("kv", np.zeros((73, QK_DIM), np.float64), TypeError, "kv: expected uint8"),
    ("kv", np.zeros((50, QK_DIM), np.uint8), ValueError, "num_kv_rows 50"),
    ("kv_scale", None, TypeError, "kv_scale: expected an array"),
    ("kv_scale", np.zeros(2, np.float32), ValueError, "kv_scale: expected shape [1]"),
    ("qo_indptr", np.zeros(3, np.int64), TypeError, "qo_indptr: expected int32"),
    ("kv_indptr", np.zeros(4, np.int32), ValueError, "kv_indptr: expected shape [3]"),
    ("out", np.empty((2, HEADS, V_DIM), np.float32), TypeError, "out: expected bfloat16"),
    ("lse", np.empty((2, HEADS + 1), np.float32), ValueError, "lse: expected shape [2, 16]"),
    ("work_list", np.zeros(3, np.uint8), ValueError, "work_list: has 3 bytes"),
    ("workspace", np.zeros(16, np.uint8), ValueError, "workspace: has 16 bytes"),
    ("out", np.frombuffer(bytes(2 * HEADS * V_DIM * 2), np.uint16).reshape(2, HEADS, V_DIM), TypeError, "out: cannot be exported"),
]


@pytest.mark.parametrize("name,value,error,message", BAD_ARGUMENTS,
                         ids=[f"{a[0]}-{i}" for i, a in enumerate(BAD_ARGUMENTS)])
def test_bad_argument(launchable, name, value, error, message):
    kernel, plan, args = launchable
    args[name] = value
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]").replace("?", r"\?")):
        kernel.launch(plan, **args)


def test_bad_context_plan_and_files(kernels, tmp_path):
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        mla.Context("tpu")
    ctx = mla.Context("emu")
    with pytest.raises(OSError, match="MLA_ERROR_IO"):
        ctx.load(str(tmp_path / "missing.mla"))
    (tmp_path / "junk.mla").write_bytes(b"\x42" * 4096)
    with pytest.raises(ValueError, match="MLA_ERROR_INVALID_ARTIFACT"):
        ctx.load(str(tmp_path / "junk.mla"))
    with pytest.raises(ValueError, match="MLA_ERROR_INVALID_ARTIFACT"):
        ctx.load_bytes(b"")
    kernel = kernels["emu", "fp8"]
    with pytest.raises(ValueError, match="query tokens"):
        kernel.plan([0, 5], [0, 10])
    with pytest.raises(ValueError, match="same length"):
        kernel.plan([0, 1], [0, 1, 2])
    with pytest.raises(TypeError, match="qo_indptr: expected int32"):
        kernel.plan("abc", [0, 1])
    other = kernels["emu", "bf16"]
    plan = other.plan([0, 1], [0, 1])
    p = make_problem("fp8", [1], seed=6)
    with pytest.raises(ValueError, match="another kernel"):
        kernel.launch(plan, q=p["q"], kv=p["kv"], kv_scale=p["kv_scale"],
                      qo_indptr=p["qo_indptr"], kv_indptr=p["kv_indptr"],
                      out=np.empty((1, HEADS, V_DIM), np.uint16),
                      lse=np.empty((1, HEADS), np.float32),
                      work_list=np.zeros(64, np.uint8),
                      workspace=np.zeros(1 << 20, np.uint8))
    decode = mla.DecodeWrapper(kernel)
    with pytest.raises(ValueError, match="before plan"):
        decode.run(p["q"], p["kv"], p["kv_scale"], p["qo_indptr"], p["kv_indptr"])


def test_bf16_cache_takes_no_scale(kernels):
    kernel = kernels["emu", "bf16"]
    p = make_problem("bf16", [3], seed=7)
    decode = mla.DecodeWrapper(kernel)
    decode.plan(p["qo_indptr"], p["kv_indptr"])
    with pytest.raises(ValueError, match="a bf16 cache has no scale"):
        decode.run(p["q"], p["kv"], np.ones(1, np.float32), p["qo_indptr"],
                   p["kv_indptr"])
