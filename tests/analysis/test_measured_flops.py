"""Measured first: every FLOP counter family Nsight Compute and rocprof write, precision from the
counter that fired, and no fall-back to the model for a kernel with counters.

On the H200 full-set reports (sample_traces/, made with ``ncu --set full`` on
../shared/samples/h200_workload.py: x is 4x1024x2048 bf16, so M = 4096) the nvjet GEMMs' tensor
operation counters equal 2·M·N·K exactly:

    qkv   2048 -> 6144:  2·4096·6144·2048 = 103,079,215,104
    o_proj 2048 -> 2048: 2·4096·2048·2048 =  34,359,738,368
    up    2048 -> 8192:  2·4096·8192·2048 = 137,438,953,472
    down  8192 -> 2048:  2·4096·2048·8192 = 137,438,953,472
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pandas as pd

from kviewer.analysis.sol import speed_of_light
from kviewer.io.ncu.common import measured_columns
from kviewer.io.rocprof.common import flops_columns

from tests.analysis.conftest import load_with

M = 4 * 1024
GEMMS = {2 * M * 6144 * 2048, 2 * M * 2048 * 2048, 2 * M * 8192 * 2048}


def _raw_counter(path: Path, metric: str) -> pd.Series:
    """The metric's column of an ``ncu --csv --page raw`` export, read independently of kviewer."""
    with gzip.open(path, "rt") as f:
        text = f.read()
    # ncu writes its ==PROF== lines (and the program's output) to stdout before the CSV
    df = pd.read_csv(io.StringIO(text[text.index('"ID",'):]), low_memory=False)
    df = df.iloc[1:]  # the units row
    return df.set_index("Kernel Name")[metric].astype(str).str.replace(",", "").astype(float)


