"""Kernel identity across reports: name normalisation, kernel families, launching ops, matching.

Two reports of one program rarely name a kernel the same way. The profilers demangle differently
(``std::array<char*, 3ul> >`` vs ``std::array<char*,3>>``), compilers append index or hash
suffixes (Triton's ``triton_poi_fused_add_2``), GEMM libraries encode their tile choice in the
name (``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT``, ``Cijk_..._MT16x16x128_...``), and
another vendor runs a different library for the same work (cuBLAS on an H100, hipBLASLt on an
MI300X). This module gives every kernel a ladder of keys, from exact to loose, and matches the
kernel groups of two reports level by level, so each kernel is matched at the most specific key
the other report shares.

Keys of a kernel
----------------
``norm``
    :func:`normalise_kernel_name`: no return type, no argument list, no namespace qualifiers (the .ncu-rep
    and the CSV export of one Nsight Compute report disagree on them), canonical spacing and integer
    literals, AMD ``.kd`` suffixes and compiler index/hash suffixes removed; template arguments
    kept (``vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>, ...>`` and ``<4, ...>``
    stay apart).
``variant``
    :func:`variant_name`: ``norm`` without template arguments and without GEMM tile sizes, so
    ``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT`` and ``nvjet_sm90_tst_128x256_...`` are one
    variant. ``cutlass::Kernel2<cutlass_80_tensorop_..._gemm_...>`` keeps its inner kernel name,
    because the wrapper alone says nothing.
``kind``
    :func:`kviewer.analysis.kinds.kernel_kind` (the one taxonomy).
``op``
    For PyTorch traces, the framework op that launched the kernel (``kernels.external_id`` ->
    the ``cpu_slices`` row of category ``op`` with that id, e.g. ``aten::addmm``).
``launch``
    grid and block sizes.

Matching ladder
---------------
When both reports link kernels to ops (PyTorch traces), groups are matched on
``(norm, op, launch)``, then ``(norm, op)``, ``(variant, op)``, ``(kind, op)`` and finally ``op``
alone. A cuBLAS GEMM and a hipBLASLt GEMM under the same ``aten::addmm`` therefore meet at the
``kind, op`` level. When one report has no ops (an Nsight Systems export against a PyTorch
trace of the same program), the ladder is ``(norm, launch)``, ``norm``, ``variant``, and ``kind``
for library kernels only (gemm, attention, conv, communication), whose names are vendor and
tile specific.

At each level, every still-unmatched group of A and of B that shares a key joins one matched row,
so the rows partition the kernels of both reports: the per-row deltas add up exactly to the
difference of the two kernel-time totals.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kviewer.analysis import kinds as _kinds
from kviewer.core import Trace
from kviewer.core.names import drop_args, drop_templates, split_top_level, strip_kd

# ---------------------------------------------------------------------------------------------
# name normalisation

#: spaces around C++ punctuation differ between demanglers (cupti, nsys, rocprof, c++filt)
_PUNCT_SPACES = re.compile(r"\s*([<>,()*&\[\]])\s*")
#: ``3ul`` (cupti) and ``3`` (others) are the same template argument
_INT_LITERAL = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
#: Nsight Systems writes non-type template arguments with a cast: ``(unsigned int)2``, ``(bool)0``
_CAST_BOOL = re.compile(r"\(bool\)\s*([01])\b")
_BOOL_WORD = re.compile(r"(?<=[<,\s])(?:true|false)(?=\s*[,>])")
_CAST_INT = re.compile(r"\((?:(?:un)?signed\s+)?(?:char|short|int|long|long\s+long|unsigned|size_t|std::size_t)\)\s*(-?\d+)")
#: lambdas: ``{lambda(c10::BFloat16)#1}`` (cupti, c++filt) and ``[lambda(T1) (instance 1)]`` (nsys)
_LAMBDA_GNU = re.compile(r"\{lambda\([^{}]*?\)#(\d+)\}")
_LAMBDA_NSYS = re.compile(r"\[lambda\([^\[\]]*?\)\s*\(instance\s+(\d+)\)\]")
#: Triton/Inductor kernels end in an index that depends on the order of code generation
_TRITON = re.compile(r"^(triton_[a-z]+_\w*?)_\d+$")
#: old Triton signature specialisation suffix, e.g. ``_fwd_kernel_0d1d2d3de4c``
_TRITON_SIGNATURE = re.compile(r"_(?:\d+(?:d|de|c))+$")
#: long hexadecimal hashes appended by code generators (>= 16 hex digits after an underscore)
_HEX_HASH = re.compile(r"_[0-9a-f]{16,}$")
#: generic templates that wrap the kernel that actually identifies the work
_WRAPPERS = ("cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel", "Kernel", "Kernel2", "device_kernel")  # (qualified, unqualified)
#: GEMM tile / workgroup geometry tokens (``256x128``, ``64x4``, ``MT16x16x128``, ``tilesize64x64x64``)
_TILE_TOKEN = re.compile(r"^(?:[A-Za-z]*)\d+(?:x\d+)+[A-Za-z]*$")


def _strip_suffixes(ident: str) -> str:
    """Remove compiler index and hash suffixes from an identifier."""
    m = _TRITON.match(ident)
    if m:
        return m.group(1)
    ident = _HEX_HASH.sub("", ident)
    ident = _TRITON_SIGNATURE.sub("", ident)
    return ident


def _drop_scope_params(s: str) -> str:
    """Drop parameter lists of enclosing functions: ``f<T>(at::Tensor&,T2)::{lambda#1}`` ->
    ``f<T>::{lambda#1}``. Demanglers disagree on them (nsys writes ``T1`` placeholders), and the
    lambda number already tells lambdas of one function apart."""
    out = s
    i = out.find(")::")
    while i >= 0:
        depth = 0
        j = i
        while j >= 0:
            if out[j] == ")":
                depth += 1
            elif out[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        if j > 0 and (out[j - 1].isalnum() or out[j - 1] in "_>"):
            out = out[:j] + out[i + 1 :]
            i = out.find(")::", j)
        else:
            i = out.find(")::", i + 1)
    return out


def identifier(name: str) -> str:
    """The name without return type and arguments, with demangler differences evened out: CUPTI
    (``8``, ``3ul``, ``false``, ``{lambda()#2}``, ``(anonymous namespace)``), Nsight Systems and
    Nsight Compute (``(int)8``, ``(unsigned long)3``, ``(bool)0``, ``[lambda() (instance 2)]``,
    ``<unnamed>``) give one string; template arguments stay, so two instantiations of a template
    differ (:func:`kviewer.analysis.merge.kernel_keys` with ``exact``)."""
    s = strip_kd(" ".join(name.split()))
    s = s.replace("<unnamed>", "(anonymous namespace)")
    s = drop_args(s)
    # booleans as digits: cupti writes ``false``, the .ncu-rep ``(bool)0``, its CSV export ``0``
    s = _CAST_BOOL.sub(r"\1", s)
    s = _BOOL_WORD.sub(lambda m: "1" if m.group(0) == "true" else "0", s)
    s = _CAST_INT.sub(r"\1", s)
    s = _LAMBDA_GNU.sub(r"{lambda#\1}", s)
    s = _LAMBDA_NSYS.sub(r"{lambda#\1}", s)
    s = _INT_LITERAL.sub(r"\1", s)
    s = _PUNCT_SPACES.sub(r"\1", s).replace("(anonymousnamespace)", "(anonymous namespace)")
    # return types of functions named inside template arguments
    s = re.sub(r"(?<=[<,])void ", "", s)
    s = _drop_scope_params(s)
    tokens = split_top_level(s)
    # a leading return type ("void", "__global__ void", "std::enable_if<...>::type")
    if len(tokens) > 1:
        s = tokens[-1]
    return s


#: a namespace or class qualifier (``at::``, ``native::``, ``(anonymous namespace)::``)
_QUALIFIER = re.compile(r"(?:(?<![\w>)])[A-Za-z_]\w*|\(anonymous namespace\))::")


def _unqualified(s: str) -> str:
    """Drop namespace qualifiers everywhere, template arguments included: demanglers of one
    toolchain disagree on them (Nsight Compute's report writes ``at::native::vectorized_elementwise_kernel<(int)4, at::native::…>``,
    its CSV export ``at::vectorized_elementwise_kernel<4, at::…>``). A qualifier after ``>``
    or ``)`` (a member of a template or of a function, ``f<T>::{lambda#1}``) stays."""
    return _QUALIFIER.sub("", s)


def normalise_kernel_name(name: str, strip_templates: bool = False) -> str:
    """The matching name of a kernel.

    Parameters
    ----------
    name
        The kernel name as a profiler reports it (demangled or not).
    strip_templates
        Also drop template arguments (``foo<8, Bar>`` -> ``foo``).

    Examples
    --------
    >>> normalise_kernel_name("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
    'vectorized_elementwise_kernel<8,CUDAFunctor_add<BFloat16>,array<char*,3>>'
    >>> normalise_kernel_name("triton_poi_fused__unsafe_view_add_gelu_mul_2")
    'triton_poi_fused__unsafe_view_add_gelu_mul'
    >>> normalise_kernel_name("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1 (.kd)")
    'Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1'
    """
    s = _unqualified(identifier(name))
    if strip_templates:
        s = drop_templates(s)
    # the suffix belongs to the last identifier, outside any template argument list
    if not s.endswith(">"):
        head, sep, last = s.rpartition("::")
        s = head + sep + _strip_suffixes(last)
    return s or name


def _untile(ident: str) -> str:
    if ident.startswith("Cijk_"):
        # Tensile / hipBLASLt solution names: everything from the macro tile on is tuning detail
        cut = re.search(r"_MT\d", ident)
        return ident[: cut.start()] if cut else ident
    parts = [p for p in ident.split("_") if not _TILE_TOKEN.match(p)]
    return "_".join(parts)


def variant_name(name: str) -> str:
    """The name with template arguments and GEMM tile geometry removed (a kernel "family").

    ``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT`` -> ``nvjet_sm90_tst_h_bz_coopA_TNT``;
    ``void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(...)``
    -> ``cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_tn_align8``.
    """
    ident = normalise_kernel_name(name)
    bare = drop_templates(ident)
    if bare in _WRAPPERS and "<" in ident:
        inner = ident[ident.index("<") + 1 : -1]
        first = split_top_level(inner, ",")[0] if inner else ""
        if first:
            bare = drop_templates(first)
    head, sep, last = bare.rpartition("::")
    return head + sep + _untile(_strip_suffixes(last))


# the kernel taxonomy lives in one place: :mod:`kviewer.analysis.kinds`
KINDS = _kinds.KINDS
LIBRARY_KINDS = _kinds.LIBRARY_KINDS
kernel_kind = _kinds.kernel_kind


def normalise_op(op: str) -> str:
    """An op name for grouping: Triton op ranges lose their index suffix like the kernels."""
    m = _TRITON.match(op)
    return m.group(1) if m else op


# ---------------------------------------------------------------------------------------------
# fused kernels (the "replaced by" relation)

_FUSED = re.compile(r"(?:^|_)fused_(\w+)$")
#: op words that name views and casts, not work
_FUSED_STOP = frozenset({"", "unsafe", "view", "native", "to", "copy", "clone", "default", "t", "expand", "permute",
                         "transpose", "reshape", "convert", "element", "type", "squeeze", "unsqueeze", "slice", "select"})
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def fused_ops(name: str) -> str | None:
    """The op part of a fused kernel name, wrapped in underscores; None if not a fused kernel.

    ``triton_poi_fused__unsafe_view_add_gelu_mul_2`` -> ``"__unsafe_view_add_gelu_mul_"``.
    Inductor names a fused kernel after the aten ops it fuses, joined by ``_``; op names contain
    underscores themselves, so the caller tests ``f"_{op}_" in fused`` rather than splitting.
    """
    m = _FUSED.search(normalise_kernel_name(name))
    if not m:
        return None
    return "_" + m.group(1) + "_"


def _op_word(op: str) -> str:
    """``aten::add_`` -> ``add``; ``aten::native_layer_norm`` -> ``native_layer_norm``."""
    word = op.rsplit("::", 1)[-1].strip()
    return word.rstrip("_") or word


def _name_words(name: str) -> set[str]:
    return {w.lower() for w in _CAMEL.findall(normalise_kernel_name(name))}


def fused_into(op: str, names: Iterable[str], fused: str) -> bool:
    """Whether work done by ``op`` (or, without an op, by kernels called ``names``) appears in
    the fused kernel whose op part is ``fused`` (from :func:`fused_ops`)."""
    if op:
        word = _op_word(op)
        # an op "layer_norm" shows up in fused names as "native_layer_norm"
        return bool(word) and (f"_{word}_" in fused or f"_native_{word}_" in fused)
    words = {w for w in fused.split("_") if w not in _FUSED_STOP and not w.isdigit()}
    have: set[str] = set()
    for n in names:
        have |= _name_words(n)
    return bool(words & have)


# ---------------------------------------------------------------------------------------------
# per-kernel keys


def factorize(values: pd.Series | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and the distinct values (as str, object array), without sorting strings.

    A categorical column gives its own codes; anything else goes through ``pd.factorize``
    (hashing). Missing values become ``""``.
    """
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy(dtype=np.int64)
        uniq = np.append(values.cat.categories.astype(str).to_numpy(dtype=object), "")
        return np.where(codes < 0, len(uniq) - 1, codes), uniq
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return codes.astype(np.int64), np.array(["" if u is None else str(u) for u in uniq], dtype=object)


def kernel_op_names(trace: Trace) -> np.ndarray:
    """The framework op that launched each kernel (object array of str, ``""`` when unknown).

    PyTorch traces carry an External id on every kernel and on the op that launched it; the op is
    the ``cpu_slices`` row of category ``op`` with that id (the innermost op, since Kineto gives
    the launch the id of the op it ran in). When several op rows share an id, the deepest wins.
    """
    return _kinds.kernel_op_info(trace)[0]


#: launching op name and its input shapes per kernel (:func:`kviewer.analysis.kinds.kernel_op_info`)
kernel_op_info = _kinds.kernel_op_info


@dataclass(frozen=True)
class MatchOptions:
    """How kernels are grouped and matched.

    Attributes
    ----------
    strip_templates
        Drop template arguments from the exact name key too (coarser groups).
    use_launch
        Split groups by grid and block size and match on them first.
    use_ops
        Use the launching op: True, False, or None (automatic: when both reports link at least
        half of their kernels to an op).
    """

    strip_templates: bool = False
    use_launch: bool = True
    use_ops: bool | None = None


def op_coverage(ops: np.ndarray) -> float:
    """Fraction of kernels with a known launching op."""
    return float((ops != "").mean()) if len(ops) else 0.0


GROUP_COLUMNS = ["norm", "op", "launch", "variant", "kind", "name", "count", "total_ns", "ss", "nsub", "precision", "shapes"]


def kernel_groups(
    trace: Trace,
    ops: np.ndarray | None = None,
    options: MatchOptions | None = None,
    shapes: np.ndarray | None = None,
    precision: np.ndarray | None = None,
    shape_key: np.ndarray | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Kernels grouped by their exact key ``(norm, op, launch, precision, shapes)``.

    Parameters
    ----------
    trace
        The report.
    ops
        Launching op per kernel (from :func:`kernel_op_names`); pass an array of ``""`` to group
        without ops. Computed when None.
    options
        Name normalisation and launch-size options.
    shapes
        Optional per-kernel sub-key (the launching op's input shapes). It does not split groups;
        it splits the spread: one kernel run on four GEMM shapes has four typical durations, and
        the run-to-run noise is the spread *within* each shape.
    precision
        Optional per-kernel precision (:func:`kviewer.analysis.kinds.kernel_precisions`): it
        splits groups (a bf16 copy and an fp32 copy are two groups) and is kept as the group's
        ``precision`` column.
    shape_key
        Optional per-kernel shapes that split groups (the launching op's input shapes), kept as
        the group's ``shapes`` column.

    Returns
    -------
    groups
        One row per group: the keys, a representative original ``name`` (the name with the most
        time in the group), ``count``, ``total_ns`` (int64), ``ss`` (sum of squared deviations
        of the durations from the mean of their shape sub-group, float) and ``nsub`` (number of
        sub-groups; ``ss / (count - nsub)`` is the pooled variance). Groups are numbered in order
        of first appearance.
    group_of
        For each kernel (by row position), the index of its group.
    """
    opts = options or MatchOptions()
    k = trace.kernels
    n = len(k)
    if trace.stats_only and len(trace.kernel_stats):
        return _stats_file_groups(trace, opts), np.zeros(0, dtype=np.int64)
    if n == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in GROUP_COLUMNS}).astype(
            {"count": np.int64, "total_ns": np.int64, "ss": np.float64, "nsub": np.int64}
        ), np.zeros(0, dtype=np.int64)
    if ops is None:
        ops = kernel_op_names(trace)
    # normalise each distinct name once (names repeat a lot); group on integer codes
    inv, uniq = factorize(k["name"])
    norm_u = np.array([normalise_kernel_name(s, opts.strip_templates) for s in uniq], dtype=object)
    variant_u = np.array([variant_name(s) for s in uniq], dtype=object)
    kind_u = np.array([kernel_kind(s) for s in uniq], dtype=object)
    norm_code_u, norm_vals = pd.factorize(norm_u)
    oinv, uops = factorize(np.asarray(ops, dtype=object))
    op_vals = np.array([normalise_op(o) for o in uops], dtype=object)
    op_code_u, op_vals = pd.factorize(op_vals)
    if opts.use_launch:
        dims = k[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].to_numpy(dtype=np.int64)
        udims, dinv = np.unique(dims, axis=0, return_inverse=True)
        launch_vals = np.array([_launch_text(tuple(int(v) for v in r)) for r in udims], dtype=object)
        launch_code = dinv.ravel().astype(np.int64)
    else:
        launch_vals = np.array([""], dtype=object)
        launch_code = np.zeros(n, dtype=np.int64)
    norm_code = norm_code_u[inv]
    op_code = op_code_u[oinv]
    prec_code, prec_vals = factorize(np.asarray(precision, dtype=object)) if precision is not None else (np.zeros(n, dtype=np.int64), np.array([""], dtype=object))
    shape_code, shape_vals = factorize(np.asarray(shape_key, dtype=object)) if shape_key is not None else (np.zeros(n, dtype=np.int64), np.array([""], dtype=object))
    key = (
        pd.DataFrame({"n": norm_code, "o": op_code, "l": launch_code, "p": prec_code, "s": shape_code})
        .groupby(["n", "o", "l", "p", "s"], sort=False).ngroup().to_numpy(dtype=np.int64)
    )
    norm = np.asarray(norm_vals, dtype=object)[norm_code]
    op_n = np.asarray(op_vals, dtype=object)[op_code]
    launch = launch_vals[launch_code]
    ng = int(key.max()) + 1
    dur = k["dur"].to_numpy(dtype=np.int64)
    count = np.bincount(key, minlength=ng).astype(np.int64)
    total = np.zeros(ng, dtype=np.int64)
    np.add.at(total, key, dur)  # int64 all the way: the totals must add up exactly
    # spread within (group, shape) sub-groups, from deviations (no sum-of-squares cancellation)
    sub_codes = np.zeros(n, dtype=np.int64) if shapes is None else factorize(np.asarray(shapes, dtype=object))[0]
    sub = pd.DataFrame({"g": key, "s": sub_codes}).groupby(["g", "s"], sort=False).ngroup().to_numpy(dtype=np.int64)
    nsub_total = int(sub.max()) + 1
    fdur = dur.astype(np.float64)
    sub_mean = np.bincount(sub, weights=fdur, minlength=nsub_total) / np.bincount(sub, minlength=nsub_total)
    ss = np.bincount(key, weights=(fdur - sub_mean[sub]) ** 2, minlength=ng)
    sub_group = np.zeros(nsub_total, dtype=np.int64)
    sub_group[sub] = key
    nsub = np.bincount(sub_group, minlength=ng).astype(np.int64)
    per_name = pd.DataFrame({"g": key, "u": inv, "d": dur}).groupby(["g", "u"], sort=False)["d"].sum().reset_index()
    per_name = per_name.sort_values(["g", "d"], ascending=[True, False], kind="stable").drop_duplicates("g")
    rep = np.empty(ng, dtype=object)
    rep[per_name["g"].to_numpy()] = uniq[per_name["u"].to_numpy()]
    first = np.unique(key, return_index=True)[1]
    groups = pd.DataFrame(
        {
            "norm": norm[first],
            "op": op_n[first],
            "launch": launch[first],
            "variant": variant_u[inv[first]],
            "kind": kind_u[inv[first]],
            "name": rep,
            "count": count,
            "total_ns": total,
            "ss": ss,
            "nsub": nsub,
            "precision": prec_vals[prec_code[first]],
            "shapes": shape_vals[shape_code[first]],
        },
        columns=GROUP_COLUMNS,
    )
    return groups, key


def _stats_file_groups(trace: Trace, opts: MatchOptions) -> pd.DataFrame:
    """The groups of a summary-only trace (rocprof --stats): one per name of its ``kernel_stats``,
    no op and no launch shape (the file has neither), the spread from the file's standard
    deviation (unknown, NaN, when the file gives none)."""
    ks = trace.kernel_stats
    names = ks["name"].astype(str).to_numpy(dtype=object)
    count = ks["count"].to_numpy(dtype=np.int64)
    std = ks["std_ns"].to_numpy(dtype=np.float64)
    return pd.DataFrame(
        {
            "norm": np.array([normalise_kernel_name(s, opts.strip_templates) for s in names], dtype=object),
            "op": np.full(len(ks), "", dtype=object),
            "launch": np.full(len(ks), "", dtype=object),
            "variant": np.array([variant_name(s) for s in names], dtype=object),
            "kind": np.array([kernel_kind(s) for s in names], dtype=object),
            "name": names,
            "count": count,
            "total_ns": ks["total_ns"].to_numpy(dtype=np.int64),
            "ss": std**2 * np.maximum(count - 1, 0),
            "nsub": np.ones(len(ks), dtype=np.int64),
            # the file has no ops: the precision from the name, the rule op-less kernels of a trace follow
            "precision": np.array([_kinds.precision_from_name(s) for s in names], dtype=object),
            "shapes": np.full(len(ks), "", dtype=object),
        },
        columns=GROUP_COLUMNS,
    )


def _launch_text(r: tuple[int, ...]) -> str:
    if all(v < 0 for v in r):
        return ""
    return "grid({},{},{}) block({},{},{})".format(*r)


# ---------------------------------------------------------------------------------------------
# the ladder


@dataclass(frozen=True)
class Level:
    """One rung of the matching ladder: a name and the group columns that must be equal."""

    name: str
    keys: tuple[str, ...]
    where: Callable[[pd.DataFrame], np.ndarray] | None = None
    """which groups may match at this level (None: all)"""


def _has_op(g: pd.DataFrame) -> np.ndarray:
    return (g["op"] != "").to_numpy()


def _library(g: pd.DataFrame) -> np.ndarray:
    return g["kind"].isin(LIBRARY_KINDS).to_numpy()


def _not_other(g: pd.DataFrame) -> np.ndarray:
    return (g["kind"] != "other").to_numpy() & _has_op(g)


def ladder(use_ops: bool, use_launch: bool = True) -> list[Level]:
    """The matching levels, most specific first (see the module docstring).

    Every level also requires the same ``precision``: a bf16 kernel never pairs with an fp32 one.
    With ops, each level is tried first with the op's input shapes equal too (like with like),
    then without them.
    """
    if use_ops:
        base = [
            Level("name+op+launch", ("norm", "op", "launch")),
            Level("name+op", ("norm", "op")),
            Level("variant+op", ("variant", "op")),
            Level("kind+op", ("kind", "op"), _not_other),
            Level("op", ("op",), _has_op),
        ]
        levels = [Level(lv.name + "+shapes", lv.keys + ("shapes",), lv.where) for lv in base] + base
    else:
        levels = [
            Level("name+launch", ("norm", "launch")),
            Level("name", ("norm",)),
            Level("variant", ("variant",)),
            Level("kind", ("kind",), _library),
        ]
    if not use_launch:
        levels = [lv for lv in levels if "launch" not in lv.keys]
    return [Level(lv.name, lv.keys + ("precision",), lv.where) for lv in levels]


def link_groups(m: Matching, links: Sequence[tuple[int, int]], name: str) -> Matching:
    """A matching where the one-sided rows of A's group ``a`` and B's group ``b`` join one row
    (matched by ``name``) for each ``(a, b)`` in ``links``; linked groups that share a group join
    the same row. Rows that lose all their groups disappear; the others keep their order."""
    if not links:
        return m
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent.setdefault(parent[x], parent[x])
            x = parent[x]
        return x

    for a, b in links:
        parent[find(("a", int(a)))] = find(("b", int(b)))
    side = m.rows["side"].to_numpy(dtype=object)
    matched_by = m.rows["matched_by"].to_numpy(dtype=object)
    row_a = m.row_a.copy()
    row_b = m.row_b.copy()
    # the new rows first get ids past the old ones, then everything is renumbered densely
    root_row: dict[tuple[str, int], int] = {}
    nxt = len(side)
    new_names: list[str] = []
    for key in list(parent):
        root = find(key)
        if root not in root_row:
            root_row[root] = nxt
            nxt += 1
            new_names.append(name)
        if key[0] == "a":
            row_a[key[1]] = root_row[root]
        else:
            row_b[key[1]] = root_row[root]
    all_side = list(side) + ["both"] * len(new_names)
    all_by = list(matched_by) + new_names
    used = np.zeros(nxt, dtype=bool)
    used[row_a] = True
    used[row_b] = True
    renum = np.cumsum(used) - 1
    keep = np.flatnonzero(used)
    rows = pd.DataFrame({"matched_by": [all_by[i] for i in keep], "side": [all_side[i] for i in keep]})
    return Matching(rows, renum[row_a].astype(np.int64), renum[row_b].astype(np.int64))


@dataclass
class Matching:
    """Matched rows between the groups of A and of B.

    ``row_a[i]`` is the row of A's group ``i`` (likewise ``row_b``); ``rows`` describes each row:
    ``matched_by`` (the ladder level, or "" for a group found in one report only) and ``side``
    ("both", "a" or "b").
    """

    rows: pd.DataFrame
    row_a: np.ndarray
    row_b: np.ndarray


def match_groups(ga: pd.DataFrame, gb: pd.DataFrame, levels: Sequence[Level]) -> Matching:
    """Match groups level by level; unmatched groups become rows of their own."""
    row_a = np.full(len(ga), -1, dtype=np.int64)
    row_b = np.full(len(gb), -1, dtype=np.int64)
    matched_by: list[str] = []
    side: list[str] = []
    for level in levels:
        free_a = row_a < 0
        free_b = row_b < 0
        if level.where is not None:
            free_a &= level.where(ga)
            free_b &= level.where(gb)
        if not free_a.any() or not free_b.any():
            continue
        ka = _keys(ga, level.keys)
        kb = _keys(gb, level.keys)
        common = set(ka[free_a]) & set(kb[free_b])
        if not common:
            continue
        # rows in order of first appearance in A, for stable output
        new_rows: dict[object, int] = {}
        for i in np.flatnonzero(free_a):
            if ka[i] in common:
                r = new_rows.setdefault(ka[i], len(matched_by) + len(new_rows))
                row_a[i] = r
        for j in np.flatnonzero(free_b):
            if kb[j] in common:
                row_b[j] = new_rows[kb[j]]
        matched_by += [level.name] * len(new_rows)
        side += ["both"] * len(new_rows)
    for i in np.flatnonzero(row_a < 0):
        row_a[i] = len(matched_by)
        matched_by.append("")
        side.append("a")
    for j in np.flatnonzero(row_b < 0):
        row_b[j] = len(matched_by)
        matched_by.append("")
        side.append("b")
    rows = pd.DataFrame({"matched_by": matched_by, "side": side})
    return Matching(rows, row_a, row_b)


def _keys(g: pd.DataFrame, cols: tuple[str, ...]) -> np.ndarray:
    """One hashable key per group: the key columns joined by a separator no name contains."""
    def text(c: str) -> np.ndarray:  # a column a source could not fill (a summary file's precision) is ""
        return g[c].astype(object).where(g[c].notna(), "").astype(str).to_numpy(dtype=object)

    out = text(cols[0])
    for c in cols[1:]:
        out = out + "\x1f" + text(c)
    return out
