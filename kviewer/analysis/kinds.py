"""THE kernel taxonomy: what a kernel is (kind), the precision and pipe of its arithmetic, and the
one kernel -> launching-op join. Every consumer (speed of light, the FLOP model, fusion, compare,
the UI colours and the report) asks this module; no other module classifies kernels.

Kinds
-----
``gemm``, ``conv``, ``attention``, ``elementwise``, ``reduction``, ``norm``, ``softmax``,
``copy``, ``fill``, ``communication``, ``sort`` (sort and scan) and ``other``.

Signals, strongest first
------------------------
1. **Counters that fired**: a kernel whose tensor-pipe operation counters are non-zero does matrix
   math (``gemm`` unless its name says conv or attention); the counter family that fired gives
   the precision (``sm__ops_path_tensor_src_bf16_dst_fp32`` -> bf16) and the pipe (tensor).
2. **The launching op** (``aten::addmm`` -> gemm, ``aten::native_layer_norm`` -> norm) and its
   dtypes (the precision of the math).
3. **Name tokens**, matched as *whole words* of the demangled name without its argument list:
   the name is split at every non-alphanumeric character and at camelCase boundaries, and a rule
   matches a word (``conv``), never a substring (``convert`` is not ``conv``).

An op launches *helper* kernels beside the ones doing its arithmetic: layout transforms, dtype
converts, fills, split-K reductions, epilogues. A kernel whose own name says copy / fill /
communication / sort, or (under a GEMM, convolution or attention op) reduction or elementwise, is
such a helper; so is a kernel of one block beside a sibling of the same op spread over many
(BatchNorm's per-channel inverse standard deviation beside its transform). A helper keeps the kind
its name gives and gets none of the op's FLOPs (:func:`classify`'s ``helper`` column).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from functools import lru_cache

import numpy as np
import pandas as pd

from kviewer.core import Trace
from kviewer.core.names import drop_args, drop_templates, strip_kd

KINDS = (
    "gemm", "conv", "attention", "elementwise", "reduction", "norm", "softmax",
    "copy", "fill", "communication", "sort", "other",
)
#: kinds whose kernels do an op's matrix arithmetic
MATRIX_KINDS = frozenset({"gemm", "conv", "attention"})
#: kinds that move data without arithmetic
DATA_KINDS = frozenset({"copy", "fill"})
#: kinds whose names are library, vendor and tile specific (compare matches them by kind)
LIBRARY_KINDS = frozenset({"gemm", "attention", "conv", "communication"})

#: element size in bytes of the dtype names the PyTorch profiler writes
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1, "long int": 8, "long": 8, "int64_t": 8, "int": 4, "short int": 2, "short": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
}

#: the precision whose peak applies to math on this dtype
DTYPE_PRECISION: dict[str, str] = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::complex<float>": "fp32", "c10::complex<double>": "fp64",
    "signed char": "int8", "unsigned char": "int8",
}

# ---------------------------------------------------------------------------------------------
# name words

_SPLIT = re.compile(r"[^0-9A-Za-z]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@lru_cache(maxsize=65536)
def _sequences(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(alphanumeric runs, the same runs split at camelCase boundaries), lower case, in order."""
    runs: list[str] = []
    parts: list[str] = []
    for run in _SPLIT.split(text):
        if not run:
            continue
        runs.append(run.lower())
        parts.extend(p.lower() for p in (_CAMEL.findall(run) or [run]))
    return tuple(runs), tuple(parts)


@lru_cache(maxsize=65536)
def name_words(name: str) -> tuple[str, ...]:
    """The words of a kernel name, lower case: each alphanumeric run and, where it is camelCase,
    its parts too (``CatArrayBatchedCopy`` -> ``catarraybatchedcopy cat array batched copy``).
    The argument list and AMD ``.kd`` suffixes are dropped first."""
    runs, parts = _sequences(drop_args(strip_kd(name.strip())))
    return tuple(dict.fromkeys(runs + parts))


def _words(*ws: str) -> frozenset[str]:
    return frozenset(w for group in ws for w in group.split())


# Each rule: a set of whole words, regexes that must match a whole word (fullmatch), and phrases
# (consecutive words). Rules are tried in order; the first that matches decides.
_Rule = tuple[str, frozenset[str], tuple[re.Pattern[str], ...], tuple[tuple[str, ...], ...]]


def _rule(kind: str, words: str = "", patterns: tuple[str, ...] = (), phrases: tuple[str, ...] = ()) -> _Rule:
    return (kind, _words(words), tuple(re.compile(p) for p in patterns), tuple(tuple(p.split()) for p in phrases))


