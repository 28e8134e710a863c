"""The speed of light, the kernel classification and the modelled work, computed over whole columns,
equal exactly the per-kernel computation they replaced (kept in sol_reference.py) on real traces:
modelled FLOPs (PyTorch), measured counters (Nsight Compute, rocprof), names alone (Nsight
Systems), the trace's own GPU and others named; and, for the modelled work, on a made-up trace
with the rare cases the real ones lack."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.analysis.kinds import classify
from kviewer.analysis.model import model_kernels
from kviewer.analysis.sol import SOL_READS, speed_of_light
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.errors import AnalysisError
from kviewer.io import load

from .sol_reference import classify_per_kernel, model_kernels_per_kernel, speed_of_light_per_kernel

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


def _identical(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Equal values, dtypes and columns, and the float columns equal to the bit (0.0 is not -0.0)."""
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for c in a.columns:
        if a[c].dtype == np.float64:
            assert np.array_equal(a[c].to_numpy().view(np.int64), b[c].to_numpy().view(np.int64)), c


def _same(path: Path) -> None:
    trace = load(path, use_cache=False)
    assert len(trace.kernels)
    pd.testing.assert_frame_equal(classify(trace), classify_per_kernel(trace), check_exact=True)
    _identical(model_kernels(trace), model_kernels_per_kernel(trace))
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


BF16 = "c10::BFloat16"
CONV = json.dumps([[16, 64, 56, 56], [128, 64, 3, 3]])


def _rare_cases() -> Trace:
    """One thread's ops, each launching kernels that take a branch the real traces do not: FLOPs
    from an enclosing op, a dgrad and a split-K wgrad of no measured time, split-K partials of no
    measured time, a negative duration, a copy helper, an sgemm on the FMA pipe, a kernel whose
    tensor counter fired, a kernel launched by no op."""
    ops = [  # name, start, dur, depth, external id, FLOPs arg, input dims, input types
        ("aten::conv2d", 0, 1000, 0, 1, 1.0e9, CONV, [BF16, BF16]),
        ("aten::cudnn_convolution", 10, 900, 1, 2, np.nan, CONV, [BF16, BF16]),
        ("aten::convolution_backward", 2000, 1000, 0, 3, np.nan, json.dumps([[16, 128, 54, 54], [16, 64, 56, 56], [128, 64, 3, 3]]),
         [BF16] * 3),
        ("aten::mm", 4000, 500, 0, 4, np.nan, "[[256, 512], [512, 1024]]", ["float", "float"]),
        ("aten::mm", 5000, 500, 0, 5, np.nan, "[[256, 512], [512, 1024]]", ["float", "float"]),
        ("aten::add", 6000, 500, 0, 6, np.nan, "[[1000], [1000]]", ["float", "float"]),
        ("aten::add", 7000, 500, 0, 7, np.nan, "[[1000], [1000]]", ["float", "float"]),
        ("aten::mm", 8000, 500, 0, 8, np.nan, "[[64, 64], [64, 64]]", [BF16, BF16]),
    ]
    kernels = [  # name, dur, external id, tensor FLOPs counted
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 50, 2, np.nan),
        ("nchwToNhwcKernel", 5, 2, np.nan),
        ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 40, 3, np.nan),
        ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_splitK", 0, 3, np.nan),
        ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_splitK", 0, 3, np.nan),
        ("nchwToNhwcKernel", 5, 3, np.nan),
        ("sm80_xmma_gemm_f32f32_splitK", 0, 4, np.nan),
        ("sm80_xmma_gemm_f32f32_splitK", 0, 4, np.nan),
        ("splitKreduce_kernel", 5, 4, np.nan),
        ("volta_sgemm_128x64_nn", 30, 5, np.nan),
        ("vectorized_elementwise_kernel", 20, 6, 1.0e6),
        ("elementwise_a", -5, 7, np.nan),
        ("elementwise_b", 50, 7, np.nan),
        ("elementwise_b", 50, 99, np.nan),
        ("sm90_gemm_bf16bf16_bf16f32_f32_tn", 10, 8, np.nan),
        ("copy_kernel", 3, 8, np.nan),
    ]
    names = [k[0] for k in kernels]
    n = len(kernels)
    kt = make_table("kernels", n, {
        "name": names, "short_name": names, "start": np.arange(n) * 600 + 20, "dur": [k[1] for k in kernels],
        "external_id": [k[2] for k in kernels], "flops_tensor": [k[3] for k in kernels],
    })
    cpu = make_table("cpu_slices", len(ops), {
        "name": np.array([o[0] for o in ops], dtype=object), "category": pd.Categorical(["op"] * len(ops)),
        "start": [o[1] for o in ops], "dur": [o[2] for o in ops], "depth": [o[3] for o in ops],
        "external_id": [o[4] for o in ops], "flops": [o[5] for o in ops],
        "input_dims": pd.Categorical([o[6] for o in ops]), "input_types": pd.Categorical([json.dumps(o[7]) for o in ops]),
    })
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kt, cpu_slices=cpu)


def test_modelled_work_equals_per_kernel_in_the_rare_cases() -> None:
    trace = _rare_cases()
    classes = classify(trace)
    assert (classes["op_row"] >= 0).sum() == len(classes) - 1 and (classes["kind_source"] == "counters").any()
    _identical(model_kernels(trace, classes), model_kernels_per_kernel(trace, classes))
    # classes a caller made: the name's kind where the op's model knows better
    named = classes.assign(kind="other", kind_source="name")
    _identical(model_kernels(trace, named), model_kernels_per_kernel(trace, named))
    # text columns that are not categorical
    text = ["name", "input_dims", "input_types", "concrete_inputs"]
    plain = Trace(meta=trace.meta, kernels=trace.kernels.astype({"name": object}), cpu_slices=trace.cpu_slices.astype(dict.fromkeys(text, object)))
    assert not isinstance(plain.cpu_slices["input_dims"].dtype, pd.CategoricalDtype)
    _identical(model_kernels(plain, classes), model_kernels_per_kernel(plain, classes))


def test_modelled_work_equals_per_kernel_whatever_the_classes(sample_traces: Path) -> None:
    """Any helper flags, kinds and sources a caller passes (the gradient kernels of a ResNet's
    backward among them), and durations of zero or less."""
    trace = load(sample_traces / "h200_resnet18_train.pt.trace.json.gz", use_cache=False)
    rng = np.random.default_rng(7)
    classes = classify(trace)
    n = len(classes)
    for i in range(4):
        # more helpers (the gradient ops keep gradient kernels only), or any helpers at all
        helper = rng.random(n) < 0.3
        mixed = classes.assign(
            helper=helper | classes["helper"].to_numpy(bool) if i % 2 == 0 else helper,
            kind=rng.choice(np.array(["gemm", "conv", "copy", "fill", "other", "elementwise"], dtype=object), n),
            kind_source=rng.choice(np.array(["name", "op", "counters"], dtype=object), n),
        )
        trace.kernels["dur"] = np.where(rng.random(n) < 0.2, rng.integers(-3, 1, n), trace.kernels["dur"].to_numpy())
        _identical(model_kernels(trace, mixed), model_kernels_per_kernel(trace, mixed))
