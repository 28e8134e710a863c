"""Speed of light per kernel: modelled (PyTorch) and measured (Nsight Compute) work."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.sol import SOL_COLUMNS, sol_summary, sol_warnings, speed_of_light
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.errors import AnalysisError

from .conftest import load_with


def test_h200_eager_sol(eager: Trace) -> None:
    sol = speed_of_light(eager)
    assert list(sol.columns) == SOL_COLUMNS
    assert (sol["gpu"] == "h200").all()
    gemm = sol[sol["op_name"] == "aten::mm"]
    assert (gemm["flops_source"] == "modelled").all() and (gemm["bound"] == "compute").all()
    assert (gemm["peak_field"] == "bf16_tflops").all()
    # T_SOL = FLOPs / 989.5 TFLOPS for these compute-bound GEMMs
    np.testing.assert_allclose(gemm["t_sol_ns"], gemm["flops"] / 989.5e12 * 1e9)
    assert gemm["sol_pct"].between(30, 100).all()
    # the residual add right after the o_proj GEMM (K = 2048) is memory-bound
    k = sol.reset_index(drop=True)
    after = [i + 1 for i in range(len(k) - 1) if k["op_name"].iloc[i] == "aten::mm" and k["op_name"].iloc[i + 1] == "aten::add"]
    assert len(after) == 24  # o_proj and down_proj, 4 blocks x 3 steps
    adds = k.iloc[after]
    assert (adds["bound"] == "memory").all() and (adds["kind"] == "elementwise").all()
    np.testing.assert_allclose(adds["bytes"], 3 * 4 * 1024 * 2048 * 2)
    np.testing.assert_allclose(adds["t_sol_ns"], adds["bytes"] / 4.8e12 * 1e9)
    assert adds["sol_pct"].between(50, 100).all()
    assert (sol["intensity"] > 0).all()
    summary = sol_summary(sol)
    assert 0 < summary["sol_ns"] < summary["kernel_ns"]


def test_device_override(eager: Trace) -> None:
    sol = speed_of_light(eager, device="H100 PCIe")
    assert (sol["gpu"] == "h100_pcie").all()
    gemm = sol[sol["op_name"] == "aten::mm"]
    np.testing.assert_allclose(gemm["t_compute_ns"], gemm["flops"] / 756.5e12 * 1e9)
    # GEMMs that ran on an H200 are faster than an H100 PCIe's peak allows: marked, never > 100%
    fast = gemm["t_compute_ns"] > gemm["dur"]
    assert fast.any() and (gemm.loc[fast, "sol_status"] == "exceeds_peak").all()
    assert (gemm.loc[fast, "sol_reason"] == "modelled_flops").all() and gemm.loc[fast, "sol_pct"].isna().all()
    assert (sol["sol_pct"].dropna() <= 100).all()
    with pytest.raises(AnalysisError, match="--device"):
        speed_of_light(eager, device="GeForce 256")


def _ncu_like() -> Trace:
    """Three kernels with Nsight Compute's counters (values of the first kernels of
    samples/ncu/h200_llm_block_eager.raw.csv: the residual add, a layer norm, a GEMM)."""
    names = [
        "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>>",
        "void at::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, 0>",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
    ]
    dur = np.array([12800, 18656, 136768])
    dram_tbs = np.array([2.899020, 0.939595, 0.846944])
    kernels = make_table(
        "kernels",
        3,
        {
            "name": names,
            "short_name": names,
            "start": np.cumsum(np.r_[0, dur[:-1]]),
            "dur": dur,
            "serialised": np.ones(3, dtype=bool),
            "flops_fp32": [2 * 665.037204 * 12800 * 1.98, 2 * 2901.4 * 18656 * 1.98, 0.0],
            "flops_fp64": [0.0, 0.0, 0.0],
            "dram_bytes": dram_tbs * 1e12 * dur * 1e-9,
            "sm_throughput_pct": [14.554788, 65.510999, 86.701443],
            "mem_throughput_pct": [60.318088, 42.092486, 68.344153],
            "tensor_pipe_pct": [0.0, 0.857, 86.70],
        },
    )
    devices = make_table("devices", 1, {"id": [0], "name": np.array(["NVIDIA H200"], dtype=object), "sm_count": [132]})
    return Trace(meta=TraceMeta(path="x.ncu-rep", source_format="ncu-rep"), kernels=kernels, devices=devices)


def test_measured_counters_and_ncu_bound() -> None:
    sol = speed_of_light(_ncu_like())
    assert (sol["bytes_source"] == "measured").all()
    assert sol["flops_source"].tolist()[:2] == ["measured", "measured"]
    # the GEMM's tensor pipe was busy but no tensor FLOP counter was collected: not a measurement
    assert sol["flops_source"].iloc[2] == "unknown" and "tensor pipe active" in sol["note"].iloc[2]
    # Nsight Compute's own verdict (memory throughput above compute throughput -> memory) sits in
    # ncu_bound; bound is the roofline's verdict, the same as for any other source, and falls back
    # to Nsight's only where the roofline has none (the GEMM: FLOPs unknown)
    assert sol["ncu_bound"].tolist() == ["memory", "compute", "compute"]
    assert (sol["bound"].iloc[:2] == sol["bound_model"].iloc[:2]).all()
    assert sol["bound_model"].iloc[2] == "unknown" and sol["bound"].iloc[2] == "compute"
    assert sol["sol_pct"].iloc[:2].between(0, 100).all()
    # the GEMM's FLOPs are unknown: its speed of light is unknown, not the memory term's few %
    assert np.isnan(sol["sol_pct"].iloc[2]) and sol["sol_status"].iloc[2] == "unknown"


def test_above_100_percent_is_explained() -> None:
    t = _ncu_like()
    t.kernels.loc[0, "dram_bytes"] = 4.8e12 * 12800e-9 * 1.3  # 130% of the datasheet bandwidth
    sol = speed_of_light(t)
    # never shown as a number: marked, with the reason as data
    assert np.isnan(sol["sol_pct"].iloc[0]) and np.isnan(sol["t_sol_ns"].iloc[0])
    assert sol["sol_status"].iloc[0] == "exceeds_peak" and sol["sol_reason"].iloc[0] == "measured_bandwidth"
    assert sol["t_memory_ns"].iloc[0] > sol["dur"].iloc[0]  # the term that broke physics stays visible
    assert sol_warnings(sol) == {"measured_bandwidth": 1}
    assert (sol["sol_status"].iloc[1:] == "ok").all() or sol["sol_status"].iloc[2] == "unknown"


@pytest.mark.samples
def test_ncu_report_h200(samples: Path) -> None:
    trace = load_with("kviewer.io.ncu.report", samples / "ncu" / "h200_llm_block_eager.ncu-rep")
    sol = speed_of_light(trace)
    assert len(sol) == 30
    assert (sol["bytes_source"] == "measured").all()
    measured_flops = sol["flops_source"] == "measured"
    assert measured_flops.any()
    ncu = sol.dropna(subset=["ncu_sm_pct", "ncu_mem_pct"])
    assert len(ncu) == 30
    mem = ncu["ncu_mem_pct"] > ncu["ncu_sm_pct"]
    assert (ncu.loc[mem, "ncu_bound"] == "memory").all() and (ncu.loc[~mem, "ncu_bound"] == "compute").all()
    known = ncu["bound_model"] != "unknown"
    assert (ncu.loc[known, "bound"] == ncu.loc[known, "bound_model"]).all()
    # the elementwise adds and layer norms are memory-bound by Nsight Compute's own numbers
    assert (sol.loc[sol["kind"] == "elementwise", "bound"] == "memory").any()
    known = sol["sol_pct"].dropna()
    # GEMMs and attention without a tensor counter in this (non full-set) report: SOL unknown
    matrix = sol["kind"].isin(["gemm", "attention"]) & (sol["flops_source"] == "unknown")
    assert matrix.any() and sol.loc[matrix, "sol_pct"].isna().all()
    assert len(known) == 30 - int(matrix.sum())
    assert known.between(0, 100).all()
    assert (sol.loc[sol["sol_pct"].isna(), "sol_status"].isin(["unknown", "exceeds_peak"])).all()


def test_sol_result_is_the_schema_table_with_its_gpu(eager: Trace) -> None:
    from kviewer.analysis.sol import SolResult, sol_result
    from kviewer.core.schema import FLOAT, INT, SOL

    result = sol_result(eager)
    assert isinstance(result, SolResult)
    table = result.table
    # every column declared once in the schema, with its dtype
    assert list(table.columns) == SOL.names
    for col in SOL.columns:
        kind = table[col.name].dtype.kind
        assert kind == {INT: "i", FLOAT: "f"}.get(col.dtype, "O"), (col.name, table[col.name].dtype)
    assert table["id"].tolist() == eager.kernels["id"].tolist()
    assert result.spec is not None and result.spec.id == "h200" and set(result.specs) == {0}
    assert result.device is None
    assert result.summary() == sol_summary(table) and result.warnings() == sol_warnings(table)
    chosen = sol_result(eager, device="h100_pcie")
    assert chosen.device == "h100_pcie" and chosen.spec is not None and chosen.spec.id == "h100_pcie"
