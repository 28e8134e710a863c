"""The FLOP/byte model of PyTorch ops, by formula and on the real H200 traces."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kviewer.analysis.model import kernel_kind, model_kernels, op_work
from kviewer.core import Trace, TraceMeta, make_table

BF16 = "c10::BFloat16"


def w(name: str, dims: list, types: list, flops: float = math.nan):  # type: ignore[no-untyped-def]
    return op_work(name, json.dumps(dims), json.dumps(types), flops)


def test_matmul_family() -> None:
    mm = w("aten::mm", [[4096, 2048], [2048, 6144]], [BF16, BF16])
    assert mm.kind == "gemm" and mm.precision == "bf16" and mm.pipe == "tensor"
    assert mm.flops == 2 * 4096 * 2048 * 6144
    assert mm.bytes == 2 * (4096 * 2048 + 2048 * 6144 + 4096 * 6144)
    # the out= variant torch.compile records: the third tensor is the output, not an operand
    out = w("aten::mm", [[4096, 2048], [2048, 6144], [4096, 6144]], [BF16, BF16, BF16])
    assert (out.flops, out.bytes) == (mm.flops, mm.bytes)
    addmm = w("aten::addmm", [[6144], [4096, 2048], [2048, 6144], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert addmm.flops == mm.flops and addmm.bytes == mm.bytes + 6144 * 2
    lin = w("aten::linear", [[4, 1024, 2048], [6144, 2048], []], [BF16, BF16, ""])
    assert lin.flops == mm.flops
    bmm = w("aten::bmm", [[8, 128, 64], [8, 64, 32]], ["float", "float"])
    assert bmm.flops == 2 * 8 * 128 * 64 * 32 and bmm.precision == "fp32"
    mat = w("aten::matmul", [[4, 1024, 2048], [2048, 8192]], [BF16, BF16])
    assert mat.flops == 2 * 4096 * 2048 * 8192
    assert math.isnan(w("aten::mm", [[4, 5], [6, 7]], ["float", "float"]).flops)  # inner dims differ


def test_flops_arg_wins() -> None:
    got = w("aten::mm", [[4096, 2048], [2048, 6144]], [BF16, BF16], flops=123.0)
    assert got.flops == 123.0 and "op arg" in got.note


def test_attention() -> None:
    q = [4, 16, 1024, 128]
    a = w("aten::_cudnn_attention_forward", [q, q, q, [], []], [BF16, BF16, BF16, "", "Scalar"])
    assert a.kind == "attention" and a.flops == 4 * 4 * 16 * 1024 * 1024 * 128
    assert "causal" in a.note
    fl = w("aten::_flash_attention_forward", [[4, 1024, 16, 128]] * 3, [BF16] * 3)
    assert fl.flops == a.flops  # (batch, seq, heads, dim) layout


def test_elementwise_norm_and_unknown() -> None:
    x = [4, 1024, 2048]
    n = 4 * 1024 * 2048
    add = w("aten::add", [x, x, []], [BF16, BF16, "Scalar"])
    assert add.kind == "elementwise" and add.bytes == 3 * n * 2 and add.bytes_written == n * 2
    bcast = w("aten::mul", [x, [2048]], [BF16, BF16])
    assert bcast.bytes == n * 2 + 2048 * 2 + n * 2
    scalar = w("aten::mul", [[4, 1024, 8192], []], [BF16, "double"])
    assert scalar.bytes == 2 * 4 * 1024 * 8192 * 2
    inplace = w("aten::add_", [x, x], [BF16, BF16])
    assert inplace.bytes == 3 * n * 2
    fill = w("aten::fill_", [x, []], [BF16, "Scalar"])
    assert fill.bytes == n * 2 and fill.kind == "fill" and fill.flops == 0  # writes, reads nothing, no math
    cmp = w("aten::gt", [x, x], ["float", "float"])
    assert cmp.bytes_written == n  # bool output
    ln = w("aten::native_layer_norm", [x, [], [2048], [2048], []], [BF16, "ScalarList", BF16, BF16, "Scalar"])
    assert ln.kind == "norm"
    assert ln.bytes == n * 2 + 2 * 2048 * 2 + n * 2 + 4096 * 4 * 2  # x, w, b in; y, mean, rstd out
    sm = w("aten::_softmax", [x, [], []], ["float", "Scalar", "Scalar"])
    assert sm.bytes == 2 * n * 4
    unknown = w("aten::frobnicate", [x], [BF16])
    assert math.isnan(unknown.flops) and math.isnan(unknown.bytes) and "no model" in unknown.note
    empty = w("aten::add", [[], []], ["Scalar", "Scalar"])
    assert math.isnan(empty.bytes)


def test_kernel_kind_from_names() -> None:
    assert kernel_kind("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") == "gemm"
    assert kernel_kind("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7") == "attention"
    assert kernel_kind("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>") == "elementwise"
    assert kernel_kind("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16>") == "norm"
    assert kernel_kind("triton_poi_fused__unsafe_view_add_gelu_mul_2") == "elementwise"
    assert kernel_kind("triton_red_fused__unsafe_view_add_native_layer_norm_1") == "norm"
    assert kernel_kind("Cijk_Alik_Bljk_HHS_BH_MT128x128x32") == "gemm"


def _op_trace(kernel_names: list[str], op: tuple[str, str, str]) -> Trace:
    n = len(kernel_names)
    kernels = make_table(
        "kernels",
        n,
        {"name": kernel_names, "short_name": kernel_names, "start": np.arange(n) * 100, "dur": np.full(n, 50), "external_id": np.full(n, 7)},
    )
    cpu = make_table(
        "cpu_slices",
        2,
        {
            "name": ["aten::linear", op[0]],
            "category": ["op", "op"],
            "start": [0, 1],
            "end": [1000, 900],
            "depth": [0, 1],
            "external_id": [6, 7],
            "input_dims": ["[]", op[1]],
            "input_types": ["[]", op[2]],
        },
    )
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, cpu_slices=cpu)


def test_multi_kernel_op_attribution() -> None:
    mm = ("aten::mm", "[[256, 512], [512, 1024]]", '["float", "float"]')
    t = _op_trace(["sm80_xmma_gemm_f32f32_splitK", "splitKreduce_kernel"], mm)
    m = model_kernels(t)
    assert m["model_flops"].iloc[0] == 2 * 256 * 512 * 1024
    assert math.isnan(m["model_flops"].iloc[1]) and "helper kernel" in m["model_note"].iloc[1]
    assert "attributed to this one" in m["model_note"].iloc[0]
    add = ("aten::add", "[[1000], [1000]]", '["float", "float"]')
    t = _op_trace(["elementwise_a", "elementwise_b"], add)
    m = model_kernels(t)
    assert m["model_bytes"].tolist() == [6000.0, 6000.0]
    assert "in proportion to their time" in m["model_note"].iloc[0]


# the workload (../shared/samples/h200_workload.py): x is (b=4, t=1024, d=2048), ff=8192, 16 heads
GEMM_FLOPS = {
    (2048, 6144): 2 * 4096 * 2048 * 6144,  # qkv
    (2048, 2048): 2 * 4096 * 2048 * 2048,  # o_proj
    (2048, 8192): 2 * 4096 * 2048 * 8192,  # up
    (8192, 2048): 2 * 4096 * 8192 * 2048,  # down
}


@pytest.mark.parametrize("which", ["eager", "compiled"])
def test_h200_gemm_flops_match_shapes_and_flops_arg(which: str, request: pytest.FixtureRequest) -> None:
    trace: Trace = request.getfixturevalue(which)
    m = model_kernels(trace)
    gemm = m[m["op_name"] == "aten::mm"]
    assert len(gemm) == 16 * 3  # 4 blocks x 4 GEMMs x 3 steps
    c = trace.cpu_slices
    for op_id, flops in zip(gemm["op_id"], gemm["model_flops"]):
        dims = json.loads(str(c["input_dims"].iloc[op_id]))
        assert flops == GEMM_FLOPS[(dims[1][0], dims[1][1])]
        arg = float(c["flops"].iloc[op_id])
        if not math.isnan(arg):  # these files carry no FLOPs arg; when one does, it must agree
            assert flops == arg
    assert (gemm["kind"] == "gemm").all() and (gemm["precision"] == "bf16").all()
    attn = m[m["kind"] == "attention"]
    # SDPA with is_causal=True (Concrete Inputs): 2·B·H·L·L·(D + Dv) / 2 = 4·B·H·L²·D / 2
    assert len(attn) == 12 and (attn["model_flops"] == 4 * 4 * 16 * 1024 * 1024 * 128 / 2).all()


def test_op_work_cache_holds_one_entry_per_op_without_a_flops_arg() -> None:
    """NaN as an lru_cache key: every absent FLOPs arg (a new NaN object each time) was a new
    entry, so the cache never hit and grew with every trace opened (the stress test's RSS)."""
    import numpy as np

    from kviewer.analysis import model

    model._op_work.cache_clear()
    for value in np.full(50, np.nan):
        model.op_work("aten::add", "[[4, 8], [4, 8]]", '["float", "float"]', float(value))
    assert model._op_work.cache_info().currsize == 1
    assert model._op_work.cache_info().hits == 49
