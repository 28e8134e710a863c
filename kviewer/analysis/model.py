"""FLOPs and bytes of a kernel, modelled from the PyTorch op that launched it.

A kernel's ``external_id`` is the id of the innermost framework op active when it was launched
(``aten::mm`` under ``aten::matmul`` under ``aten::linear``). That op's recorded input shapes
(``input_dims``) and dtypes (``input_types``) give:

* FLOPs, by formula for the op family -- matmul ``2·M·N·K``; attention ``2·B·H·Lq·Lk·(D+Dv)``
  forward (masking is not recorded: a causal kernel does about half) and 2.5x that backward;
  convolution ``2·N·O·C/g·prod(kernel)·prod(out)``; elementwise one FLOP per output element;
  reductions one per input element; normalisations a fixed count per element (``_NORM_FLOPS``). When
  the op carries the profiler's own ``FLOPs`` arg (``cpu_slices.flops``) that number wins.
* bytes: every input tensor read once plus the output written once (``numel × element size``), the
  traffic of an ideal kernel that never re-reads. The output shape follows from the inputs
  (broadcasting for elementwise ops, ``M×N`` for matmul, ...).

An op that launches several kernels (a split-K GEMM and its reduction, a cuDNN convolution with
a layout transform) is attributed honestly: when some of its kernels are recognisably the main
ones (GEMM, attention, convolution kernels, by name) all of the op's FLOPs and bytes go to those
(split evenly between them) and the helpers get no modelled numbers; otherwise FLOPs and bytes are
divided evenly between all the op's kernels. Either way ``model_note`` says so.

Where an op is unknown, or its shapes are missing, the values are NaN and the source is
``unknown`` -- never a silent guess. Assumptions that are made (an unrecorded convolution stride,
an unrecorded output dtype) are written in ``model_note``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import pandas as pd

from kviewer.core import Trace

#: element size in bytes of the dtype names the PyTorch profiler writes
DTYPE_BYTES: dict[str, int] = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "long int": 8,
    "long": 8,
    "int64_t": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4,
}

#: the precision whose peak applies to math on this dtype
DTYPE_PRECISION: dict[str, str] = {
    "double": "fp64",
    "float": "fp32",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "c10::complex<float>": "fp32",
    "c10::complex<double>": "fp64",
}

KINDS = ("gemm", "attention", "conv", "elementwise", "norm", "reduction", "copy", "other")

_ELEMENTWISE = frozenset(
    """add sub rsub mul div true_divide floor_divide remainder fmod pow neg abs exp exp2 expm1 log log1p log2
    log10 sqrt rsqrt reciprocal sigmoid tanh relu relu6 gelu silu mish hardswish hardsigmoid hardtanh
    leaky_relu elu selu celu softplus softshrink erf erfc erfinv sin cos tan sinh cosh asin acos atan atan2
    sign sgn clamp clamp_min clamp_max clip where masked_fill lerp addcmul addcdiv maximum minimum fmax fmin
    eq ne lt le gt ge logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor
    bitwise_not threshold threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward
    hardtanh_backward leaky_relu_backward elu_backward hardswish_backward mish_backward softplus_backward
    dropout native_dropout native_dropout_backward nan_to_num floor ceil round trunc frac square
    isnan isinf isfinite logit polar heaviside xlogy mse_loss_backward""".split()
)
_COPY = frozenset("copy clone contiguous _to_copy to type_as fill zero zeros_like ones_like full_like".split())
_NO_READ_SELF = frozenset("fill zero copy".split())  # in-place ops that overwrite self without reading it
_COMPARE = frozenset("eq ne lt le gt ge logical_and logical_or logical_not logical_xor isnan isinf isfinite".split())
_REDUCTION = frozenset(
    """sum mean amax amin max min argmax argmin prod norm linalg_vector_norm var std var_mean std_mean all any
    logsumexp nansum nanmean count_nonzero""".split()
)
_SCAN = frozenset("cumsum cumprod logcumsumexp".split())
#: FLOPs per element of normalisations (mean, variance, normalise, scale, shift ~ 7; rms ~ 4;
#: softmax: max, subtract, exp, sum, divide ~ 5)
_NORM_FLOPS: dict[str, float] = {
    "layer_norm": 7,
    "native_layer_norm": 7,
    "group_norm": 7,
    "native_group_norm": 7,
    "batch_norm": 7,
    "native_batch_norm": 7,
    "cudnn_batch_norm": 7,
    "miopen_batch_norm": 7,
    "_batch_norm_impl_index": 7,
    "_native_batch_norm_legit": 7,
    "_native_batch_norm_legit_no_training": 7,
    "instance_norm": 7,
    "rms_norm": 4,
    "_fused_rms_norm": 4,
    "softmax": 5,
    "_softmax": 5,
    "log_softmax": 5,
    "_log_softmax": 5,
    "_safe_softmax": 5,
}
_MATMUL = frozenset("mm addmm bmm baddbmm matmul linear _scaled_mm mv addmv dot vdot _addmm_activation".split())
_ATTENTION_FWD = re.compile(
    r"^(scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn|flash_attention_for_cpu)_attention"
    r"|_cudnn_attention_forward|_flash_attention_forward|_efficient_attention_forward|_scaled_dot_product_fused_attention_overrideable)$"
)
_CONV = re.compile(r"^(convolution|_convolution|conv[123]d|cudnn_convolution|miopen_convolution|mkldnn_convolution|_conv_depthwise2d|conv_transpose[123]d|cudnn_convolution_transpose|convolution_overrideable)$")


@dataclass(frozen=True)
class OpWork:
    """The modelled work of one op call."""

    kind: str
    flops: float
    bytes_read: float
    bytes_written: float
    precision: str
    pipe: str
    note: str = ""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True)
class _Tensor:
    dims: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return int(np.prod(self.dims, dtype=np.float64)) if self.dims else 1

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def nbytes(self) -> float:
        return float(self.numel) * self.itemsize


def base_op_name(name: str) -> tuple[str, bool]:
    """``"aten::add_"`` -> ``("add", True)``: the op without namespace/overload and whether in-place."""
    n = name.split("::")[-1].split(".")[0]
    if len(n) > 1 and n.endswith("_") and not n.endswith("__"):
        return n[:-1], True
    return n, False


def _parse(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


def _tensors(dims: Any, types: Any) -> list[_Tensor | None]:
    """One entry per argument: a tensor, or None for scalars, lists and unknown dtypes."""
    out: list[_Tensor | None] = []
    if not isinstance(dims, list) or not isinstance(types, list):
        return out
    for i, t in enumerate(types):
        d = dims[i] if i < len(dims) else None
        # a 0-d entry is a Python scalar (the profiler types `x * 1.0` as 'double' with dims []) or a
        # 0-d tensor: a few bytes either way, so it is not counted as traffic
        if isinstance(t, str) and t in DTYPE_BYTES and isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            out.append(_Tensor(tuple(int(x) for x in d), t))
        else:
            out.append(None)
    return out


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _unknown(kind: str = "other", note: str = "") -> OpWork:
    return OpWork(kind, math.nan, math.nan, math.nan, "", "", note)


def _precision(dtype: str) -> str:
    return DTYPE_PRECISION.get(dtype, "fp32")


def op_work(name: str, input_dims: str, input_types: str, flops_arg: float = math.nan) -> OpWork:
    """Model one op call from its name and the JSON text of its input shapes and dtypes.

    ``flops_arg`` is the profiler's own FLOP count for the op (NaN when absent); when present it
    replaces the formula's count.
    """
    # NaN is never equal to another NaN object: as a cache key every absent FLOPs arg was a new
    # entry (the cache filled up with copies, ~90 KB per opened trace, and never hit)
    flops = float(flops_arg)
    return _op_work(name, input_dims, input_types, flops if flops == flops else None)


@lru_cache(maxsize=65536)
def _op_work(name: str, input_dims: str, input_types: str, flops_arg: float | None) -> OpWork:
    base, inplace = base_op_name(name)
    ts = _tensors(_parse(input_dims), _parse(input_types))
    tensors = [t for t in ts if t is not None]
    work = _model(name, base, inplace, ts, tensors)
    if flops_arg is not None and flops_arg > 0:
        note = "FLOPs from the profiler's op arg" + (f"; {work.note}" if work.note else "")
        pipe = work.pipe or "tensor"
        return OpWork(work.kind, float(flops_arg), work.bytes_read, work.bytes_written, work.precision, pipe, note)
    return work


def _model(name: str, base: str, inplace: bool, ts: list[_Tensor | None], tensors: list[_Tensor]) -> OpWork:
    if name.startswith("triton_"):
        return _triton(name, tensors)
    if base in _MATMUL:
        return _matmul(base, ts, tensors)
    if _ATTENTION_FWD.match(base):
        return _attention(base, tensors, backward=False)
    if "attention" in base and base.endswith("backward"):
        return _attention(base, tensors, backward=True)
    if _CONV.match(base):
        return _conv(tensors)
    if base in _NORM_FLOPS or (base.endswith("_backward") and base[: -len("_backward")] in _NORM_FLOPS) or base == "_softmax_backward_data" or base == "_log_softmax_backward_data":
        return _norm(base, tensors)
    if base in _REDUCTION:
        return _reduction(base, tensors)
    if base in _SCAN:
        if not tensors:
            return _unknown("reduction", f"{name}: no tensor shapes recorded")
        t = tensors[0]
        return OpWork("reduction", float(t.numel), t.nbytes, t.nbytes, _precision(t.dtype), "vector")
    if base == "embedding":
        return _embedding(ts)
    if base in _ELEMENTWISE or base in _COPY:
        return _elementwise(base, inplace, ts, tensors)
    return _unknown("other", f"no model for {name}")


def _matmul(base: str, ts: list[_Tensor | None], tensors: list[_Tensor]) -> OpWork:
    note = ""
    if base in ("addmm", "baddbmm", "addmv", "_addmm_activation"):
        operands = [t for t in ts[1:3] if t is not None]
        extra = [ts[0]] if ts and ts[0] is not None else []
    elif base == "linear":
        operands = [t for t in ts[0:2] if t is not None]
        extra = [ts[2]] if len(ts) > 2 and ts[2] is not None else []
    else:
        # aten::mm(a, b) or the out= variant aten::mm(a, b, out): the third tensor is the output
        operands = [t for t in ts[0:2] if t is not None]
        extra = [t for t in ts[2:] if t is not None and t.numel > 1 and base == "_scaled_mm" and t.dims and len(t.dims) == 1]
    if len(operands) != 2:
        return _unknown("gemm", f"aten::{base}: operand shapes not recorded")
    a, b = operands
    if base == "linear":
        if len(b.dims) != 2 or not a.dims:
            return _unknown("gemm", "aten::linear: unexpected shapes")
        n, k = b.dims
        m = int(np.prod(a.dims[:-1], dtype=np.float64)) if len(a.dims) > 1 else 1
        batch = 1
        out_numel = m * n
    elif base in ("mv", "addmv"):
        if len(a.dims) != 2:
            return _unknown("gemm", f"aten::{base}: unexpected shapes")
        m, k = a.dims
        n, batch = 1, 1
        out_numel = m
    elif base in ("dot", "vdot"):
        k = a.numel
        m = n = batch = 1
        out_numel = 1
    else:
        if len(a.dims) < 1 or len(b.dims) < 1:
            return _unknown("gemm", f"aten::{base}: scalar operands")
        ad = a.dims if len(a.dims) > 1 else (1,) + a.dims
        bd = b.dims if len(b.dims) > 1 else b.dims + (1,)
        m, k = ad[-2], ad[-1]
        k2, n = bd[-2], bd[-1]
        if k != k2:
            return _unknown("gemm", f"aten::{base}: inner dimensions differ ({k} vs {k2})")
        lead = _broadcast([ad[:-2], bd[:-2]])
        if lead is None:
            return _unknown("gemm", f"aten::{base}: batch dimensions do not broadcast")
        batch = int(np.prod(lead, dtype=np.float64)) if lead else 1
        out_numel = batch * m * n
    flops = 2.0 * batch * m * n * k
    out_size = a.itemsize
    if base == "_scaled_mm":
        out_size = 2
        note = "FP8 GEMM output dtype not recorded: 2 bytes/element (bf16) assumed"
    read = a.nbytes + b.nbytes + sum(t.nbytes for t in extra)
    written = float(out_numel) * out_size
    return OpWork("gemm", flops, read, written, _precision(a.dtype), "tensor", note)


def _attention(base: str, tensors: list[_Tensor], backward: bool) -> OpWork:
    four = [t for t in tensors if len(t.dims) == 4]
    if len(four) < 3:
        return _unknown("attention", f"aten::{base}: q/k/v shapes not recorded")
    q, k, v = four[0], four[1], four[2]
    if base in ("_flash_attention_forward", "_efficient_attention_forward") or base in (
        "_flash_attention_backward",
        "_efficient_attention_backward",
    ):
        b, lq, h, d = q.dims  # these take (batch, seq, heads, dim)
        lk, dv = k.dims[1], v.dims[3]
    else:
        b, h, lq, d = q.dims  # the SDPA entry points take (batch, heads, seq, dim)
        lk, dv = k.dims[2], v.dims[3]
    fwd = 2.0 * b * h * lq * lk * (d + dv)
    note = "masking not recorded: full QK^T counted, as PyTorch's FLOP counter does (a causal kernel does about half)"
    if backward:
        read = sum(t.nbytes for t in tensors)
        written = q.nbytes + k.nbytes + v.nbytes
        return OpWork("attention", 2.5 * fwd, read, written, _precision(q.dtype), "tensor", note + "; backward = 2.5x forward")
    read = q.nbytes + k.nbytes + v.nbytes + sum(t.nbytes for t in tensors[3:] if len(t.dims) >= 2)
    out = float(b) * h * lq * dv * q.itemsize + float(b) * h * lq * 4  # output + fp32 logsumexp
    return OpWork("attention", fwd, read, out, _precision(q.dtype), "tensor", note)


def _conv(tensors: list[_Tensor]) -> OpWork:
    if len(tensors) < 2 or len(tensors[0].dims) < 3 or len(tensors[1].dims) != len(tensors[0].dims):
        return _unknown("conv", "convolution: input/weight shapes not recorded")
    x, w = tensors[0], tensors[1]
    n, spatial = x.dims[0], x.dims[2:]
    o, cg, kernel = w.dims[0], w.dims[1], w.dims[2:]
    out_spatial = float(np.prod(spatial, dtype=np.float64))
    flops = 2.0 * n * o * cg * float(np.prod(kernel, dtype=np.float64)) * out_spatial
    read = x.nbytes + w.nbytes + sum(t.nbytes for t in tensors[2:3] if len(t.dims) == 1)
    written = float(n) * o * out_spatial * x.itemsize
    note = "stride/padding not recorded: output size assumed equal to the input's (stride 1, same padding)"
    return OpWork("conv", flops, read, written, _precision(x.dtype), "tensor", note)


def _norm(base: str, tensors: list[_Tensor]) -> OpWork:
    kind = "norm"
    if not tensors:
        return _unknown(kind, f"aten::{base}: no tensor shapes recorded")
    x = max(tensors, key=lambda t: t.numel)
    per = _NORM_FLOPS.get(base, _NORM_FLOPS.get(base[: -len("_backward")], 7)) if not base.startswith("_softmax_backward") else 5
    read = sum(t.nbytes for t in tensors)
    written = x.nbytes
    note = ""
    if base in ("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm"):
        # per-row statistics (fp32 mean and rstd) are written too
        weight = tensors[1] if len(tensors) > 1 and tensors[1].dims else None
        rows = x.numel / (weight.numel if weight is not None and weight.numel else x.dims[-1] if x.dims else 1)
        written += rows * 4 * (2 if "layer" in base else 1)
    if base.endswith("_backward") or base.endswith("_backward_data"):
        note = "backward: every input read once, the input gradient written"
    return OpWork(kind, per * x.numel, read, written, _precision(x.dtype), "vector", note)


def _reduction(base: str, tensors: list[_Tensor]) -> OpWork:
    if not tensors:
        return _unknown("reduction", f"aten::{base}: no tensor shapes recorded")
    x = tensors[0]
    return OpWork(
        "reduction",
        float(x.numel),
        sum(t.nbytes for t in tensors),
        0.0,
        _precision(x.dtype),
        "vector",
        "reduced dimensions not recorded: the output is taken as negligible",
    )


def _embedding(ts: list[_Tensor | None]) -> OpWork:
    if len(ts) < 2 or ts[0] is None or ts[1] is None or len(ts[0].dims) != 2:
        return _unknown("copy", "aten::embedding: shapes not recorded")
    weight, idx = ts[0], ts[1]
    rows = float(idx.numel) * weight.dims[1] * weight.itemsize
    return OpWork("copy", 0.0, rows + idx.nbytes, rows, _precision(weight.dtype), "vector", "embedding: only the looked-up rows are read")


def _elementwise(base: str, inplace: bool, ts: list[_Tensor | None], tensors: list[_Tensor]) -> OpWork:
    kind = "copy" if base in _COPY else "elementwise"
    if not tensors:
        return _unknown(kind, f"aten::{base}: no tensor shapes recorded")
    note = ""
    if inplace and ts and ts[0] is not None:
        out_t = ts[0]
        out_bytes = out_t.nbytes
        inputs = tensors[1:] if base in _NO_READ_SELF else tensors
    else:
        shape = _broadcast([t.dims for t in tensors])
        if shape is None:
            return _unknown(kind, f"aten::{base}: input shapes do not broadcast")
        big = max(tensors, key=lambda t: t.numel)
        numel = float(np.prod(shape, dtype=np.float64)) if shape else 1.0
        size = 1 if base in _COMPARE else big.itemsize
        out_bytes = numel * size
        inputs = tensors
        out_t = _Tensor(shape, big.dtype)
        if base in ("_to_copy", "to", "type_as"):
            note = "target dtype not recorded: output assumed the input's dtype"
    flops = 0.0 if kind == "copy" else float(out_t.numel)
    return OpWork(kind, flops, sum(t.nbytes for t in inputs), out_bytes, _precision(out_t.dtype), "vector", note)


def _triton(name: str, tensors: list[_Tensor]) -> OpWork:
    """Inductor-generated kernels: arguments are the buffers the kernel touches."""
    if not tensors:
        return _unknown("other", f"{name}: no buffer shapes recorded")
    if name.startswith("triton_poi"):
        kind = "elementwise"
    elif name.startswith(("triton_red", "triton_per")):
        kind = "norm" if re.search(r"norm|softmax", name) else "reduction"
    elif name.startswith("triton_tem") and re.search(r"mm|addmm|bmm", name):
        return _unknown("gemm", f"{name}: Triton template GEMM, operand roles not recorded")
    else:
        kind = "other"
    big = max(tensors, key=lambda t: t.numel)
    total = sum(t.nbytes for t in tensors)
    note = "Triton kernel: each buffer argument counted once (read or written; in-place buffers once)"
    # one FLOP per element of the largest buffer: the elementwise / reduction convention above
    return OpWork(kind, float(big.numel), total, 0.0, _precision(big.dtype), "vector", note)


# ---------------------------------------------------------------------------------------------
# kernels


_KIND_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"flash|fmha|sdpa|attention|attn", re.I)),
    ("gemm", re.compile(r"gemm|gemv|nvjet|cutlass|xmma|cublas|Cijk_|matmul|_mm_|triton_tem_fused_(mm|addmm|bmm)|wgmma|hgmma", re.I)),
    ("conv", re.compile(r"conv|implicit_gemm|wgrad|dgrad|winograd|fft2d|miopen", re.I)),
    ("norm", re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|softmax|triton_(red|per)_\w*(norm|softmax)", re.I)),
    ("reduction", re.compile(r"reduce|reduction|triton_red_|triton_per_|argmax|argmin", re.I)),
    ("copy", re.compile(r"copy|transpose|CatArray|cat_|index_select|gather|scatter|memcpy|fill_kernel|FillFunctor", re.I)),
    ("elementwise", re.compile(r"elementwise|triton_poi_|pointwise|Functor|activation|gelu|silu|relu|dropout|foreach|multi_tensor_apply", re.I)),
)


def kernel_kind(name: str) -> str:
    """What a kernel is, from its name alone (for traces without framework ops)."""
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(name):
            return kind
    return "other"


MODEL_COLUMNS = [
    "op_id",
    "op_name",
    "op_dims",
    "kind",
    "model_flops",
    "model_bytes",
    "model_bytes_written",
    "precision",
    "pipe",
    "op_kernels",
    "model_note",
]


def op_of_kernels(trace: Trace) -> np.ndarray:
    """For every kernel, the ``cpu_slices.id`` of the op that launched it (-1 when unknown).

    Join on ``external_id`` (and rank); when several op slices share an external id the innermost
    (deepest) wins.
    """
    k = trace.kernels
    out = np.full(len(k), -1, dtype=np.int64)
    if not len(k):
        return out
    c = trace.cpu_slices
    ops = c[(c["category"].astype(str) == "op") & (c["external_id"] >= 0)]
    if not len(ops):
        return out
    ops = ops.sort_values(["rank", "external_id", "depth"], kind="stable")
    # deepest last -> keep last per (rank, external_id)
    ops = ops.drop_duplicates(["rank", "external_id"], keep="last")
    key_ops = pd.MultiIndex.from_arrays([ops["rank"].to_numpy(np.int64), ops["external_id"].to_numpy(np.int64)])
    key_k = pd.MultiIndex.from_arrays([k["rank"].to_numpy(np.int64), k["external_id"].to_numpy(np.int64)])
    pos = key_ops.get_indexer(key_k)
    found = (pos >= 0) & (k["external_id"].to_numpy() >= 0)
    out[found] = ops["id"].to_numpy(np.int64)[pos[found]]
    return out


def model_kernels(trace: Trace) -> pd.DataFrame:
    """The modelled work of every kernel (one row per kernel, in ``trace.kernels`` order).

    Columns: ``op_id``, ``op_name``, ``op_dims`` (the op's input shapes, JSON text), ``kind``
    (gemm, attention, conv, elementwise, norm, reduction, copy, other), ``model_flops``,
    ``model_bytes`` (read + written), ``model_bytes_written`` (the output, which a fused consumer
    would no longer read back), ``precision``, ``pipe`` (tensor | vector), ``op_kernels`` (how many
    kernels the op launched) and ``model_note``.
    """
    k = trace.kernels
    n = len(k)
    names = k["name"].astype(str).to_numpy()
    # classify each distinct name once (a trace repeats a few hundred names thousands of times)
    cats = k["name"].astype("category")
    kinds_of_cat = np.array([kernel_kind(str(c)) for c in cats.cat.categories] + ["other"], dtype=object)
    kinds_by_name = kinds_of_cat[cats.cat.codes.to_numpy()] if n else np.array([], dtype=object)
    op_id = op_of_kernels(trace)
    out = {
        "op_id": op_id,
        "op_name": np.full(n, "", dtype=object),
        "op_dims": np.full(n, "", dtype=object),
        "kind": kinds_by_name.copy(),
        "model_flops": np.full(n, np.nan),
        "model_bytes": np.full(n, np.nan),
        "model_bytes_written": np.full(n, np.nan),
        "precision": np.full(n, "", dtype=object),
        "pipe": np.full(n, "", dtype=object),
        "op_kernels": np.zeros(n, dtype=np.int64),
        "model_note": np.full(n, "", dtype=object),
    }
    has_op = op_id >= 0
    if not has_op.any():
        return pd.DataFrame(out, columns=MODEL_COLUMNS)
    c = trace.cpu_slices
    rows = np.nonzero(has_op)[0]
    ids = op_id[rows]
    op_names = c["name"].astype(str).to_numpy()[ids]
    op_dims = c["input_dims"].astype(str).to_numpy()[ids]
    op_types = c["input_types"].astype(str).to_numpy()[ids]
    op_flops = c["flops"].to_numpy(np.float64)[ids]
    counts = pd.Series(ids).map(pd.Series(ids).value_counts()).to_numpy()
    out["op_kernels"][rows] = counts
    out["op_name"][rows] = op_names
    out["op_dims"][rows] = op_dims

    works = [op_work(nm, d, t, float(f)) for nm, d, t, f in zip(op_names, op_dims, op_types, op_flops)]
    main_kinds = ("gemm", "attention", "conv")
    # which kernels of a multi-kernel op are its main ones
    by_op: dict[int, list[int]] = {}
    for r, i in zip(rows, ids):
        by_op.setdefault(int(i), []).append(int(r))
    for r, i, w in zip(rows, ids, works):
        if w.kind != "other":
            out["kind"][r] = w.kind if kinds_by_name[r] not in main_kinds or w.kind in main_kinds else kinds_by_name[r]
        members = by_op[int(i)]
        share = 1.0
        note = w.note
        if len(members) > 1:
            mains = [m for m in members if kinds_by_name[m] in main_kinds] if w.kind in main_kinds else []
            if mains:
                if r not in mains:
                    out["kind"][r] = kinds_by_name[r] if kinds_by_name[r] != "other" else "other"
                    out["model_note"][r] = f"helper kernel of {c['name'].iloc[i]}: the op's work is attributed to its main kernel"
                    continue
                share = 1.0 / len(mains)
                if len(mains) > 1:
                    note = _join(note, f"{c['name'].iloc[i]} launched {len(members)} kernels: its work is split evenly over its {len(mains)} main kernels")
                else:
                    note = _join(note, f"{c['name'].iloc[i]} launched {len(members)} kernels: all its work is attributed to this one")
            else:
                share = 1.0 / len(members)
                note = _join(note, f"{c['name'].iloc[i]} launched {len(members)} kernels: its FLOPs and bytes are divided evenly between them")
        out["model_flops"][r] = w.flops * share
        out["model_bytes"][r] = w.bytes * share
        out["model_bytes_written"][r] = w.bytes_written * share
        out["precision"][r] = w.precision
        out["pipe"][r] = w.pipe
        out["model_note"][r] = note
    return pd.DataFrame(out, columns=MODEL_COLUMNS)


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a and b else a or b
