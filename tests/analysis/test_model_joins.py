"""Each kernel gets the work it does (issue 26): a convolution backward's dgrad and wgrad kernels
each get exactly one gradient's FLOPs (checked against torch.profiler's own FLOP count of the
forward convolution on the same shapes), helpers get none, an sgemm runs on the FMA pipe, and
a scalar ``double`` argument does not make a kernel fp64."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.kinds import name_words, precision_from_name, precision_pipe
from kviewer.analysis.model import model_kernels
from kviewer.io import load


def test_gradient_kernels_get_one_gradient_each(sample_traces: Path) -> None:
    t = load(str(sample_traces / "h200_resnet18_train.pt.trace.json.gz"))
    m = model_kernels(t)
    names = t.kernels["name"].astype(str).to_numpy()
    fwd = {}
    for row in json.loads((sample_traces / "h200_resnet18_train_flops.json").read_text())["by_shape"]:
        if row["key"] == "aten::conv2d":
            dims = json.loads(row["input_shapes"])
            fwd[(tuple(dims[0]), tuple(dims[1]))] = row["flops"] / row["count"]  # torch's FLOPs of one forward call
    # per op call and gradient: its dgrad kernel(s) together do one forward's FLOPs, its wgrad
    # kernel(s) (one, or a split-K pair) another
    per: dict[tuple[int, str], float] = {}
    key_of: dict[int, tuple] = {}
    for i in np.flatnonzero(m["op_name"].astype(str).str.contains("convolution_backward").to_numpy()):
        words = set(name_words(str(names[i])))
        if m["helper"].iat[i]:
            continue
        assert words & {"dgrad", "wgrad"}, names[i]  # no other kernel of these ops does their arithmetic
        g = "dgrad" if "dgrad" in words else "wgrad"
        op = int(m["op_id"].iat[i])
        per[(op, g)] = per.get((op, g), 0.0) + float(m["model_flops"].iat[i])
        dims = json.loads(str(m["op_dims"].iat[i]))
        key_of[op] = (tuple(dims[1]), tuple(dims[2]))  # (input, weight) of the forward it differentiates
    checked = 0
    for (op, g), f in per.items():
        if key_of[op] in fwd:
            assert f == pytest.approx(fwd[key_of[op]], rel=1e-6), (op, g)
            checked += 1
    assert checked >= 20
    # the helpers of those ops (layout transforms) carry no FLOPs
    helpers = m["helper"].to_numpy(bool) & m["op_name"].astype(str).str.contains("convolution_backward").to_numpy()
    assert helpers.any() and np.nan_to_num(m["model_flops"].to_numpy()[helpers], nan=0.0).sum() == 0


@pytest.mark.samples
def test_sgemm_on_the_fma_pipe_and_split_k_helpers(samples: Path) -> None:
    t = load(str(samples / "torch" / "worker0.1623143089861.pt.trace.json.gz"))
    m = model_kernels(t)
    names = t.kernels["name"].astype(str).to_numpy()
    sg = [i for i, n in enumerate(names) if "sgemm" in n and not np.isnan(m["model_flops"].iat[i])]
    assert sg and all(m["pipe"].iat[i] == "vector" for i in sg)
    # where the op has no model the name alone says it (the rule SOL falls back on)
    assert precision_pipe("gemm", name="volta_sgemm_32x128_nn") == ("fp32", "vector", "name")
    sk = [i for i, n in enumerate(names) if "splitKreduce" in n]
    assert sk and all(m["helper"].iat[i] and np.isnan(m["model_flops"].iat[i]) for i in sk)


def test_scalar_double_is_not_fp64() -> None:
    adamw = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
             "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (ADAM_MODE)1, false>, "
             "double, double, double, double, double, bool, float*, float*>(int)")
    randn = ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
             "at::native::templates::cuda::normal_and_transform<float, float>(double, double)::{lambda(float4)#1}>(long)")
    assert precision_from_name(adamw) != "fp64" and precision_from_name(randn) != "fp64"
    assert precision_from_name("void gemv2T_kernel_val<int, int, double, double, double, double>(int)") == "fp64"
    assert precision_from_name("volta_dgemm_128x64_nn") == "fp64"
