"""FLOPs and bytes of a kernel, modelled from the PyTorch op that launched it.

A kernel's launching op comes from the one kernel -> op join
(:func:`kviewer.analysis.kinds.kernel_op_rows`: rank and External id, the innermost op). That op's
recorded input shapes (``input_dims``), dtypes (``input_types``) and scalar arguments
(``concrete_inputs``: strides, paddings, ``is_causal``) give:

* FLOPs, by formula for the op family (each formula is written next to its test in
  tests/analysis/test_model_vs_profiler.py) -- matmul ``2·M·N·K``; convolution forward
  ``2·N·K·(C/g)·R·S·P·Q`` with P×Q from the recorded stride/padding/dilation, counted once; its
  backward, input and weight gradients each the forward's count; attention forward
  ``2·B·H·Lq·Lk·(D+Dv)``, backward ``2·B·H·Lq·Lk·(3D+2Dv)``, halved when causal; elementwise one
  FLOP per output element; reductions one per input element; norms and softmax a fixed count per
  element (``_NORM_FLOPS``); foreach/fused optimizers per element of their tensor lists. When the
  op (or, for an op without a formula, the op around it) carries the profiler's own ``FLOPs`` arg,
  that number wins.
* bytes: every input tensor read once plus the output written once (``numel × element size``), the
  traffic of an ideal kernel that never re-reads.

An op's FLOPs and bytes go to the kernels doing its arithmetic (``kinds.classify``): its helper
kernels (layout transforms, dtype converts, fills, split-K reductions, epilogues) get none of them
-- a copy or fill helper is known to do no FLOPs; when several kernels share the arithmetic the
work is split in proportion to their measured time. ``model_note`` says so.

Where an op is unknown, or its shapes or strides are missing, the values are NaN -- never a
silent guess. Assumptions that are made (an unrecorded output dtype) are written in ``model_note``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from kviewer.analysis import kinds as _kinds
from kviewer.analysis.kinds import DATA_KINDS, DTYPE_BYTES, DTYPE_PRECISION, op_base
from kviewer.core import Trace
from kviewer.core.groups import distinct_rows


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
_FILL = frozenset("fill zero zeros_like ones_like full_like".split())
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
_CONV_BWD = re.compile(r"^(convolution_backward|convolution_backward_overrideable|cudnn_convolution_backward(_input|_weight)?|miopen_convolution_backward(_input|_weight)?)$")
#: argument positions of (stride, padding, dilation, transposed, groups) in each convolution op's
#: schema (``aten::cudnn_convolution`` puts padding before stride); -1: not an argument
_CONV_ARGS: dict[str, tuple[int, int, int, int, int]] = {
    "conv1d": (3, 4, 5, -1, 6), "conv2d": (3, 4, 5, -1, 6), "conv3d": (3, 4, 5, -1, 6),
    "convolution": (3, 4, 5, 6, 8), "_convolution": (3, 4, 5, 6, 8), "convolution_overrideable": (3, 4, 5, 6, 8),
    "cudnn_convolution": (3, 2, 4, -1, 5), "miopen_convolution": (4, 3, 5, -1, 6), "mkldnn_convolution": (4, 3, 5, -1, 6),
    "cudnn_convolution_relu": (3, 4, 5, -1, 6), "cudnn_convolution_add_relu": (5, 6, 7, -1, 8),
    "miopen_depthwise_convolution": (4, 3, 5, -1, 6), "_convolution_mode": (3, 4, 5, -1, 6),
    "_conv_depthwise2d": (4, 5, 6, -1, -1),
    "conv_transpose1d": (3, 4, 7, -2, 6), "conv_transpose2d": (3, 4, 7, -2, 6), "conv_transpose3d": (3, 4, 7, -2, 6),
    "cudnn_convolution_transpose": (4, 2, 5, -2, 6),
    "convolution_backward": (4, 5, 6, 7, 9), "convolution_backward_overrideable": (4, 5, 6, 7, 9),
}
_CONV = re.compile(r"^(convolution|_convolution|_convolution_mode|conv[123]d|cudnn_convolution|cudnn_convolution_relu|cudnn_convolution_add_relu|miopen_convolution|miopen_depthwise_convolution|mkldnn_convolution|_conv_depthwise2d|conv_transpose[123]d|cudnn_convolution_transpose|convolution_overrideable|conv_tbc)$")


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
    #: elements of the op's output (NaN when unknown): what a consumer would read back
    out_numel: float = math.nan

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
    return op_base(name), len(n) > 1 and n.endswith("_") and not n.endswith("__")


def overwrites_self(name: str) -> bool:
    """Whether op ``name`` writes its first argument without reading it (``copy_``, ``fill_``,
    ``zero_``): that argument is its output, not one of its inputs."""
    base, inplace = base_op_name(name)
    return inplace and base in _NO_READ_SELF


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


def op_work(name: str, input_dims: str, input_types: str, flops_arg: float = math.nan, concrete: str = "") -> OpWork:
    """Model one op call from its name and the JSON text of its input shapes, dtypes and scalar
    arguments (``Concrete Inputs``: strides, paddings, ``is_causal``).

    ``flops_arg`` is the profiler's own FLOP count for the op (NaN when absent); when present it
    replaces the formula's count.
    """
    # NaN is never equal to another NaN object: as a cache key every absent FLOPs arg was a new
    # entry (the cache filled up with copies, ~90 KB per opened trace, and never hit)
    flops = float(flops_arg)
    return _op_work(name, input_dims, input_types, flops if flops == flops else None, concrete)


@lru_cache(maxsize=65536)
def _op_work(name: str, input_dims: str, input_types: str, flops_arg: float | None, concrete: str) -> OpWork:
    base, inplace = base_op_name(name)
    ts = _tensors(_parse(input_dims), _parse(input_types))
    tensors = [t for t in ts if t is not None]
    conc = _parse(concrete)
    dims, types = _parse(input_dims), _parse(input_types)
    work = _model(name, base, inplace, ts, tensors, conc if isinstance(conc, list) else [], dims, types)
    if flops_arg is not None and flops_arg > 0:
        note = "FLOPs from the profiler's op arg" + (f"; {work.note}" if work.note else "")
        pipe = work.pipe or "tensor"
        return OpWork(work.kind, float(flops_arg), work.bytes_read, work.bytes_written, work.precision, pipe, note, work.out_numel)
    return work


def _tensor_lists(dims: Any) -> list[list[tuple[int, ...]]]:
    """The TensorList arguments' shapes, where the profiler recorded them (a list of shapes)."""
    out: list[list[tuple[int, ...]]] = []
    for d in dims if isinstance(dims, list) else []:
        if isinstance(d, list) and d and all(isinstance(x, list) and all(isinstance(v, int) for v in x) for x in d):
            out.append([tuple(x) for x in d])
    return out