#: dtype words: ``<dtype> to <dtype>`` in a name is a conversion (``_float_to_hfp8_gpu``)
_DTYPE_WORDS = ("float", "half", "double", "hfp8", "fp8", "fp16", "fp32", "bf16", "bfloat16", "int8", "16bits", "32bits", "8bits")
_CONVERSIONS = tuple(f"{a} to {b}" for a in _DTYPE_WORDS for b in _DTYPE_WORDS if a != b)

_RULES: tuple[_Rule, ...] = (
    # address/offset precomputation beside a library kernel: no arithmetic of the op
    _rule("other", "", (), ("compute offsets", "offsets kernel")),
    # a library clearing its workspace before the math (cuDNN's init_device_workspace_kernel)
    _rule("fill", "", (r"init_?workspace\w*", r"workspace_?init\w*"), ("init device workspace", "init workspace", "workspace init")),
    _rule("communication", "nccl rccl allreduce allgather reducescatter alltoall sendrecv",
          (r"nccl\w*", r"rccl\w*", r"msccl\w*"),
          ("all reduce", "all gather", "reduce scatter", "cross device reduce", "all to all")),
    _rule("attention", "flash fmha sdpa attention attn mha flashattn flashattention paged_attention",
          (r"fmha\w*", r"flash\w*attn\w*", r"\w*attention", r"attn\w*")),
    _rule("conv", "conv conv1d conv2d conv3d convolution convolve convolutional fprop dgrad wgrad winograd "
          "scudnn fft2d fft3d igemm depthwise",
          (r"conv[123]d\w*", r"(?:fprop|dgrad|wgrad)\w*", r"s\d+(?:fprop|dgrad|wgrad)\w*",
           r"fft\d+d\w*", r"winograd\w*"),
          ("implicit gemm", "implicit convolve", "explicit convolve")),
    _rule("gemm", "gemm gemv nvjet cublas cublaslt hipblaslt cijk xmma wgmma hgmma gmma matmul bmm addmm "
          "mm sgemm hgemm dgemm cgemm zgemm igemm gemmk1 tensorop",
          (r"[shdczi]?gem[mv]\w*", r"[a-z]?[\dx]+gemm\w*", r"cijk", r"nvjet\w*", r"gcgemm", r"\w*gemv\w*")),
    _rule("norm", "layernorm rmsnorm batchnorm groupnorm instancenorm welford bn",
          (r"\w*layernorm\w*", r"\w*rmsnorm\w*", r"\w*batchnorm\w*", r"\w*groupnorm\w*"),
          ("layer norm", "rms norm", "batch norm", "group norm", "instance norm", "gamma beta", "rowwise moments",
           "compute moments", "part grad gamma", "grad gamma")),
    _rule("softmax", "softmax logsoftmax", (r"\w*softmax\w*",)),
    # optimizer updates (fbgemm's fused embedding backward + rowwise adagrad, ...)
    _rule("elementwise", "adagrad adam adamw sgd lamb lars", (r"\w*adagrad\w*", r"(?:fused)?adamw?\d*"),
          ("masked fill", "masked scale")),
    _rule("fill", "fill memset zero zeros fillfunctor uninitialized_fill",
          (r"fill(?:functor|buffer\w*|kernel|\d*)", r"memset\w*")),
    _rule("copy", "copy memcpy transpose permute convert catarray cat concat gather scatter "
          "embedding nchwtonhwc nhwctonchw contiguous clone im2col col2im quantize dequantize",
          (r"\w*copy\w*", r"\w*memcpy\w*", r"\w*transpose\w*", r"catarray\w*", r"\w*nchwtonhwc\w*",
           r"\w*nhwctonchw\w*", r"index_?(?:select|put)\w*", r"\w*gather\w*", r"\w*scatter\w*", r"\w*permute\w*",
           r"convert\w*", r"\w*embedding\w*", r"im2col\w*", r"col2im\w*"),
          ("nchw to nhwc", "nhwc to nchw", "index select", "index put") + _CONVERSIONS),
    _rule("sort", "sort radix topk scan cumsum cumprod", (r"\w*sort\w*", r"\w*scan\w*", r"radix\w*")),
    _rule("reduction", "reduce reduction reduceop argmax argmin splitkreduce kreduce sum mean norm amax amin pool pooling",
          (r"\w*reduce\w*", r"\w*reduction\w*", r"(?:max|min|avg|average|adaptive|lp)?pool(?:ing|\dd)?"),
          ("compute dot",)),
    _rule("elementwise", "elementwise pointwise functor poi foreach activation gelu relu silu swish sigmoid "
          "tanh dropout add sub mul div addition subtract multiply divide axpy saxpy daxpy scal exp log pow "
          "where clamp epilogue distribution scale transform",
          (r"\w*functor\w*", r"\w*elementwise\w*", r"\w*pointwise\w*", r"multi_tensor_apply\w*",
           r"\w*foreach\w*", r"\w*gelu\w*", r"\w*relu\w*", r"\w*dropout\w*"),
          ("multi tensor apply", "triton poi")),
)


