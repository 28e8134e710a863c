"""Modelled FLOPs against torch.profiler's own counts (``key_averages()`` with ``with_flops=True``,
dumped beside the traces by sample_traces/h200_gen_flops.py), and the formulas per op.

Formulas (kviewer.analysis.model):

* matmul / mm / addmm / bmm / linear: ``2·M·N·K`` (x batch); addmm's bias add is not counted, as
  torch does not count it;
* convolution forward, once, on the op that launched the kernels: ``2·N·K·(C/groups)·R·S·P·Q``
  with the output size P×Q from the recorded stride, padding and dilation (Concrete Inputs);
  unknown when those are not recorded;
* convolution backward: input gradient and weight gradient each ``2·N·K·(C/g)·R·S·P·Q``;
* SDPA / flash forward ``2·B·H·Lq·Lk·(D + Dv)``, backward ``2·B·H·Lq·Lk·(3·D + 2·Dv)``; a causal
  mask halves both;
* elementwise: one FLOP per output element (torch counts aten::add and aten::mul the same way);
* reductions: one per input element; norms: 7 per element (layer/batch/group), 4 (RMS);
  softmax: 5 per element;
* helper kernels (layout transforms, converts, fills) get none of their op's FLOPs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.model import model_kernels, op_work

from tests.analysis.conftest import load_with

BF16 = "c10::BFloat16"


def _flops_json(sample_traces: Path, name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((sample_traces / name).read_text())


def test_resnet18_conv_flops_equal_key_averages(sample_traces: Path) -> None:
    t = load_with("kviewer.io.torch", sample_traces / "h200_resnet18.pt.trace.json.gz")
    ref = _flops_json(sample_traces, "h200_resnet18_flops.json")["by_op"]
    m = model_kernels(t)
    conv = float(m.loc[m["kind"] == "conv", "model_flops"].sum())
    # aten::conv2d in key_averages: 2·N·K·C·R·S·P·Q per call, summed over the profiled steps
    assert conv == pytest.approx(ref["aten::conv2d"]["flops"], rel=0.02)
    assert abs(conv / ref["aten::conv2d"]["flops"] - 1) < 1e-9  # in fact exact: counted once, right output size
    assert float(m.loc[m["op_name"] == "aten::addmm", "model_flops"].sum()) == ref["aten::addmm"]["flops"]
    # the cuDNN layout transforms beside the convolutions get none of its FLOPs
    helpers = m[m["helper"]]
    conv_helpers = helpers[helpers["op_name"] == "aten::cudnn_convolution"]
    assert len(conv_helpers) and (conv_helpers["kind"] == "copy").all() and (conv_helpers["model_flops"] == 0).all()
    # BatchNorm's one-block kernel (the inverse standard deviation of the running variance, per
    # channel) beside its transform is a helper too: the op's bytes all go to the transform
    bn = m[m["op_name"] == "aten::native_batch_norm"]
    small = bn[bn["helper"]]
    assert len(small) and small["model_bytes"].isna().all()
    assert bn.loc[~bn["helper"], "model_bytes"].notna().all()
    assert set(helpers["op_name"]) <= {"aten::cudnn_convolution", "aten::native_batch_norm"}


def test_resnet18_conv_flops_per_shape(sample_traces: Path) -> None:
    t = load_with("kviewer.io.torch", sample_traces / "h200_resnet18.pt.trace.json.gz")
    ref = [r for r in _flops_json(sample_traces, "h200_resnet18_flops.json")["by_shape"] if r["key"] == "aten::conv2d"]
    c = t.cpu_slices
    ops = c[c["name"].astype(str) == "aten::conv2d"]
    for r in ref:
        rows = ops[[json.loads(str(d)) == json.loads(r["input_shapes"]) for d in ops["input_dims"]]]
        assert len(rows) == r["count"]
        got = sum(op_work("aten::conv2d", str(d), str(ty), math.nan, str(cc)).flops
                  for d, ty, cc in zip(rows["input_dims"], rows["input_types"], rows["concrete_inputs"]))
        assert got == r["flops"], r["input_shapes"]


def test_block_matmul_and_elementwise_flops_equal_key_averages(sample_traces: Path) -> None:
    t = load_with("kviewer.io.torch", sample_traces / "h200_block2_eager.pt.trace.json.gz")
    ref = _flops_json(sample_traces, "h200_block2_eager_flops.json")["by_op"]
    m = model_kernels(t)
    for op in ("aten::mm", "aten::add", "aten::mul"):
        assert float(m.loc[m["op_name"] == op, "model_flops"].sum()) == ref[op]["flops"], op


def test_conv_formulas() -> None:
    x, w = [16, 64, 56, 56], [128, 64, 3, 3]
    # stride 2, padding 1: output 28x28 -> 2·16·128·64·3·3·28·28
    f = op_work("aten::conv2d", json.dumps([x, w, [], [], [], [], []]), json.dumps([BF16, BF16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]),
                math.nan, json.dumps(["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]))
    assert f.kind == "conv" and f.flops == 2 * 16 * 128 * 64 * 9 * 28 * 28 and f.out_numel == 16 * 128 * 28 * 28
    # cudnn_convolution puts padding before stride
    g = op_work("aten::cudnn_convolution", json.dumps([x, w] + [[]] * 7), json.dumps([BF16, BF16] + ["ScalarList"] * 3 + ["Scalar"] * 4),
                math.nan, json.dumps(["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]))
    assert g.flops == f.flops
    # groups: the weight's C/g
    dw = op_work("aten::conv2d", json.dumps([[16, 64, 56, 56], [64, 1, 3, 3], [], [], [], [], []]), json.dumps([BF16, BF16, "", "", "", "", ""]),
                 math.nan, json.dumps(["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "64"]))
    assert dw.flops == 2 * 16 * 64 * 1 * 9 * 56 * 56
    # no stride recorded (old traces): unknown, not a guess that can be 4x off
    u = op_work("aten::cudnn_convolution", json.dumps([x, w]), json.dumps([BF16, BF16]))
    assert math.isnan(u.flops) and "stride" in u.note
    # backward: input and weight gradients, each the forward's count
    gy = [16, 128, 28, 28]
    b = op_work("aten::convolution_backward", json.dumps([gy, x, w] + [[]] * 8), json.dumps([BF16] * 3 + [""] * 8),
                math.nan, json.dumps(["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]))
    assert b.flops == 2 * f.flops
    wonly = op_work("aten::convolution_backward", json.dumps([gy, x, w] + [[]] * 8), json.dumps([BF16] * 3 + [""] * 8),
                    math.nan, json.dumps(["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, False]"]))
    assert wonly.flops == f.flops


def test_attention_formulas() -> None:
    q = [4, 16, 1024, 128]
    dims = json.dumps([q, q, q, [], [], [], []])
    types = json.dumps([BF16] * 3 + ["", "Scalar", "Scalar", ""])
    full = op_work("aten::scaled_dot_product_attention", dims, types, math.nan, json.dumps(["", "", "", "", "0.", "False", ""]))
    causal = op_work("aten::scaled_dot_product_attention", dims, types, math.nan, json.dumps(["", "", "", "", "0.", "True", ""]))
    assert full.flops == 2 * 4 * 16 * 1024 * 1024 * (128 + 128)
    assert causal.flops == full.flops / 2 and "causal" in causal.note
    # backward: recomputed scores, dV, dP, dQ, dK = 2·B·H·L²·(3·D + 2·Dv) = 2.5x the forward when D = Dv
    g = [4, 16, 1024, 128]
    bwd = op_work("aten::_scaled_dot_product_cudnn_attention_backward", json.dumps([g, q, q, q, g, [4, 16, 1024]]),
                  json.dumps([BF16] * 5 + ["float"]))
    assert bwd.flops == 2 * 4 * 16 * 1024 * 1024 * (3 * 128 + 2 * 128) and bwd.flops == 2.5 * full.flops


def test_norm_softmax_reduction_elementwise_formulas() -> None:
    x = [4, 1024, 2048]
    n = 4 * 1024 * 2048
    ln = op_work("aten::native_layer_norm", json.dumps([x, [2048], [2048], [2048]]), json.dumps([BF16] * 4))
    assert ln.kind == "norm" and ln.flops == 7 * n
    rms = op_work("aten::rms_norm", json.dumps([x, [2048]]), json.dumps([BF16] * 2))
    assert rms.flops == 4 * n
    sm = op_work("aten::_softmax", json.dumps([x, [], []]), json.dumps([BF16, "Scalar", "Scalar"]))
    assert sm.kind == "softmax" and sm.flops == 5 * n
    red = op_work("aten::sum", json.dumps([x, []]), json.dumps([BF16, ""]))
    assert red.kind == "reduction" and red.flops == n
    add = op_work("aten::add", json.dumps([x, x]), json.dumps([BF16, BF16]))
    assert add.kind == "elementwise" and add.flops == n and add.bytes == 3 * n * 2
    cp = op_work("aten::copy_", json.dumps([x, x, []]), json.dumps([BF16, "float", "Scalar"]))
    assert cp.kind == "copy" and cp.flops == 0 and cp.bytes == n * 4 + n * 2  # read fp32 once, write bf16 once
    assert np.isnan(op_work("aten::_foreach_add_", "[[], [], []]", '["TensorList", "float", "Scalar"]').flops)  # sizes not recorded


def test_optimizer_formulas() -> None:
    # a TensorList's shapes, where recorded: elementwise over every tensor of the list
    p = [[2048, 2048], [2048]]
    f = op_work("aten::_foreach_addcmul_", json.dumps([p, p, p, []]), json.dumps(["TensorList", "TensorList", "TensorList", "Scalar"]))
    n = 2048 * 2048 + 2048
    assert f.kind == "elementwise" and f.flops == 2 * n  # x + a * b * c
    adam = op_work("aten::_fused_adam_", json.dumps([p, p, p, p, [], []]), json.dumps(["TensorList"] * 4 + ["TensorList", "float"]))
    assert adam.flops == 16 * n and adam.bytes_written == 3 * n * 4


def test_profiler_flops_of_the_enclosing_op_fill_in() -> None:
    # an old trace: no Concrete Inputs (stride unknown), but torch.profiler wrote FLOPs on the
    # aten::conv2d around the aten::cudnn_convolution that launched the kernel
    import pandas as pd

    from kviewer.core import Trace, TraceMeta, make_table

    names = ["sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc"]
    kernels = make_table("kernels", 1, {"name": names, "short_name": names, "start": [100], "dur": [50], "external_id": [2]})
    dims = json.dumps([[16, 64, 56, 56], [128, 64, 3, 3]])
    cpu = make_table("cpu_slices", 2, {
        "name": np.array(["aten::conv2d", "aten::cudnn_convolution"], dtype=object), "category": pd.Categorical(["op", "op"]),
        "start": [0, 10], "dur": [100, 80], "depth": [0, 1], "external_id": [1, 2], "flops": [1.0e9, np.nan],
        "input_dims": pd.Categorical([dims, dims]), "input_types": pd.Categorical([json.dumps([BF16, BF16])] * 2),
    })
    m = model_kernels(Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, cpu_slices=cpu))
    assert m["model_flops"].iloc[0] == 1.0e9 and "enclosing aten::conv2d" in m["model_note"].iloc[0]


def test_depthwise_conv_net_flops_equal_key_averages(sample_traces: Path) -> None:
    # mobilenet_v2: grouped and depthwise convolutions (aten::_conv_depthwise2d, groups = C)
    t = load_with("kviewer.io.torch", sample_traces / "h200_mobilenet_v2.pt.trace.json.gz")
    ref = _flops_json(sample_traces, "h200_mobilenet_v2_flops.json")["by_op"]
    m = model_kernels(t)
    conv = float(m.loc[m["kind"] == "conv", "model_flops"].sum())
    assert conv == pytest.approx(ref["aten::conv2d"]["flops"], rel=0.02)
    assert float(m.loc[m["op_name"] == "aten::addmm", "model_flops"].sum()) == ref["aten::addmm"]["flops"]


def test_training_conv_backward_is_twice_the_forward(sample_traces: Path) -> None:
    # resnet18 training: forward convolutions as key_averages counts them; the backward computes
    # the input gradient and the weight gradient, each the forward's count, except for the first
    # layer, whose input needs no gradient (output_mask [False, True, ...])
    t = load_with("kviewer.io.torch", sample_traces / "h200_resnet18_train.pt.trace.json.gz")
    flops = _flops_json(sample_traces, "h200_resnet18_train_flops.json")
    m = model_kernels(t)
    fwd = float(m.loc[(m["kind"] == "conv") & (m["op_name"] == "aten::cudnn_convolution"), "model_flops"].sum())
    bwd = float(m.loc[(m["kind"] == "conv") & (m["op_name"] == "aten::convolution_backward"), "model_flops"].sum())
    assert fwd == pytest.approx(flops["by_op"]["aten::conv2d"]["flops"], rel=0.02)
    first = next(r for r in flops["by_shape"] if r["key"] == "aten::conv2d" and r["input_shapes"].startswith("[[16, 3, 224, 224]"))
    assert bwd == pytest.approx(2 * fwd - first["flops"], rel=1e-9)


def test_causal_flag_read_at_each_ops_position() -> None:
    # the cuDNN attention ops of the 153 MB training sample, with their recorded scalar arguments
    q = [4, 16, 1024, 128]
    bwd = op_work("aten::_cudnn_attention_backward", json.dumps([q, q, q, q, q, [4, 16, 1024, 1]] + [[]] * 10),
                  json.dumps([BF16] * 5 + ["float", "long int", "long int", "", "", ""] + ["Scalar"] * 4 + [""]),
                  math.nan, json.dumps([""] * 11 + ["1024", "1024", "0.", "True", ""]))
    assert bwd.flops == 2 * 4 * 16 * 1024 * 1024 * (3 * 128 + 2 * 128) / 2
    fwd = op_work("aten::_cudnn_attention_forward", json.dumps([q, q, q] + [[]] * 10), json.dumps([BF16] * 3 + [""] * 3 + ["Scalar"] * 6 + [""]),
                  math.nan, json.dumps([""] * 6 + ["1024", "1024", "True", "0.", "True", "False", ""]))
    assert fwd.flops == 2 * 4 * 16 * 1024 * 1024 * 256 / 2
    eff = op_work("aten::_efficient_attention_forward", json.dumps([[4, 1024, 16, 128]] * 3 + [[]] * 8), json.dumps([BF16] * 3 + [""] * 8),
                  math.nan, json.dumps([""] * 8 + ["0.", "1", "True"]))
    assert eff.flops == fwd.flops