#: FLOPs per element of the optimizer update (Adam: m, v, bias corrections, sqrt, divide, update)
_OPTIMIZER_FLOPS = {"_fused_adam": 16, "_fused_adamw": 18, "_fused_sgd": 3, "_fused_adagrad": 8}
#: FLOPs per element of the foreach ops (each is an elementwise op over every tensor of a list)
_FOREACH_FLOPS = {"addcmul": 2, "addcdiv": 2, "lerp": 2, "copy": 0, "zero": 0}


def _optimizer(base: str, dims: Any, types: Any) -> OpWork:
    """Foreach and fused optimizer ops: elementwise over every tensor of their lists. The
    profiler records a TensorList's shapes only in some versions; without them: unknown."""
    lists = _tensor_lists(dims)
    elem = 2  # bf16/fp16 params are the common case; fp32 when the dtype says so
    if isinstance(types, list) and any(t in ("float", "double") for t in types if isinstance(t, str)):
        elem = 4
    if not lists:
        return _unknown("elementwise", f"aten::{base}: TensorList shapes not recorded")
    numel = float(sum(np.prod(s, dtype=np.float64) for s in lists[0]))
    if base in _OPTIMIZER_FLOPS:
        # params, grads, exp_avg, exp_avg_sq read; params, exp_avg, exp_avg_sq written
        n_read = min(len(lists), 4)
        return OpWork("elementwise", _OPTIMIZER_FLOPS[base] * numel, n_read * numel * elem, 3 * numel * elem, "fp32", "vector",
                      f"{base}: {_OPTIMIZER_FLOPS[base]} FLOPs per parameter element", numel)
    op = base[len("_foreach_"):]
    per = _FOREACH_FLOPS.get(op, 1)
    return OpWork("elementwise", per * numel, len(lists) * numel * elem, numel * elem, "fp32", "vector",
                  f"{base}: {per} FLOP per element of each tensor", numel)