@lru_cache(maxsize=65536)
def name_kind(name: str) -> str:
    """The kind a kernel's name alone gives (one of :data:`KINDS`), by whole words."""
    text = drop_args(strip_kd(name.strip()))
    full = _sequences(text)
    if not full[0]:
        return "other"
    # Inductor kernels say what they are in their prefix; a fused norm/softmax keeps its word
    head = name.strip().lower()
    if head.startswith("triton_"):
        if head.startswith("triton_tem"):
            return _first_rule(full, ("conv", "gemm", "attention")) or "gemm"
        rest = _first_rule(full, ("norm", "softmax"))
        if rest:
            return rest
        if head.startswith(("triton_red", "triton_per")):
            return "reduction"
        if head.startswith("triton_poi"):
            return "elementwise"
    # the kernel's own name first; the template arguments only where it names a generic launcher
    # (``vectorized_elementwise_kernel<FillFunctor>``, ``cutlass::Kernel<..._gemm_...>``)
    outer = _first_rule(_sequences(drop_templates(text)), None)
    if outer and outer not in ("elementwise", "other"):
        return outer
    return _first_rule(full, None) or outer or "other"


def _first_rule(seqs: tuple[tuple[str, ...], tuple[str, ...]], only: tuple[str, ...] | None) -> str:
    runs, parts = seqs
    wset = set(runs) | set(parts)
    for kind, ws, pats, phrases in _RULES:
        if only is not None and kind not in only:
            continue
        if wset & ws:
            return kind
        if any(p.fullmatch(w) for p in pats for w in wset):
            return kind
        for ph in phrases:
            if not wset.issuperset(ph):  # a phrase whose words are not all there cannot follow in order
                continue
            n = len(ph)
            for seq in (runs, parts):
                if any(seq[i : i + n] == ph for i in range(len(seq) - n + 1)):
                    return kind
    return ""


def kernel_kind(name: str) -> str:
    """What a kernel is from its name alone (for traces without counters or ops)."""
    return name_kind(name)


# ---------------------------------------------------------------------------------------------
# launching op

_OP_KIND_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (k, re.compile(p))
    for k, p in (
        # "broadcast" alone: c10d's broadcast_ (its base); aten::broadcast_tensors / broadcast_to are views
        ("communication", r"^(c10d::|nccl:|gloo:|record_param_comms)|all_?reduce|all_?gather|reduce_scatter|all_to_all|^broadcast$|^_?c10d_functional::"),
        ("attention", r"attention|^_?flash_attn|sdpa"),
        ("conv", r"^(_?convolution|_?conv_?\w*|cudnn_convolution\w*|miopen_convolution\w*|mkldnn_convolution\w*|convolution_backward\w*|_conv_depthwise2d\w*|conv_transpose\w*|slow_conv\w*|thnn_conv\w*)$"),
        ("gemm", r"^(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|mv|addmv|dot|vdot|_addmm_activation|addbmm|einsum|_int_mm|_grouped_mm|_scaled_grouped_mm)$"),
        ("norm", r"(layer_norm|rms_norm|batch_norm|group_norm|instance_norm)"),
        ("softmax", r"softmax"),
        ("fill", r"^(fill|zero|zeros|ones|full|empty|new_zeros|new_ones|zeros_like|ones_like|full_like|new_full)$"),
        ("copy", r"^(copy|clone|contiguous|_to_copy|to|type_as|cat|stack|index_select|gather|scatter|index|embedding|embedding_dense_backward|index_put|_index_put_impl|transpose|permute|repeat|expand_copy|_unsafe_view_copy)$"),
        ("sort", r"^(sort|argsort|topk|cumsum|cumprod|logcumsumexp|unique|_unique2|searchsorted|multinomial)$"),
        ("reduction", r"^(sum|mean|amax|amin|max|min|argmax|argmin|prod|norm|linalg_vector_norm|var|std|var_mean|std_mean|all|any|logsumexp|nansum|nanmean|count_nonzero|_foreach_norm)$"),
        ("elementwise", r"^_foreach_|^_fused_(adam|adamw|sgd|adagrad)|^(add|sub|rsub|mul|div|true_divide|pow|neg|abs|exp|log|sqrt|rsqrt|reciprocal|sigmoid|tanh|relu|gelu|silu|where|masked_fill|clamp|clamp_min|clamp_max|lerp|addcmul|addcdiv|maximum|minimum|eq|ne|lt|le|gt|ge|dropout|native_dropout|threshold_backward|gelu_backward|silu_backward|sigmoid_backward|tanh_backward|mse_loss_backward|erf|sin|cos|exp2|square|sign|floor|ceil|round|nan_to_num|hardtanh|leaky_relu|elu|softplus|mish|hardswish|logical_not|bitwise_and)$"),
    )
)