def test_block_full_set_gemm_tensor_flops_are_2mnk(sample_traces: Path) -> None:
    path = sample_traces / "h200_llm_block_eager_full.raw.csv.gz"
    t = load_with("kviewer.io.ncu.csv_export", path)
    k = t.kernels
    gemm = k[k["name"].astype(str).str.startswith("nvjet")]
    assert len(gemm) == 10  # launches 41-70: qkv, o_proj, up, down of block 1, then qkv... of block 2
    assert set(gemm["flops_tensor"].tolist()) == GEMMS
    assert (gemm["tensor_precision"].astype(str) == "bf16").all()
    # the same numbers as ncu's own counter, read straight from the CSV
    ncu = _raw_counter(path, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    np.testing.assert_array_equal(np.sort(gemm["flops_tensor"].to_numpy()), np.sort(ncu[ncu.index.str.startswith("nvjet")].to_numpy()))
    sol = speed_of_light(t)
    g = sol[sol["name"].str.startswith("nvjet")]
    assert (g["flops_source"] == "measured").all() and (g["kind"] == "gemm").all()
    assert (g["precision"] == "bf16").all() and (g["pipe"] == "tensor").all() and (g["peak_field"] == "bf16_tflops").all()
    assert (g["sol_status"] == "ok").all() and g["sol_pct"].between(50, 100).all()
    # flash attention: measured from its tensor counter too (a causal kernel computes the
    # diagonal tiles whole: more than half of the full 4·B·H·L²·D, less than all of it)
    a = sol[sol["name"].str.contains("sdpa")]
    full = 4 * 4 * 16 * 1024 * 1024 * 128
    assert (a["kind"] == "attention").all() and (a["flops_source"] == "measured").all()
    assert ((a["flops"] > full / 2) & (a["flops"] < full)).all()
    # layer norm and the elementwise kernels: FP32 SASS counters, vector pipe
    ln = sol[sol["name"].str.contains("layer_norm")]
    assert (ln["pipe"] == "vector").all() and (ln["precision"] == "fp32").all() and (ln["kind"] == "norm").all()


def test_ncu_rep_and_its_raw_csv_agree(sample_traces: Path) -> None:
    rep = load_with("kviewer.io.ncu.report", sample_traces / "h200_block_fullset_3k.ncu-rep.gz").kernels
    raw = load_with("kviewer.io.ncu.csv_export", sample_traces / "h200_block_fullset_3k.raw.csv.gz").kernels
    assert rep["flops_tensor"].tolist() == raw["flops_tensor"].tolist()
    assert set(rep["flops_tensor"].dropna()) - {0.0} <= GEMMS and (rep["flops_tensor"] > 0).sum() == 2
    assert rep["tensor_precision"].astype(str).tolist() == raw["tensor_precision"].astype(str).tolist()


def test_resnet_convolutions_measured_from_tensor_counters(sample_traces: Path) -> None:
    t = load_with("kviewer.io.ncu.csv_export", sample_traces / "h200_resnet18_fullset.raw.csv.gz")
    sol = speed_of_light(t)
    conv = sol[sol["name"].str.contains("fprop")]
    assert len(conv) and (conv["kind"] == "conv").all() and (conv["flops_source"] == "measured").all()
    assert (conv["precision"] == "bf16").all() and (conv["pipe"] == "tensor").all()
    tr = sol[sol["name"].str.contains("nchwToNhwc|nhwcToNchw")]
    assert len(tr) and (tr["kind"] == "copy").all() and (tr["pipe"] == "vector").all()
    assert (sol["sol_pct"].dropna() <= 100).all()


def test_sass_counters_count_an_fma_as_two_flops() -> None:
    wide = {
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": np.array([1.0]),
        "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": np.array([2.0]),
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": np.array([3.0]),
        "sm__ops_path_tensor_src_fp16.sum": np.array([100.0]),
        "sm__ops_path_tensor_src_tf32_dst_fp32.sum": np.array([20.0]),
        "gpu__time_duration.sum": np.array([1000.0]),
    }
    cols = measured_columns(wide, 1)
    assert cols["flops_fp32"][0] == 1 + 2 + 2 * 3
    assert cols["flops_tensor"][0] == 120 and cols["tensor_precision"][0] == "fp16"  # the family that fired most
    assert np.isnan(cols["flops_fp64"][0])  # not collected: unknown, not 0


def test_rocprof_valu_and_mfma_counters() -> None:
    counters = {
        "SQ_INSTS_VALU_ADD_F32": np.array([10.0]), "SQ_INSTS_VALU_MUL_F32": np.array([5.0]),
        "SQ_INSTS_VALU_FMA_F32": np.array([4.0]), "SQ_INSTS_VALU_TRANS_F32": np.array([1.0]),
        "SQ_INSTS_VALU_MFMA_MOPS_BF16": np.array([3.0]),
    }
    cols = flops_columns(counters, 1)
    assert cols["flops_fp32"][0] == 64 * (10 + 5 + 1 + 2 * 4)  # per wavefront of 64 lanes, FMA = 2
    assert cols["flops_tensor"][0] == 512 * 3 and cols["tensor_precision"][0] == "bf16"
    assert "flops_fp16" not in cols  # not collected


def test_same_kernel_same_bound_in_ncu_and_torch(sample_traces: Path) -> None:
    # one meaning of "bound" for every source: the layer norm and GELU of the same program are
    # memory-bound in the full-set Nsight Compute report and in the torch trace
    ncu = speed_of_light(load_with("kviewer.io.ncu.csv_export", sample_traces / "h200_llm_block_eager_full.raw.csv.gz"))
    torch = speed_of_light(load_with("kviewer.io.torch", sample_traces / "h200_block2_eager.pt.trace.json.gz"))
    for pattern in ("layer_norm", "Gelu"):
        a = set(ncu.loc[ncu["name"].str.contains(pattern), "bound"])
        b = set(torch.loc[torch["name"].str.contains(pattern), "bound"])
        assert a == b == {"memory"}, (pattern, a, b)


def test_tensor_totals_and_their_splits_are_not_both_counted() -> None:
    # a total per source type and its split by destination / sparsity: the operations once
    wide = {
        "sm__ops_path_tensor_src_fp16.sum": np.array([100.0]),
        "sm__ops_path_tensor_src_fp16_dst_fp16.sum": np.array([40.0]),
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum": np.array([60.0]),
        "sm__ops_path_tensor_src_fp8_sparsity_off.sum": np.array([7.0]),
        "sm__ops_path_tensor_src_fp8_sparsity_on.sum": np.array([3.0]),
        "gpu__time_duration.sum": np.array([1000.0]),
    }
    cols = measured_columns(wide, 1)
    assert cols["flops_tensor"][0] == 100 + 10 and cols["tensor_precision"][0] == "fp16"
    # only the per-instruction split: summed over instructions, each split level once
    wide = {
        "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum": np.array([50.0]),
        "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_on.sum": np.array([0.0]),
        "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32_sparsity_off.sum": np.array([5.0]),
        "gpu__time_duration.sum": np.array([1000.0]),
    }
    cols = measured_columns(wide, 1)
    assert cols["flops_tensor"][0] == 55 and cols["tensor_precision"][0] == "bf16"


def test_half_precision_counts_a_half2_pair() -> None:
    # as the HierarchicalHalfRooflineChart section: hadd/hmul x2, hfma x4
    wide = {
        "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": np.array([1.0]),
        "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": np.array([1.0]),
        "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": np.array([1.0]),
        "gpu__time_duration.sum": np.array([1000.0]),
    }
    assert measured_columns(wide, 1)["flops_fp16"][0] == 2 + 2 + 4


def test_every_tensor_precision_measured_from_its_counter(sample_traces: Path) -> None:
    # four GEMMs of M=4096, N=2048, K=1024 under ncu --set full: the precision is the counter's
    path = sample_traces / "h200_gemms_full.raw.csv.gz"
    sol = speed_of_light(load_with("kviewer.io.ncu.csv_export", path))
    two_mnk = 2 * 4096 * 2048 * 1024
    by_prec = dict(zip(sol["precision"], sol["flops"]))
    assert set(by_prec) == {"fp16", "tf32", "bf16", "fp8"}
    assert by_prec["fp16"] == by_prec["bf16"] == two_mnk
    # TF32 and FP8 kernels: whatever the hardware counted, exactly (within 0.5 % of 2·M·N·K)
    for prec, metric in (("tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum"), ("fp8", "sm__ops_path_tensor_src_fp8_sparsity_off.sum")):
        ncu = _raw_counter(path, metric)
        assert by_prec[prec] == ncu.max() and abs(by_prec[prec] / two_mnk - 1) < 0.005
    assert (sol["kind"] == "gemm").all() and (sol["pipe"] == "tensor").all() and (sol["flops_source"] == "measured").all()
    assert (sol["peak_field"] == sol["precision"] + "_tflops").all()