def _model(name: str, base: str, inplace: bool, ts: list[_Tensor | None], tensors: list[_Tensor], conc: list[Any],
           dims: Any = None, types: Any = None) -> OpWork:
    if base.startswith("_foreach_") or base in _OPTIMIZER_FLOPS:
        return _optimizer(base, dims, types)
    if name.startswith("triton_"):
        return _triton(name, tensors)
    if base in _MATMUL:
        return _matmul(base, ts, tensors)
    if _ATTENTION_FWD.match(base):
        return _attention(base, tensors, backward=False, causal=_causal(base, conc))
    if "attention" in base and base.endswith("backward"):
        return _attention(base, tensors, backward=True, causal=_causal(base, conc))
    if _CONV_BWD.match(base):
        return _conv_backward(base, ts, conc)
    if _CONV.match(base):
        return _conv(base, tensors, conc)
    if base in _NORM_FLOPS or (base.endswith("_backward") and base[: -len("_backward")] in _NORM_FLOPS) or base == "_softmax_backward_data" or base == "_log_softmax_backward_data":
        return _norm(base, tensors)
    if base in _REDUCTION:
        return _reduction(base, tensors)
    if base in _SCAN:
        if not tensors:
            return _unknown("sort", f"{name}: no tensor shapes recorded")
        t = tensors[0]
        return OpWork("sort", float(t.numel), t.nbytes, t.nbytes, _precision(t.dtype), "vector", "", float(t.numel))
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
    return OpWork("gemm", flops, read, written, _precision(a.dtype), "tensor", note, float(out_numel))


#: position of ``is_causal`` in each attention op's schema (native_functions.yaml)
_CAUSAL_ARG = {
    "scaled_dot_product_attention": 5,
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6,
    "_scaled_dot_product_flash_attention_backward": 11,
    "_scaled_dot_product_efficient_attention_backward": 11,
    "_scaled_dot_product_cudnn_attention_backward": 14,
    "_flash_attention_forward": 8,
    "_flash_attention_backward": 11,
    "_cudnn_attention_forward": 10,
    "_cudnn_attention_backward": 14,
}
#: position of ``custom_mask_type`` (0: none, 1 and 2: causal) in the memory-efficient kernels' ops
_MASK_TYPE_ARG = {"_efficient_attention_forward": 9, "_efficient_attention_backward": 14}


def _causal(base: str, conc: list[Any]) -> bool | None:
    """Whether the attention call was causal (None when not recorded)."""
    at = _CAUSAL_ARG.get(base)
    if at is not None and at < len(conc):
        flag = _flag(conc[at])
        if flag is not None:
            return flag
    at = _MASK_TYPE_ARG.get(base)
    if at is not None and at < len(conc) and isinstance(conc[at], str) and conc[at].strip().isdigit():
        return int(conc[at]) != 0
    return None


def _attention(base: str, tensors: list[_Tensor], backward: bool, causal: bool | None = None) -> OpWork:
    """Attention, as torch.utils.flop_counter counts it: forward ``2·B·H·Lq·Lk·(D + Dv)`` (QK^T
    and PV), backward ``2·B·H·Lq·Lk·(3·D + 2·Dv)`` (recomputed scores, dV, dP, dQ, dK); a causal
    mask halves both (only the lower triangle of the score matrix is computed)."""
    four = [t for t in tensors if len(t.dims) == 4]
    if len(four) < 3:
        return _unknown("attention", f"aten::{base}: q/k/v shapes not recorded")
    q, k, v = (four[1], four[2], four[3]) if backward and len(four) >= 4 else (four[0], four[1], four[2])
    if base.startswith(("_flash_attention", "_efficient_attention")):
        b, lq, h, d = q.dims  # these take (batch, seq, heads, dim)
        lk, dv = k.dims[1], v.dims[3]
    else:
        b, h, lq, d = q.dims  # the SDPA entry points take (batch, heads, seq, dim)
        lk, dv = k.dims[2], v.dims[3]
    pairs = float(b) * h * lq * lk
    if causal:
        pairs *= 0.5
        note = "causal mask: half of the score matrix counted"
    elif causal is None:
        note = "masking not recorded: full QK^T counted, as PyTorch's FLOP counter does (a causal kernel does about half)"
    else:
        note = ""
    if backward:
        flops = 2.0 * pairs * (3 * d + 2 * dv)
        read = sum(t.nbytes for t in tensors)
        written = q.nbytes + k.nbytes + v.nbytes
        return OpWork("attention", flops, read, written, _precision(q.dtype), "tensor", _join(note, "backward"), float(q.numel))
    flops = 2.0 * pairs * (d + dv)
    read = q.nbytes + k.nbytes + v.nbytes + sum(t.nbytes for t in tensors[3:] if len(t.dims) >= 2)
    out_numel = float(b) * h * lq * dv
    out = out_numel * q.itemsize + float(b) * h * lq * 4  # output + fp32 logsumexp
    return OpWork("attention", flops, read, out, _precision(q.dtype), "tensor", note, out_numel)