#: ops whose eager CUDA kernels need a contiguous (NCHW) input or write NCHW whatever they are fed,
#: and the copies of their output each adds under channels_last: 2 = the input copied to NCHW inside
#: the op (``aten::contiguous``) and the NCHW output copied back by the convolution after it (seen in
#: PyTorch 2.11 on an H100: ``sample_traces/h100_r7_clgn_cl``, each ``aten::group_norm`` holding an
#: ``aten::contiguous`` copy and each following ``aten::conv2d`` another); 1 = only the copy back (the
#: op's own kernel reads its input in any layout: ``pixel_shuffle``'s clone). The copy back is
#: counted only where a convolution takes the output (``WhatIfModel._copied_back_and_itemsize``).
#: Matched against the outermost op holding the kernels' launching op (:func:`enclosing_op_rows`:
#: ``instance_norm`` launches through ``batch_norm``). ``tests/bench/device/channels_last_ops.py``
#: found the same conversion in ``layer_norm`` over (C, H, W) and ``softmax`` over C; those also run
#: on tensors no convolution wrote (attention's softmax, a transformer's LayerNorm), where they copy
#: nothing, so they are not listed: where a program has them after a convolution, ``--channels-last``
#: overstates the gain
EAGER_NCHW_OPS: dict[str, int] = {"group_norm": 2, "native_group_norm": 2, "instance_norm": 2, "pixel_shuffle": 1}


def op_base(name: str) -> str:
    """``"aten::add_"`` -> ``"add"``: the op without namespace, overload or in-place underscore."""
    n = name.split("::")[-1].split(".")[0]
    if len(n) > 1 and n.endswith("_") and not n.endswith("__"):
        n = n[:-1]
    return n


@lru_cache(maxsize=16384)
def op_kind(op_name: str) -> str:
    """The kind of work a framework op does ("" when the op is unknown or says nothing)."""
    if not op_name:
        return ""
    low = op_name.lower()
    if low.startswith(("nccl:", "c10d::", "gloo:", "record_param_comms")):
        return "communication"
    base = op_base(low)
    for kind, pattern in _OP_KIND_WORDS:
        if pattern.search(base) or (kind in ("communication", "attention", "norm", "softmax") and pattern.search(low)):
            return kind
    return ""


def kernel_op_rows(trace: Trace) -> np.ndarray:
    """THE kernel -> op join: for every kernel, the ``cpu_slices`` row position of the framework op
    that launched it (-1 when unknown).

    PyTorch traces give a kernel the External id of the innermost op running when it was
    launched; ids restart per process, so the join is on ``(rank, external_id)``, and when
    several op rows share that key the deepest (innermost) wins.
    """
    k = trace.kernels
    out = np.full(len(k), -1, dtype=np.int64)
    if not len(k):
        return out
    ext = k["external_id"].to_numpy(np.int64)
    c = trace.cpu_slices
    if not len(c) or not (ext >= 0).any():
        return out
    is_op = (c["category"].astype(str) == "op").to_numpy() & (c["external_id"].to_numpy(np.int64) >= 0)
    if not is_op.any():
        return out
    pos = np.flatnonzero(is_op)
    ops = pd.DataFrame(
        {"pos": pos, "rank": c["rank"].to_numpy(np.int64)[pos], "ext": c["external_id"].to_numpy(np.int64)[pos],
         "depth": c["depth"].to_numpy(np.int64)[pos]}
    )
    ops = ops.sort_values(["rank", "ext", "depth"], kind="stable").drop_duplicates(["rank", "ext"], keep="last")
    key_ops = pd.MultiIndex.from_arrays([ops["rank"].to_numpy(), ops["ext"].to_numpy()])
    key_k = pd.MultiIndex.from_arrays([k["rank"].to_numpy(np.int64), ext])
    at = key_ops.get_indexer(key_k)
    found = (at >= 0) & (ext >= 0)
    out[found] = ops["pos"].to_numpy(np.int64)[at[found]]
    return out


