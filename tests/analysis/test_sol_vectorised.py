"""The speed of light and the kernel classification, computed over whole columns, equal exactly the
per-kernel computation they replaced (kept in sol_reference.py) on real traces: modelled FLOPs
(PyTorch), measured counters (Nsight Compute, rocprof), names alone (Nsight Systems), the trace's
own GPU and others named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kviewer.analysis.kinds import classify
from kviewer.analysis.sol import SOL_READS, speed_of_light
from kviewer.errors import AnalysisError
from kviewer.io import load

from .sol_reference import classify_per_kernel, speed_of_light_per_kernel

BUNDLED = (
    "h200_llm_block_eager.pt.trace.json.gz", "gpt_train.pt.trace.json.gz", "h200_resnet18_train.pt.trace.json.gz",
    "h200_mobilenet_v2.pt.trace.json.gz", "gemm_grid_block2_nsys.sqlite.gz", "mlp_graph_nsys_node.sqlite.gz",
    "gemm_grid_step1_full.raw.csv.gz", "h200_resnet18_fullset.raw.csv.gz", "h200_llm_block_eager_full.raw.csv.gz",
    "h200_resnet18_fullset.details.csv.gz",
)  # fmt: skip
SHARED = (
    "nsys/h200_llm_train_nvtx.sqlite", "nsys/perlmutter-cloverleaf-cuda.sqlite", "ncu/h200_llm_block_eager.ncu-rep",
    "ncu/profile_output.ncu-rep", "ncu/metrics.csv", "torch/worker0.1623143089861.pt.trace.json.gz",
    "torch/sampled_rank-0.json.gz", "rocprof/gunrock_mi300/results.db", "rocprof/rocprofv3_2025/counter_collection.csv",
)  # fmt: skip


def _same(path: Path) -> None:
    trace = load(path, use_cache=False)
    assert len(trace.kernels)
    pd.testing.assert_frame_equal(classify(trace), classify_per_kernel(trace), check_exact=True)
    compared = 0
    for device in (None, "h200", "mi300x"):
        try:
            ref = speed_of_light_per_kernel(trace, device)
        except AnalysisError:
            with pytest.raises(AnalysisError):
                speed_of_light(trace, device)
            continue
        pd.testing.assert_frame_equal(speed_of_light(trace, device), ref, check_exact=True)
        compared += 1
    assert compared >= 2


@pytest.mark.parametrize("name", BUNDLED)
def test_vectorised_equals_per_kernel_bundled(sample_traces: Path, name: str) -> None:
    _same(sample_traces / name)


@pytest.mark.parametrize("name", SHARED)
def test_vectorised_equals_per_kernel_shared(samples: Path, name: str) -> None:
    _same(samples / name)


def test_empty_trace_has_an_empty_sol(sample_traces: Path) -> None:
    trace = load(sample_traces / "h200_llm_block_eager.pt.trace.json.gz", use_cache=False)
    trace.kernels = trace.kernels.iloc[:0]
    pd.testing.assert_frame_equal(speed_of_light(trace), speed_of_light_per_kernel(trace), check_exact=True)


@pytest.mark.parametrize("name", ("nsys/h200_llm_train_nvtx.sqlite", "nsys/perlmutter-cloverleaf-cuda.sqlite"))
def test_what_sol_reads_gives_the_sol_of_the_whole_trace(samples: Path, name: str) -> None:
    """``kviewer sol`` reads SOL_READS: of an Nsight Systems export the kernel table alone (no API
    calls, NVTX or memory operations), and the speed of light is the whole trace's."""
    part = load(samples / name, use_cache=False, tables=SOL_READS)
    assert len(part.kernels) and not len(part.cpu_slices) and not len(part.gpu_ops)
    whole = load(samples / name, use_cache=False)
    pd.testing.assert_frame_equal(speed_of_light(part), speed_of_light(whole), check_exact=True)
