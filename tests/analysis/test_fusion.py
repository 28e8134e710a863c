"""Fusion candidates on the eager and torch.compile'd H200 traces, and on kernels without ops."""

from __future__ import annotations

import numpy as np
import pytest

from kviewer.analysis.fusion import FUSION_COLUMNS, fusion_candidates, fusion_summary
from kviewer.core import Trace, TraceMeta, make_table


def test_eager_candidates(eager: Trace) -> None:
    c = fusion_candidates(eager)
    assert list(c.columns) == FUSION_COLUMNS
    # o_proj (K = 2048) followed by the residual add
    o_proj = c[c["chain"] == "aten::mm(4096x2048, 2048x2048) → aten::add"]
    assert len(o_proj) == 1
    row = o_proj.iloc[0]
    assert row["kind"] == "gemm+epilogue" and row["count"] == 12 and row["savings_ns"] > 0
    assert row["intermediate"] == "shapes"
    assert row["bytes_saved"] == 2 * 4 * 1024 * 2048 * 2  # the GEMM output no longer written and read back
    # GELU -> *1.0 -> +0.0 (as the epilogue of the up projection)
    gelu = c[c["chain"].str.contains("aten::gelu → aten::mul → aten::add", regex=False)]
    assert len(gelu) == 1 and gelu.iloc[0]["savings_ns"] > 0 and gelu.iloc[0]["count"] == 12
    # ranked by total saving, each instance's kernels listed
    assert (np.diff(c["savings_ns"].to_numpy()) <= 0).all()
    assert all(len(ids) == n for ids, n in zip(c["kernel_ids"], c["count"]))
    assert (c["savings_ns"] < c["measured_ns"]).all()
    assert (c["fused_est_ns"] >= c["fused_sol_ns"]).all()


def test_compiled_saves_less_than_eager(eager: Trace, compiled: Trace) -> None:
    e = fusion_summary(fusion_candidates(eager), eager)
    c = fusion_summary(fusion_candidates(compiled), compiled)
    # torch.compile already fused GELU, mul and add (and add + layer norm): less is left to gain
    assert 0 < c["savings_ns"] < e["savings_ns"]
    assert c["savings_pct"] < e["savings_pct"]
    comp = fusion_candidates(compiled)
    assert not comp["chain"].str.contains("aten::gelu").any()


def _no_op_trace(gap: int = 1000) -> Trace:
    names = [
        "nvjet_sm90_tst_128x128",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    ]
    dur = np.array([50_000, 10_000, 12_000, 15_000, 10_000])
    start = np.cumsum(np.r_[0, dur[:-1] + gap])
    nbytes = np.array([3e7, 4.0e7, 2.7e7, 2.7e7, 4.0e7])
    kernels = make_table(
        "kernels",
        5,
        {
            "name": names, "short_name": names, "start": start, "dur": dur, "stream": np.full(5, 7),
            "dram_bytes": nbytes, "flops_fp32": [0, 1e6, 1e6, 4e6, 1e6],
            "sm_throughput_pct": [90, 10, 10, 20, 10], "mem_throughput_pct": [40, 80, 80, 70, 80],
            "tensor_pipe_pct": [85, 0, 0, 0, 0],
        },
    )
    devices = make_table("devices", 1, {"id": [0], "name": np.array(["NVIDIA H100 80GB HBM3"], dtype=object)})
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, devices=devices)


def test_no_chain_without_a_data_dependency() -> None:
    # back-to-back kernels whose ops (and so shapes) are unknown: nothing says the add reads the
    # GEMM's output, so no chain and no invented saving
    assert len(fusion_candidates(_no_op_trace())) == 0


def test_gaps_break_chains() -> None:
    assert len(fusion_candidates(_no_op_trace(gap=1_000_000))) == 0