def enclosing_op_rows(trace: Trace, ops: np.ndarray, bases: Collection[str]) -> np.ndarray:
    """For every kernel whose launching op is ``ops[i]`` (a ``cpu_slices`` row, -1): the row of the
    outermost framework op whose :func:`op_base` is one of ``bases`` and that holds the launching op
    on its thread (the launching op itself included), -1 where none does.

    An eager op often launches its kernels through ops inside it (``aten::instance_norm`` ->
    ``aten::batch_norm`` -> the kernels; ``aten::pixel_shuffle`` -> ``aten::clone`` -> a copy),
    so the op a rule is about is not always the one :func:`kernel_op_rows` names."""
    out = np.full(len(ops), -1, dtype=np.int64)
    c = trace.cpu_slices
    if not len(ops) or not len(c) or not (ops >= 0).any():
        return out
    names = c["name"].astype("category")
    wanted = np.array([op_base(str(n)) in bases for n in names.cat.categories] + [False])[names.cat.codes.to_numpy()]
    cand = np.flatnonzero(wanted & (c["category"] == "op").to_numpy(bool))
    if not len(cand):
        return out
    start, end = c["start"].to_numpy(np.int64), c["end"].to_numpy(np.int64)
    thread, _ = pd.factorize(pd.MultiIndex.from_arrays(
        [c["rank"].to_numpy(np.int64), c["pid"].to_numpy(np.int64), c["tid"].to_numpy(np.int64)]))
    has = np.flatnonzero(ops >= 0)
    rows = ops[has]
    for t in np.unique(thread[cand]).tolist():
        mine = cand[thread[cand] == t]
        mine = mine[np.lexsort((-end[mine], start[mine]))]
        # the outermost: not inside an earlier-starting candidate (ops on one thread nest properly)
        reach = np.maximum.accumulate(end[mine])
        mine = mine[np.concatenate(([True], start[mine][1:] >= reach[:-1]))]
        on = np.flatnonzero(thread[rows] == t)
        at = np.searchsorted(start[mine], start[rows[on]], side="right") - 1
        ok = at >= 0
        holder = mine[np.maximum(at, 0)]
        ok &= end[holder] >= end[rows[on]]
        out[has[on[ok]]] = holder[ok]
    return out