def _ints(v: Any, n: int, default: int) -> tuple[int, ...] | None:
    """A concrete list argument (``"[2, 2]"``) as n ints; a single int is broadcast; None when
    the argument is absent or unreadable."""
    if v is None or v == "":
        return None
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return (v,) * n
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        if len(v) == 1:
            return (v[0],) * n
        return tuple(v) if len(v) == n else None
    return None


def _flag(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v in ("True", "False", "true", "false", "1", "0"):
        return v in ("True", "true", "1")
    if isinstance(v, int):
        return bool(v)
    return None


def _conv_geometry(base: str, x: _Tensor, w: _Tensor, conc: list[Any]) -> tuple[tuple[int, ...], bool, str]:
    """Output spatial size, transposed flag and a note, from the op's scalar arguments."""
    nsp = len(x.dims) - 2
    pos = _CONV_ARGS.get(base)
    at = (lambda i: conc[i] if pos is not None and 0 <= i < len(conc) else None)
    stride = _ints(at(pos[0]), nsp, 1) if pos else None
    pad_v = at(pos[1]) if pos else None
    padding: tuple[int, ...] | None
    if isinstance(pad_v, str) and pad_v.strip("'\"") in ("same", "valid"):
        # padding="same" keeps the size at stride 1 (the only stride it allows); "valid" pads nothing
        k_sp = w.dims[2:]
        dil = (_ints(at(pos[2]), nsp, 1) if pos else None) or (1,) * nsp
        padding = tuple((d * (k - 1)) // 2 for d, k in zip(dil, k_sp)) if pad_v.strip("'\"") == "same" else (0,) * nsp
        if pad_v.strip("'\"") == "same":
            return tuple(x.dims[2:]), False, ""
    else:
        padding = _ints(pad_v, nsp, 0) if pos else None
    dilation = _ints(at(pos[2]), nsp, 1) if pos else None
    transposed = bool(pos and pos[3] == -2) or (bool(_flag(at(pos[3]))) if pos and pos[3] >= 0 else False)
    kernel = w.dims[2:]
    spatial = x.dims[2:]
    note = ""
    if stride is None or padding is None:
        note = "stride/padding not recorded: output size assumed equal to the input's (stride 1, same padding)"
        return tuple(spatial), transposed, note
    dilation = dilation or (1,) * nsp
    if transposed:
        out = tuple((i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in zip(spatial, stride, padding, dilation, kernel))
    else:
        out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(spatial, stride, padding, dilation, kernel))
    return out, transposed, note


def _conv(base: str, tensors: list[_Tensor], conc: list[Any] = []) -> OpWork:  # noqa: B006 (never mutated)
    """Forward convolution: ``2·N·K·(C/groups)·R·S·P·Q`` (weight ``K×C/g×R×S``, output ``P×Q``),
    counted once, on the op that launched the kernels. A transposed convolution scatters each
    input pixel: ``2·N·C_in·(C_out/g)·R·S·H·W``."""
    if len(tensors) < 2 or len(tensors[0].dims) < 3 or len(tensors[1].dims) != len(tensors[0].dims):
        return _unknown("conv", "convolution: input/weight shapes not recorded")
    x, w = tensors[0], tensors[1]
    out_sp, transposed, note = _conv_geometry(base, x, w, conc)
    if note:
        # without the stride the output size, and so the FLOPs, could be off by 4x: unknown
        return _unknown("conv", f"aten::{base}: stride/padding not recorded (no Concrete Inputs): output size unknown")
    n = x.dims[0]
    kernel = float(np.prod(w.dims[2:], dtype=np.float64))
    if transposed:
        c_in, cout_g = w.dims[0], w.dims[1]
        groups = max(1, x.dims[1] // c_in) if c_in else 1
        flops = 2.0 * n * c_in * cout_g * kernel * float(np.prod(x.dims[2:], dtype=np.float64))
        o = cout_g * groups
    else:
        o, cg = w.dims[0], w.dims[1]
        flops = 2.0 * n * o * cg * kernel * float(np.prod(out_sp, dtype=np.float64))
    out_numel = float(n) * o * float(np.prod(out_sp, dtype=np.float64))
    read = x.nbytes + w.nbytes + sum(t.nbytes for t in tensors[2:3] if len(t.dims) == 1)
    written = out_numel * x.itemsize
    return OpWork("conv", flops, read, written, _precision(x.dtype), "tensor", note, out_numel)


def _conv_backward(base: str, ts: list[_Tensor | None], conc: list[Any]) -> OpWork:
    """Convolution backward: the input gradient and the weight gradient each cost what the forward
    did (``2·N·K·(C/g)·R·S·P·Q``); ``output_mask`` says which were computed."""
    tensors = [t for t in ts if t is not None]
    if base.startswith(("cudnn_convolution_backward_", "miopen_convolution_backward_")):
        # (grad_output, weight | input, ...): one gradient; shapes of the other operand not all known
        return _unknown("conv", f"aten::{base}: operand roles not modelled")
    if len(tensors) < 3:
        return _unknown("conv", f"aten::{base}: grad_output/input/weight shapes not recorded")
    grad, x, w = tensors[0], tensors[1], tensors[2]
    if len(x.dims) < 3 or len(w.dims) != len(x.dims) or len(grad.dims) != len(x.dims):
        return _unknown("conv", f"aten::{base}: unexpected shapes")
    transposed = False
    pos = _CONV_ARGS.get(base)
    if pos and 0 <= pos[3] < len(conc):
        transposed = bool(_flag(conc[pos[3]]))
    kernel = float(np.prod(w.dims[2:], dtype=np.float64))
    if transposed:
        one = 2.0 * x.dims[0] * w.dims[0] * w.dims[1] * kernel * float(np.prod(x.dims[2:], dtype=np.float64))
    else:
        # the forward's output is grad_output's shape: exact, no stride needed
        one = 2.0 * grad.dims[0] * w.dims[0] * w.dims[1] * kernel * float(np.prod(grad.dims[2:], dtype=np.float64))
    mask_v = conc[10] if len(conc) > 10 else None
    mask: list[bool] = [True, True, False]
    if isinstance(mask_v, str):
        try:
            parsed = json.loads(mask_v.replace("True", "true").replace("False", "false"))
            if isinstance(parsed, list) and len(parsed) == 3:
                mask = [bool(b) for b in parsed]
        except ValueError:
            pass
    n_grads = int(mask[0]) + int(mask[1])
    note = "backward: input and weight gradients each cost the forward's FLOPs" if n_grads == 2 else ""
    read = grad.nbytes + (w.nbytes if mask[0] else 0.0) + (x.nbytes if mask[1] else 0.0)
    written = (x.nbytes if mask[0] else 0.0) + (w.nbytes if mask[1] else 0.0)
    if mask[2]:
        written += w.dims[0] * grad.itemsize
    return OpWork("conv", one * n_grads, read, written, _precision(x.dtype), "tensor", note, float(x.numel) if mask[0] else math.nan)


def _norm(base: str, tensors: list[_Tensor]) -> OpWork:
    kind = "softmax" if "softmax" in base else "norm"
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
    return OpWork(kind, per * x.numel, read, written, _precision(x.dtype), "vector", note, float(x.numel))


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
    return OpWork("copy", 0.0, rows + idx.nbytes, rows, _precision(weight.dtype), "vector", "embedding: only the looked-up rows are read", float(idx.numel) * weight.dims[1])


def _elementwise(base: str, inplace: bool, ts: list[_Tensor | None], tensors: list[_Tensor]) -> OpWork:
    kind = ("fill" if base in _FILL else "copy") if base in _COPY else "elementwise"
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
    flops = 0.0 if kind in DATA_KINDS else float(out_t.numel)
    return OpWork(kind, flops, sum(t.nbytes for t in inputs), out_bytes, _precision(out_t.dtype), "vector", note, float(out_t.numel))


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


def kernel_kind(name: str) -> str:
    """What a kernel is, from its name alone: :func:`kviewer.analysis.kinds.kernel_kind`."""
    return _kinds.kernel_kind(name)


MODEL_COLUMNS = [
    "op_id",
    "op_name",
    "op_dims",
    "kind",
    "kind_source",
    "helper",
    "model_flops",
    "model_bytes",
    "model_bytes_written",
    "out_numel",
    "precision",
    "pipe",
    "op_kernels",
    "model_note",
]


def model_kernels(trace: Trace, classes: pd.DataFrame | None = None) -> pd.DataFrame:
    """The modelled work of every kernel (one row per kernel, in ``trace.kernels`` order).

    Columns: ``op_id``, ``op_name``, ``op_dims`` (the op's input shapes, JSON text), ``kind``,
    ``kind_source`` and ``helper`` (from :func:`kviewer.analysis.kinds.classify`),
    ``model_flops``, ``model_bytes`` (read + written), ``model_bytes_written`` (the output, which a
    fused consumer would no longer read back), ``out_numel`` (elements of the op's output),
    ``precision``, ``pipe`` (tensor | vector), ``op_kernels`` (how many kernels the op launched)
    and ``model_note``.

    An op's FLOPs and bytes go to the kernels doing its arithmetic (split evenly when there are
    several); its helper kernels (layout transforms, converts, fills, copies, split-K reductions)
    get none of them: a copy or fill helper is known to do no FLOPs, its bytes are unknown.
    """
    k = trace.kernels
    n = len(k)
    cls = _kinds.classify(trace) if classes is None else classes
    op_id = cls["op_row"].to_numpy(np.int64)
    out = {
        "op_id": op_id,
        "op_name": cls["op_name"].to_numpy(dtype=object).copy(),
        "op_dims": np.full(n, "", dtype=object),
        "kind": cls["kind"].to_numpy(dtype=object).copy(),
        "kind_source": cls["kind_source"].to_numpy(dtype=object),
        "helper": cls["helper"].to_numpy(dtype=bool),
        "model_flops": np.full(n, np.nan),
        "model_bytes": np.full(n, np.nan),
        "model_bytes_written": np.full(n, np.nan),
        "out_numel": np.full(n, np.nan),
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
    m = len(rows)
    # the launching ops' columns, the kernels' rows taken before they are made text: converting a
    # whole cpu_slices column (~375k rows) cost more than the rest
    op_names = c["name"].iloc[ids].astype(str).to_numpy()
    op_dims = c["input_dims"].iloc[ids].astype(str).to_numpy()
    op_types = c["input_types"].iloc[ids].astype(str).to_numpy()
    op_conc = c["concrete_inputs"].iloc[ids].astype(str).to_numpy() if "concrete_inputs" in c else np.full(m, "", dtype=object)
    op_flops = c["flops"].to_numpy(np.float64)[ids]
    _, op_at, per_op = np.unique(ids, return_inverse=True, return_counts=True)
    n_ops = len(per_op)
    counts = per_op[op_at]
    out["op_kernels"][rows] = counts
    out["op_dims"][rows] = op_dims
    helper = out["helper"][rows]
    main = ~helper
    kdur = k["dur"].to_numpy(np.float64)[rows]
    dur = np.where(kdur < 0.0, 0.0, kdur)  # max(dur, 0.0), NaN kept as max() keeps it
    # the kernels doing each op's arithmetic, and their measured time (bincount adds in row order)
    n_main = np.bincount(op_at[main], minlength=n_ops)
    main_ns = np.bincount(op_at[main], weights=dur[main], minlength=n_ops)
    # each distinct kernel name once: the gradient it computes (1 dgrad, 2 wgrad, 0 neither) and
    # whether it runs on the FMA pipe
    kname_text = k["name"].iloc[rows].astype(str).to_numpy()
    kname_at, kname_first = distinct_rows(_row_codes(k["name"], rows, kname_text))
    knames = kname_text[kname_first]
    words = [_kinds.name_words(str(nm)) for nm in knames]
    grad = np.array([1 if "dgrad" in w else 2 if "wgrad" in w else 0 for w in words], dtype=np.int64)[kname_at]
    fma = np.array([_kinds.fma_pipe(str(nm)) for nm in knames], dtype=bool)[kname_at]
    # ops whose main kernels are each one gradient (dgrad / wgrad), as many as the op computes
    # (each gradient may run as several kernels, a split-K wgrad: those share its FLOPs by time)
    has = [np.bincount(op_at[main & (grad == g)], minlength=n_ops) > 0 for g in (0, 1, 2)]
    per_grad = (n_main > 0) & ~has[0]
    n_grads = has[1].astype(np.int64) + has[2]
    grad_key = op_at * 2 + grad - 1
    in_grad = main & per_grad[op_at]
    grad_ns = np.bincount(grad_key[in_grad], weights=dur[in_grad], minlength=2 * n_ops)

    # each distinct op call (name, shapes, dtypes, FLOPs arg, scalars) modelled once
    name_at = _row_codes(c["name"], ids, op_names)
    call, first = distinct_rows(name_at, *(_row_codes(c[col], ids, text) for col, text in
                                       (("input_dims", op_dims), ("input_types", op_types), ("concrete_inputs", op_conc)) if col in c),
                            pd.factorize(op_flops, use_na_sentinel=False)[0])
    works = [op_work(op_names[j], op_dims[j], op_types[j], float(op_flops[j]), op_conc[j]) for j in first]
    w_flops = np.array([w.flops for w in works], dtype=np.float64)[call]
    w_kind = np.array([w.kind for w in works], dtype=object)[call]
    w_prec = np.array([w.precision for w in works], dtype=object)[call]
    w_pipe = np.array([w.pipe for w in works], dtype=object)[call]
    w_notes = [w.note for w in works]  # the op's own note of each row: w_notes[w_note]
    w_note = call.copy()
    matrix = np.array([w.kind in ("conv", "gemm", "attention") for w in works], dtype=bool)[call]
    need = np.flatnonzero(np.isnan(w_flops) & matrix)
    enclosing = _enclosing_flops(trace, np.unique(ids[need])) if len(need) else {}
    for r in need:
        if int(ids[r]) in enclosing:
            # the innermost op (aten::cudnn_convolution) has no formula here, but an op around it
            # (aten::conv2d) carries the profiler's own FLOP count
            w = works[call[r]]
            flops, outer = enclosing[int(ids[r])]
            w_flops[r], w_prec[r], w_pipe[r] = flops, w.precision or "", w.pipe or "tensor"
            w_notes.append(_join(w.note, f"FLOPs from the profiler's arg on the enclosing {outer}"))
            w_note[r] = len(w_notes) - 1
    out["precision"][rows] = w_prec
    out["out_numel"][rows] = np.array([w.out_numel for w in works], dtype=np.float64)[call]

    kind = out["kind"][rows]
    source = out["kind_source"][rows]
    note = np.empty(m, dtype=object)
    # helpers: none of the op's FLOPs or bytes; a copy or fill helper is known to do no FLOPs
    out["model_flops"][rows[helper & pd.Index(kind).isin(list(DATA_KINDS))]] = 0.0
    _notes(note, np.flatnonzero(helper), (name_at,),
           lambda j: f"helper kernel of {op_names[j]}: none of the op's FLOPs or bytes (they go to its main kernels)")
    mains = n_main[op_at]
    by_grad = main & (mains > 1) & per_grad[op_at]
    by_time = main & (mains > 1) & ~by_grad
    alone = main & (mains <= 1) & (counts > 1)
    single = main & (mains <= 1) & (counts <= 1)
    share = np.ones(m)
    # a convolution backward's dgrad and wgrad kernels each compute one gradient, and each
    # gradient costs the forward's FLOPs: each gets exactly its own, not a time share
    same_ns = grad_ns[grad_key[by_grad]]
    share[by_grad] = (1.0 / n_grads[op_at[by_grad]]) * _ratio(dur[by_grad], same_ns, np.ones(len(same_ns)))
    grad_word = ("", "dgrad", "wgrad")
    _notes(note, np.flatnonzero(by_grad), (w_note, name_at, counts, grad, n_grads[op_at]),
           lambda j: _join(w_notes[w_note[j]], f"{op_names[j]} launched {counts[j]} kernels: its {grad_word[grad[j]]} kernel(s) "
                           f"compute one of its {n_grads[op_at[j]]} gradients, 1/{n_grads[op_at[j]]} of the op's work"))
    # several kernels share the op's arithmetic (statistics then normalise, split-K partials): in
    # proportion to their time, so each runs at the op's own SOL%
    share[by_time] = _ratio(dur[by_time], main_ns[op_at[by_time]], 1.0 / mains[by_time])
    _notes(note, np.flatnonzero(by_time), (w_note, name_at, counts, mains),
           lambda j: _join(w_notes[w_note[j]], f"{op_names[j]} launched {counts[j]} kernels: its work is split over the "
                           f"{mains[j]} doing its arithmetic in proportion to their time"))
    _notes(note, np.flatnonzero(alone), (w_note, name_at, counts),
           lambda j: _join(w_notes[w_note[j]], f"{op_names[j]} launched {counts[j]} kernels: all its work is attributed to this one"))
    _notes(note, np.flatnonzero(single), (w_note,), lambda j: w_notes[w_note[j]])
    out["model_note"][rows] = note

    # the op's kind where the name alone gave another (never over the counters or the op's own kind)
    kind_ok = np.array([w.kind not in ("other", "") and w.kind in _kinds.KINDS for w in works], dtype=bool)[call]
    retyped = main & kind_ok & (source != "counters") & (source != "op") & (kind != w_kind)
    kind[retyped] = w_kind[retyped]
    out["kind"][rows] = kind
    at = rows[main]
    with np.errstate(all="ignore"):  # IEEE results, as Python's float arithmetic gives them
        out["model_flops"][at] = (w_flops * share)[main]
        out["model_bytes"][at] = (np.array([w.bytes for w in works], dtype=np.float64)[call] * share)[main]
        out["model_bytes_written"][at] = (np.array([w.bytes_written for w in works], dtype=np.float64)[call] * share)[main]
    pipe = w_pipe.copy()
    pipe[helper] = "vector"
    # an fp32 GEMM run by an FMA-pipe kernel (volta_sgemm, cutlass simt, ffma): the vector peak applies
    pipe[main & (w_pipe == "tensor") & fma] = "vector"
    out["pipe"][rows] = pipe
    return pd.DataFrame(out, columns=MODEL_COLUMNS)


def _row_codes(col: pd.Series, at: np.ndarray, text: np.ndarray) -> np.ndarray:
    """Non-negative codes of the rows ``at`` of ``col``, equal only where their ``text`` is equal: a
    categorical column's codes (hashing ~25k JSON shapes cost more than the rest), else the text's."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(np.int64)[at] + 1  # a missing value's -1 is 0
    return pd.factorize(text, use_na_sentinel=False)[0]


def _notes(note: np.ndarray, where: np.ndarray, key: tuple[np.ndarray, ...], text: Callable[[int], str]) -> None:
    """``note[where] = text(row)``, each distinct note made once: rows whose ``key`` columns are
    equal get the text of the first of them."""
    if not len(where):
        return
    at, first = distinct_rows(*(col[where] for col in key))
    note[where] = np.array([text(int(where[j])) for j in first], dtype=object)[at]


def _ratio(num: np.ndarray, den: np.ndarray, otherwise: np.ndarray | float) -> np.ndarray:
    """``num / den`` where ``den > 0``, else ``otherwise`` (a NaN ``den`` too, as ``if den > 0`` is)."""
    out = np.broadcast_to(np.asarray(otherwise, dtype=np.float64), num.shape).copy()
    with np.errstate(all="ignore"):  # IEEE results, as Python's float division gives them
        np.divide(num, den, out=out, where=den > 0)
    return out


def _enclosing_flops(trace: Trace, rows: np.ndarray) -> dict[int, tuple[float, str]]:
    """For op rows without a FLOP count, the profiler's ``FLOPs`` arg of the innermost op around
    them on the same thread that has one (``aten::conv2d`` around ``aten::cudnn_convolution``)."""
    c = trace.cpu_slices
    if not len(c) or "flops" not in c:
        return {}
    flops = c["flops"].to_numpy(np.float64)
    has = np.flatnonzero((flops > 0) & (c["category"].astype(str) == "op").to_numpy())
    if not len(has):
        return {}
    start = c["start"].to_numpy(np.int64)
    end = start + c["dur"].to_numpy(np.int64)
    depth = c["depth"].to_numpy(np.int64)
    key = list(zip(c["rank"].to_numpy(np.int64), c["pid"].to_numpy(np.int64), c["tid"].to_numpy(np.int64)))
    names = c["name"].astype(str).to_numpy()
    by_thread: dict[tuple[int, int, int], list[int]] = {}
    for j in has:
        by_thread.setdefault(key[j], []).append(int(j))
    sorted_rows = {k: np.asarray(sorted(v, key=lambda j: start[j]), dtype=np.int64) for k, v in by_thread.items()}
    out: dict[int, tuple[float, str]] = {}
    for r in rows:
        r = int(r)
        if flops[r] > 0:
            continue
        cand = sorted_rows.get(key[r])
        if cand is None:
            continue
        stop = int(np.searchsorted(start[cand], start[r], side="right"))
        best = -1
        for j in cand[max(0, stop - 64):stop][::-1]:
            if end[j] >= end[r] and depth[j] < depth[r] and (best < 0 or depth[j] > depth[best]):
                best = int(j)
        if best >= 0:
            out[r] = (float(flops[best]), names[best])
    return out


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a and b else a or b


def attention_recompute_share(name: str, input_dims: str, input_types: str) -> float:
    """The share of an attention backward op's modelled FLOPs that recomputes the forward's scores.

    A fused (flash / memory-efficient / cuDNN) attention backward recomputes ``S = QK^T``
    (``2·B·H·Lq·Lk·D``) besides its gradients dV, dP, dQ, dK (``2·B·H·Lq·Lk·(2·D + 2·Dv)``, twice
    the forward): :func:`_attention` counts both, ``(3·D + 2·Dv)``, as the hardware does. Model
    FLOPs (MFU) leave the recomputation out, hardware FLOPs (HFU) keep it. Returns
    ``D / (3·D + 2·Dv)`` for an attention backward op whose shapes are recorded, 0.0 for every
    other op, NaN when the shapes are missing.
    """
    base, _ = base_op_name(name)
    if "attention" not in base or not base.endswith("backward"):
        return 0.0
    four = [t for t in _tensors(_parse(input_dims), _parse(input_types)) if t is not None and len(t.dims) == 4]
    if len(four) < 4:
        return math.nan
    q, v = four[1], four[3]
    d, dv = q.dims[3], v.dims[3]
    return d / (3.0 * d + 2.0 * dv) if 3 * d + 2 * dv > 0 else math.nan
