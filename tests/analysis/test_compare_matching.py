"""Name normalisation, kernel kinds, fused-kernel links and the matching ladder (no files)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kviewer.analysis import matching
from kviewer.analysis.compare import (
    CHANGED,
    ONLY_A,
    ONLY_B,
    UNCHANGED,
    NoiseModel,
    compare,
)
from kviewer.analysis.matching import (
    fused_into,
    fused_ops,
    kernel_kind,
    normalise_kernel_name,
    variant_name,
)
from kviewer.core import Trace, TraceMeta, make_table

# the same kernels as the PyTorch profiler (cupti) and Nsight Systems name them, from the
# h200_llm_train traces
CUPTI_NSYS_PAIRS = [
    (
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1, 16, 8>(char*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
        "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<(unsigned int)2>, unsigned int, (int)3, (int)128, (int)1, (int)16, (int)8>(char *, at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)",
    ),
    (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float, 32u, 32u, 256u, false, true, false>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)",
        "void at::native::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float, (unsigned int)32, (unsigned int)32, (unsigned int)256, (bool)0, (bool)1, (bool)0>(long, long, const T1 *, const T1 *, const T2 *, const T2 *, T1 *, T1 *)",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, std::array<char*, 2ul>)",
        "void at::native::vectorized_elementwise_kernel<(int)4, void at::native::<unnamed>::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase &, T2)::[lambda(T1) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)",
    ),
]


@pytest.mark.parametrize("cupti, nsys", CUPTI_NSYS_PAIRS)
def test_demangler_styles_normalise_to_one_name(cupti: str, nsys: str) -> None:
    assert normalise_kernel_name(cupti) == normalise_kernel_name(nsys)
    assert "(" not in normalise_kernel_name(cupti).replace("(anonymous namespace)", "")


def test_template_arguments_kept_or_stripped() -> None:
    a = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
    b = a.replace("<8,", "<4,")
    assert normalise_kernel_name(a) != normalise_kernel_name(b)
    assert normalise_kernel_name(a, strip_templates=True) == normalise_kernel_name(b, strip_templates=True) == "vectorized_elementwise_kernel"
    assert variant_name(a) == variant_name(b)


def test_suffixes_removed() -> None:
    assert normalise_kernel_name("triton_poi_fused__unsafe_view_add_gelu_mul_2") == normalise_kernel_name("triton_poi_fused__unsafe_view_add_gelu_mul_11")
    assert normalise_kernel_name("Cijk_Alik_Bljk_HHS_BH_MT128x128x32 (.kd)") == "Cijk_Alik_Bljk_HHS_BH_MT128x128x32"
    assert normalise_kernel_name("_attn_fwd_0d1d2d3de4de5c") == "_attn_fwd"
    # cuDNN's trailing "kernel0_0" is part of the name, not an index suffix
    assert normalise_kernel_name("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_kernel0_0").endswith("kernel0_0")


def test_gemm_tiles_and_vendors_share_a_kind() -> None:
    nv_a = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    nv_b = "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNT"
    assert variant_name(nv_a) == variant_name("nvjet_sm90_tst_128x128_64x4_2x1_h_bz_coopA_TNT")
    assert variant_name(nv_a) != variant_name(nv_b)  # h vs v layouts stay apart
    cijk = "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB0_AFC1_AFEM1"
    assert variant_name(cijk) == variant_name(cijk.replace("MT16x16x128", "MT32x64x128"))
    cutlass = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)"
    assert variant_name(cutlass).startswith("cutlass_80_tensorop_bf16_s16816gemm")
    for name in (nv_a, cijk, cutlass, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1"):
        assert kernel_kind(name) == "gemm", name
    assert kernel_kind("attn_fwd") == kernel_kind("void pytorch_flash::flash_fwd_kernel<T>(P)") == "attention"
    assert kernel_kind("triton_red_fused__unsafe_view_add_native_layer_norm_1") == "norm"
    assert kernel_kind("triton_poi_fused__unsafe_view_add_gelu_mul_2") == "elementwise"


def test_fused_kernel_names_link_to_the_ops_they_fuse() -> None:
    fused = fused_ops("triton_poi_fused__unsafe_view_add_gelu_mul_2")
    assert fused == "__unsafe_view_add_gelu_mul_"
    assert fused_into("aten::add", [], fused)
    assert fused_into("aten::add_", [], fused)
    assert fused_into("aten::gelu", [], fused)
    assert not fused_into("aten::mm", [], fused)
    assert not fused_into("aten::addmm", [], fused)  # "add" is a word of "addmm", not a match
    ln = fused_ops("triton_red_fused__unsafe_view_add_native_layer_norm_1")
    assert ln is not None and fused_into("aten::native_layer_norm", [], ln) and fused_into("aten::layer_norm", [], ln)
    assert fused_ops("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") is None
    # without an op (an Nsight Systems trace), the kernel name's words decide
    assert fused_into("", ["void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(...)>(int)"], fused)
    assert not fused_into("", ["void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>(int)"], fused)


# ---------------------------------------------------------------------------------------------
# synthetic traces


def _trace(names: list[str], durs: list[int], grids: list[int] | None = None, path: str = "t") -> Trace:
    n = len(names)
    starts = np.cumsum([0] + [d + 100 for d in durs[:-1]]).astype(np.int64)[:n]
    cols = {"name": names, "short_name": names, "start": starts, "dur": np.asarray(durs, dtype=np.int64), "device": np.zeros(n, np.int32)}
    if grids is not None:
        cols.update(grid_x=grids, grid_y=[1] * n, grid_z=[1] * n, block_x=[128] * n, block_y=[1] * n, block_z=[1] * n)
    return Trace(TraceMeta(path=path, source_format="test"), kernels=make_table("kernels", n, cols))


def test_statuses_and_noise() -> None:
    a = _trace(["gemm_a"] * 10 + ["ew"] * 10 + ["old"] * 2, [1000] * 10 + [500] * 10 + [70, 70])
    # gemm 1% slower: within the 2% floor; ew 10% slower; "old" gone; "new" appears
    b = _trace(["gemm_a"] * 10 + ["ew"] * 10 + ["new"], [1010] * 10 + [550] * 10 + [40])
    r = compare(a, b)
    st_ = dict(zip(r.groups["name"], r.groups["status"]))
    assert st_ == {"gemm_a": UNCHANGED, "ew": CHANGED, "old": ONLY_A, "new": ONLY_B}
    assert int(r.groups["delta_ns"].sum()) == r.total_b_ns - r.total_a_ns == (10 * 10 + 10 * 50 + 40 - 140)
    # sorted by |delta|
    assert list(r.groups["name"]) == ["ew", "old", "gemm_a", "new"]
    row = r.groups.set_index("name").loc["gemm_a"]
    assert row["noise_ns"] == pytest.approx(0.02 * 10_000)


def test_spread_widens_the_noise_band() -> None:
    rng = np.random.default_rng(1)
    da = rng.normal(1000, 200, size=50).round().astype(int).tolist()
    db = rng.normal(1000, 200, size=50).round().astype(int).tolist()
    r = compare(_trace(["k"] * 50, da), _trace(["k"] * 50, db))
    row = r.groups.iloc[0]
    spread = 2 * np.sqrt(50 * np.var(da, ddof=1) + 50 * np.var(db, ddof=1))
    assert row["noise_ns"] == pytest.approx(max(0.02 * sum(da), spread))
    assert row["status"] == (UNCHANGED if abs(sum(db) - sum(da)) <= row["noise_ns"] else CHANGED)


def test_launch_size_splits_groups_then_names_match_without_it() -> None:
    a = _trace(["k", "k", "k"], [10, 10, 30], grids=[1, 1, 2])
    b = _trace(["k", "k"], [10, 40], grids=[1, 4])
    r = compare(a, b)
    by = dict(zip(r.groups["matched_by"], r.groups["count_a"]))
    # grid 1 matches exactly; grid 2 (A) and grid 4 (B) meet at the name level
    assert by == {"name+launch": 2, "name": 1}
    assert int(r.groups["delta_ns"].sum()) == 50 - 50


def test_self_compare_is_all_unchanged_with_zero_deltas() -> None:
    t = _trace(["a", "b", "a", "c"], [5, 7, 9, 11])
    r = compare(t, t)
    assert (r.groups["status"] == UNCHANGED).all() and (r.groups["delta_ns"] == 0).all()
    assert r.align_offset_ns == 0


def test_empty_traces_compare() -> None:
    e = Trace(TraceMeta(path="e", source_format="test"))
    r = compare(e, _trace(["x"], [5]))
    assert list(r.groups["status"]) == [ONLY_B] and r.total_a_ns == 0 and r.slower_pct == float("inf")
    r = compare(e, e)
    assert len(r.groups) == 0 and r.slower_pct == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["gemm_1", "gemm_2", "triton_poi_fused_add_3", "ew", "nvjet_sm90_tst_64x8_h"]), st.integers(1, 10**7), st.integers(1, 3)), max_size=40),
    st.lists(st.tuples(st.sampled_from(["gemm_1", "triton_poi_fused_add_7", "ew", "nvjet_sm90_tst_128x8_h", "other"]), st.integers(1, 10**7), st.integers(1, 3)), max_size=40),
)
def test_rows_partition_both_reports(ka: list[tuple[str, int, int]], kb: list[tuple[str, int, int]]) -> None:
    a = _trace([k[0] for k in ka], [k[1] for k in ka], [k[2] for k in ka])
    b = _trace([k[0] for k in kb], [k[1] for k in kb], [k[2] for k in kb])
    r = compare(a, b, noise=NoiseModel())
    g = r.groups
    assert int(g["delta_ns"].sum()) == r.total_b_ns - r.total_a_ns
    assert int(g["count_a"].sum()) == len(ka) and int(g["count_b"].sum()) == len(kb)
    # every kernel is in exactly one row, and the row's totals are its kernels' durations
    for side, t, rows in (("a", a, r.row_of_kernel_a), ("b", b, r.row_of_kernel_b)):
        dur = t.kernels["dur"].to_numpy()
        per_row = np.bincount(rows, weights=dur, minlength=len(g)) if len(rows) else np.zeros(len(g))
        assert np.array_equal(per_row.astype(np.int64), g[f"total_{side}_ns"].to_numpy())


def test_ladder_without_ops_has_no_op_levels() -> None:
    names = [lv.name for lv in matching.ladder(use_ops=False)]
    assert names == ["name+launch", "name", "variant", "kind"]
    assert all("op" not in n for n in names)
    with_ops = [lv.name for lv in matching.ladder(use_ops=True, use_launch=False)]
    # like with like: each op level first with the op's input shapes equal, then without
    assert with_ops == ["name+op+shapes", "variant+op+shapes", "kind+op+shapes", "op+shapes", "name+op", "variant+op", "kind+op", "op"]
    # no level pairs two precisions
    assert all("precision" in lv.keys for flag in (True, False) for lv in matching.ladder(use_ops=flag))


@pytest.mark.parametrize(
    "rep, csv",
    [
        # the .ncu-rep and its ncu --csv export name one kernel differently (same run, same tool)
        ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)",
         "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>(int, T2, T3)"),
        ("void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)0>(int, T2, const T1 *)",
         "void at::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, 0>(int, T2, const T1 *)"),
    ],
)
def test_ncu_report_and_csv_spellings_normalise_to_one_name(rep: str, csv: str) -> None:
    assert normalise_kernel_name(rep) == normalise_kernel_name(csv)
    torch = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float)"
    assert normalise_kernel_name(torch) == normalise_kernel_name(csv if "layer_norm" in csv else torch)