def kernel_op_info(trace: Trace, ops: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Launching op name and its input shapes (JSON text) per kernel, ``""`` where unknown."""
    ops = kernel_op_rows(trace) if ops is None else ops
    names = np.full(len(ops), "", dtype=object)
    dims = np.full(len(ops), "", dtype=object)
    has = ops >= 0
    if has.any():
        c = trace.cpu_slices
        names[has] = c["name"].astype(str).to_numpy(dtype=object)[ops[has]]
        dims[has] = c["input_dims"].astype(str).to_numpy(dtype=object)[ops[has]]
    return names, dims


# ---------------------------------------------------------------------------------------------
# precision


#: the type letter of library GEMM names: nvjet's ``tst``/``hsh``/``sss`` (A, compute, D) and
#: Tensile/hipBLASLt's ``Cijk_…_BBS_…``/``HHS``/``SS`` (inputs, then compute)
_TYPE_LETTER = {"t": "bf16", "b": "bf16", "h": "fp16", "s": "fp32", "d": "fp64", "q": "fp8", "e": "fp8", "f": "fp8"}
_NVJET_TYPES = re.compile(r"^[thsdqe][thsdqe][thsdqe]$")
_TENSILE_TYPES = re.compile(r"^(?:[bhsd]{2,3}|[bhsd]{2}s)$")
#: words naming fp32 math on the FMA (SIMT) pipe rather than the tensor cores
FMA_WORDS = frozenset({"ffma", "sgemm", "simt", "fma"})


def fma_pipe(name: str) -> bool:
    """The kernel name says its math runs on the FMA (SIMT) pipe (``volta_sgemm_…``, ``…_simt_…``, ``ffma``)."""
    return bool(FMA_WORDS & set(name_words(name)))


def _library_type(ws: tuple[str, ...]) -> str:
    """The precision a GEMM library encodes in a type token of the name ('' if none)."""
    if "nvjet" in ws:
        tok = next((w for w in ws if _NVJET_TYPES.match(w)), "")
        return _TYPE_LETTER.get(tok[:1], "") if tok else ""
    if "cijk" in ws:
        tok = next((w for w in ws[2:] if _TENSILE_TYPES.match(w)), "")
        return _TYPE_LETTER.get(tok[:1], "") if tok else ""
    return ""


def precision_from_name(name: str) -> str:
    """Precision hinted by a kernel name's words (cuBLAS/CUTLASS/cuDNN/hipBLASLt/nvjet naming), '' if none.

    ``nvjet_sm90_tst_…`` is bf16 and ``nvjet_sm90_hsh_…`` fp16 (the type letters of A, compute and
    D), ``Cijk_…_BBS_…`` bf16 and ``HHS`` fp16 (Tensile); ``sgemm``/``ffma``/``simt`` is fp32.
    """
    ws = name_words(name)
    lib = _library_type(ws)
    if lib:
        return lib
    text = " " + " ".join(ws) + " "
    if re.search(r"\bffma\b", text):
        return "fp32"
    if re.search(r"e4m3|e5m2|fp8|f8f6f4|\bf8\b|qgmma", text):
        return "fp8"
    if re.search(r"bf16|bfloat16", text):
        return "bf16"
    if "tf32" in text:
        return "tf32"
    if re.search(r"f16|fp16|\bhalf\b|hgemm|hmma|\bh\d+gemm", text):
        return "fp16"
    if re.search(r"dgemm|fp64|f64|dmma|\bd\d+gemm", text):
        return "fp64"
    # "double" alone says fp64; beside "float" it is a scalar argument (a fused AdamW's lr, randn's
    # mean and std, a lambda(double)), not the data the kernel computes on
    if re.search(r"\bdouble\b", text) and not re.search(r"\bfloat\b|\bhalf\b|\bbfloat16\b|\bfloat16\b", text):
        return "fp64"
    if re.search(r"int8|\bi8\b|imma|igmma", text):
        return "int8"
    if re.search(r"\btensorop\b", text) and re.search(r"\bs\d+gemm\b", text):
        # CUTLASS's fp32 GEMM on the tensor cores (cutlass_80_tensorop_s1688gemm_...: fp32 operands,
        # the m16n8k8 TF32 instruction) converts its operands to TF32; its SIMT twin is "simt_sgemm"
        return "tf32"
    if re.search(r"sgemm|\bs\d+gemm|\bf32\b|fp32|scudnn", text):
        return "fp32"
    return ""


def dtype_precision(dtype: str) -> str:
    return DTYPE_PRECISION.get(dtype, "")


def precision_pipe(kind: str, counter: str = "", counter_pipe: str = "", op: str = "", op_pipe: str = "", name: str = "") -> tuple[str, str, str]:
    """(precision, pipe, source) of a kernel's arithmetic, from the strongest signal present:
    the counter that fired (``counter``, e.g. the tensor counter's source type), then the
    launching op's dtypes (``op``), then the name's words. ``("", "", "")`` when nothing says."""
    matrix = "tensor" if kind in MATRIX_KINDS else "vector"
    if counter:
        return counter, counter_pipe or matrix, "counters"
    if op:
        pipe = op_pipe or matrix
        return (op_math_precision(op, name) if pipe == "tensor" else op), pipe, "op"
    hint = precision_from_name(name) if name else ""
    if hint:
        if hint == "fp32" and FMA_WORDS & set(name_words(name)):
            return hint, "vector", "name"  # an FMA-pipe (SIMT) kernel: the FP32 vector peak applies
        return hint, matrix, "name"
    return "", "", ""


def op_math_precision(op: str, name: str, hint: str | None = None) -> str:
    """The precision a kernel computes in, given its op's tensor precision ``op``: the op's, except
    fp32 tensors multiplied on the tensor cores in TF32 (cuDNN's and CUTLASS's
    ``..._f32f32_tf32f32_f32_...``): there the op's dtype is the storage and the name the math.
    ``hint``: :func:`precision_from_name` of ``name`` where the caller already has it."""
    if op == "fp32" and name and (precision_from_name(name) if hint is None else hint) == "tf32":
        return "tf32"
    return op


def op_dtypes_precision(input_types: str, input_dims: str = "") -> str:
    """The precisions of an op's tensor inputs from its ``input_types`` JSON text, distinct and in
    order, joined by ``/`` (``aten::copy_`` of fp32 into bf16: ``bf16/fp32``); '' when none is a
    floating or quantised dtype (index tensors, lists, scalars).

    With ``input_dims`` (the op's shapes, JSON text) only inputs with at least one dimension count:
    a Python scalar (``aten::mul(x, 0.5)``'s ``double``, AdamW's learning rate, randn's sizes) is
    not the precision of the math.
    """
    try:
        types = json.loads(input_types) if input_types else []
        dims = json.loads(input_dims) if input_dims else None
    except ValueError:
        return ""
    out: list[str] = []
    for i, t in enumerate(types if isinstance(types, list) else []):
        if isinstance(dims, list) and (i >= len(dims) or not (isinstance(dims[i], list) and len(dims[i]) > 0)):
            continue
        p = DTYPE_PRECISION.get(str(t), "") if isinstance(t, str) else ""
        if p and p not in out:
            out.append(p)
    return "/".join(out)


def kernel_precisions(trace: Trace, use_ops: bool = True, ops: np.ndarray | None = None) -> np.ndarray:
    """The precision of every kernel's work (object array of str, '' when nothing says): the
    launching op's tensor dtypes (:func:`op_dtypes_precision`, TF32 where the kernel says it
    computes so: :func:`op_math_precision`) when ``use_ops`` and the op is known, else the name
    (:func:`precision_from_name`)."""
    k = trace.kernels
    n = len(k)
    out = np.full(n, "", dtype=object)
    if not n:
        return out
    names = k["name"].astype(str).to_numpy()
    by_name: dict[str, str] = {}  # precision_from_name, once per distinct name

    def of_name(nm: str) -> str:
        if nm not in by_name:
            by_name[nm] = precision_from_name(nm)
        return by_name[nm]

    if use_ops:
        ops = kernel_op_rows(trace) if ops is None else ops
        has = ops >= 0
        if has.any():
            c = trace.cpu_slices
            types = c["input_types"].astype(str).to_numpy(dtype=object)[ops[has]]
            dims = c["input_dims"].astype(str).to_numpy(dtype=object)[ops[has]]
            by_types: dict[tuple[str, str], str] = {}
            out[has] = [by_types[(t, d)] if (t, d) in by_types else by_types.setdefault((t, d), op_dtypes_precision(t, d))
                        for t, d in zip(types, dims)]
            # an fp32 op's kernel may compute in TF32 (the name says): the math's precision, as SOL's
            fp32 = np.flatnonzero(out == "fp32")
            out[fp32] = [op_math_precision("fp32", nm, of_name(nm)) for nm in names[fp32].tolist()]
    for i in np.flatnonzero(out == ""):
        out[i] = of_name(str(names[i]))
    return out


# ---------------------------------------------------------------------------------------------
# the classification of every kernel

CLASSIFY_COLUMNS = ["kind", "kind_source", "helper", "op_row", "op_name", "op_kind", "name_kind"]

#: the kinds (and "" for no kind) by index, and per index whether the kind is a matrix kind, a
#: data helper's (its own name says copy / fill / communication / sort) or an arithmetic helper's
#: under a matrix op (reduction, elementwise, norm): :func:`classify` works on these indices
_KIND_TEXT = np.array(("",) + KINDS, dtype=object)
_KIND_INDEX = {kd: i for i, kd in enumerate(_KIND_TEXT)}
_IS_MATRIX = np.isin(_KIND_TEXT, list(MATRIX_KINDS))
_IS_DATA_HELPER = np.isin(_KIND_TEXT, ["copy", "fill", "communication", "sort"])
_IS_ARITH_HELPER = np.isin(_KIND_TEXT, ["reduction", "elementwise", "norm"])


#: a one-block kernel is a helper of its op when a sibling kernel of the same op launch spreads
#: over at least this many blocks (see :func:`_narrow_beside_wide`)
WIDE_BLOCKS = 64


def kernel_blocks(k: pd.DataFrame) -> np.ndarray:
    """Blocks of every kernel's grid (``grid_x * grid_y * grid_z``); 0 where the trace does not
    record the grid or a dimension is unknown (``<= 0``)."""
    if not {"grid_x", "grid_y", "grid_z"} <= set(k.columns):
        return np.zeros(len(k))
    dims = [pd.to_numeric(k[c], errors="coerce").to_numpy(np.float64) for c in ("grid_x", "grid_y", "grid_z")]
    blocks = np.where(np.isfinite(dims[0]) & (dims[0] > 0), dims[0], 0.0)
    for d in dims[1:]:
        blocks = blocks * np.where(np.isfinite(d) & (d > 0), d, 0.0)
    return blocks


def _narrow_beside_wide(k: pd.DataFrame, ops: np.ndarray) -> np.ndarray:
    """Kernels of one block whose op also launched a kernel of at least :data:`WIDE_BLOCKS` blocks.

    One block runs on one SM: it cannot move the op's tensors at any rate that matters beside a
    sibling spread over the GPU, so it computes something small for it (BatchNorm's inverse standard
    deviation from the running variance, per channel; the last pass of a two-pass reduction).
    Decided on the launch configuration, whatever the op or the kernel's name. Unknown grids
    (``<= 0`` or missing) decide nothing."""
    n = len(k)
    out = np.zeros(n, dtype=bool)
    has = ops >= 0
    if not n or not has.any():
        return out
    blocks = kernel_blocks(k)
    at = np.flatnonzero(has)
    codes, uniq = pd.factorize(ops[at])
    widest = np.zeros(len(uniq))
    np.maximum.at(widest, codes, blocks[at])
    out[at] = (blocks[at] == 1) & (widest[codes] >= WIDE_BLOCKS)
    return out


def classify(trace: Trace, ops: np.ndarray | None = None) -> pd.DataFrame:
    """Kind of every kernel (rows in ``trace.kernels`` order), from the strongest signal present.

    Columns: ``kind``; ``kind_source`` (``counters`` | ``op`` | ``name``); ``helper`` (True for
    a helper kernel of its op: it gets none of the op's FLOPs); ``op_row`` (the launching op's
    ``cpu_slices`` position, -1), ``op_name``, ``op_kind`` and ``name_kind``.
    """
    k = trace.kernels
    n = len(k)
    ops = kernel_op_rows(trace) if ops is None else ops
    op_names, _ = kernel_op_info(trace, ops)
    # every kind as its index in _KIND_TEXT: whole columns compare as small integers, and the text
    # columns are taken from one array of the kinds (a Python step per kernel took seconds at 600k)
    cats = k["name"].astype("category") if n else pd.Series([], dtype="category")
    name_codes = cats.cat.codes.to_numpy()
    by_cat = np.array([_KIND_INDEX[name_kind(str(c))] for c in cats.cat.categories] + [_KIND_INDEX["other"]], dtype=np.int8)
    nk = by_cat[name_codes] if n else np.zeros(0, dtype=np.int8)
    inv, uniq_ops = pd.factorize(op_names) if n else (np.array([], dtype=np.int64), np.array([]))
    ok = np.array([_KIND_INDEX[op_kind(str(o))] for o in uniq_ops] + [0], dtype=np.int8)[inv] if n else np.zeros(0, dtype=np.int8)

    tensor = k["flops_tensor"].to_numpy(np.float64) if n else np.zeros(0)
    fired = np.nan_to_num(tensor, nan=0.0) > 0
    nk_matrix = _IS_MATRIX[nk]
    # ops whose matrix arithmetic is recognisably done by some of their kernels: the others are helpers
    has_main = np.unique(ops[(ops >= 0) & (nk_matrix | fired)])
    with_op = (ok != _KIND_INDEX[""]) & (ok != _KIND_INDEX["other"])
    is_helper = _IS_DATA_HELPER[nk] & (nk != ok)
    # a transform, convert, split-K reduction or epilogue beside the op's main kernel
    beside = _IS_MATRIX[ok] & ~nk_matrix & ~fired
    is_helper |= beside & (np.isin(ops, has_main) | _IS_ARITH_HELPER[nk])
    is_helper &= ~((ok == _KIND_INDEX["attention"]) & (nk == _KIND_INDEX["softmax"]))  # an unfused attention's softmax is the op's arithmetic
    is_helper |= _narrow_beside_wide(k, ops)
    helper = with_op & is_helper
    by_op = with_op & ~is_helper
    kind_i = np.where(by_op, ok, nk)
    # tensor ops fired: matrix arithmetic, whatever the name or op said about it
    kind_i[fired & ~_IS_MATRIX[kind_i]] = _KIND_INDEX["gemm"]
    kind = _KIND_TEXT[kind_i]
    source = np.where(fired, 2, np.where(by_op, 1, 0))
    source = np.array(["name", "op", "counters"], dtype=object)[source]
    helper[fired] = False
    okind, nkind = _KIND_TEXT[ok], _KIND_TEXT[nk]
    return pd.DataFrame(
        {"kind": kind, "kind_source": source, "helper": helper, "op_row": ops, "op_name": op_names,
         "op_kind": okind, "name_kind": nkind},
        columns=CLASSIFY_COLUMNS,
    )


@lru_cache(maxsize=65536)
def is_communication(name: str) -> bool:
    """Whether a kernel's name says it is communication (NCCL/RCCL): :func:`name_kind`'s
    communication rule alone, cheap enough for every kernel name of a big trace."""
    text = drop_args(strip_kd(name.strip()))
    full = _sequences(text)
    return bool(full[0]) and _first_rule(full, ("communication",)) == "communication"
