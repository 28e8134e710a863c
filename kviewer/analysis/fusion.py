"""Fusion candidates: kernel chains that one kernel could do, and what that would save.

Chains are found on each (device, stream), walking kernels in start order:

* a **GEMM, convolution or attention kernel followed by its elementwise epilogue** (``o_proj`` then
  the residual add; the up-projection then GELU); a batched GEMM followed by a softmax and the
  next batched GEMM is an unfused attention;
* a **memory-bound chain**: consecutive memory-bound elementwise, normalisation, softmax,
  reduction or copy kernels.

A kernel joins a chain only when

* it is close in time to the previous one and in the same step: the GPU idled between them no longer
  than ``max_gap_ns`` or than the chain's work so far (an eager host launching late inside a chain
  is no new phase of the program);
* there is a **data dependency**: its launching op reads a tensor with as many elements as the
  previous kernel's op wrote (op order and shape, from the ops' recorded shapes);
* it is not communication, synchronisation, a copy between devices, a sort or a kernel that
  reads nothing (a fill), and it is its op's only kernel doing arithmetic (its helpers, such as
  BatchNorm's one-block invstd, stay beside). An op of several memory kernels, one of which
  reduces (GroupNorm, BatchNorm in training, their backward, LayerNorm's backward), splits its own
  work: the kernel writing its output (:func:`_writers`) may *start* a chain, with the op's whole
  traffic; it joins none, since the op's statistics kernels read its input too.

A kernel of the last member's own op that does not join (the layout transform of a convolution's
output, a LayerNorm backward's parameter gradients) runs beside the chain without ending it; the
time between members excludes it. So does, inside an unfused attention, a kernel that reads no
member's output (the causal mask built, V made contiguous for the second GEMM): it is an input
of the fused kernel, not a step of the chain.

What fusing saves
-----------------
The fused kernel reads the chain's external inputs once and writes its final output once::

    fused bytes = sum(bytes read by the members) - sum(intermediates read back) + final output

never negative and never less than the largest external tensor (intermediates are assumed to
have no other consumer). Its FLOPs are the members' sum. A memory chain streams that traffic at
the efficiency of its best-streaming member (one streaming kernel moves it as well as the best
member moves its own); an anchored chain keeps the anchor's time, scaled up by how much the fused
T_SOL exceeds the anchor's. Then the floor, from what the members keep at the rates they show
today (:func:`_member_floor`)::

    fused time = max(fused T_SOL / best member's T_SOL / time, floor, fused T_SOL, shortest member's time)
    floor      = max over members of (member's time x the share of its traffic fusion cannot remove)
                 (an anchored chain: the anchor's time + its epilogue members' external reads; the
                 final output is the anchor's own write, redirected, unless the anchor also keeps the
                 pre-activation a training backward reads)

so a BatchNorm + ReLU saves at most the ReLU kernel and the BatchNorm's intermediate write at the
BatchNorm's own rate. A member above the DRAM roofline because L2 served its traffic has no
T_SOL: its chain takes the floor. ``savings_ns = measured - fused time`` (never negative). Any
other unknown size or speed of light in the chain makes the fused time and the saving unknown
(NaN): never zero, never invented.

Each candidate names its remedy (``remedy``: a cuBLASLt/hipBLASLt epilogue, ``torch.compile``,
a fused or foreach optimizer, FlashAttention/SDPA, a hand-written Triton kernel) and a
``confidence`` (high: sizes and kinds from the ops; medium: kinds from names; low: no estimate).
Identical chains (same kernels, ops and shapes) are aggregated across steps and layers:
``count`` instances, total saving, share of all GPU kernel time, ranked by total saving.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from kviewer.analysis.devices import DeviceSpec
from kviewer.analysis.kinds import kernel_blocks, kernel_op_info
from kviewer.analysis.model import _parse, _tensors, model_kernels, overwrites_self
from kviewer.analysis.sol import SOL_EXCEEDS, SOL_OK, SolResult, speed_of_light
from kviewer.analysis.steps import marked_steps
from kviewer.core import Trace
from kviewer.core.schema import FUSION_COLUMNS

ANCHORS = ("gemm", "attention", "conv")
MEMORY_KINDS = ("elementwise", "norm", "softmax", "reduction", "copy")


@dataclass(frozen=True)
class FusionOptions:
    max_gap_ns: int = 100_000
    """kernels further apart than this (idle GPU in between) do not chain"""
    min_length: int = 2
    max_length: int = 16
    """a longer run is split: one kernel that long is a rewrite, not a fusion"""


def _is_memory_bound(kind: str, bound: str) -> bool:
    if kind not in MEMORY_KINDS:
        return False
    # kernels whose bound is unknown (no FLOPs) count when their kind is plain data movement
    return bound == "memory" or (bound == "unknown" and kind in ("elementwise", "copy"))


@dataclass
class _Links:
    """Per-kernel facts for chaining, from the launching ops (row positions of the sol frame)."""

    op: np.ndarray            # cpu_slices row of the launching op, -1
    op_name: np.ndarray       # its name
    op_kernels: np.ndarray    # kernels that op launched doing its arithmetic (its helpers not counted)
    helper: np.ndarray        # a helper kernel of its op
    writer: np.ndarray        # the kernel writing the output of an op of several memory kernels (see _writers)
    out_numel: np.ndarray     # elements of the op's output, NaN
    inputs: list[list[tuple[float, float]]]  # the op's input tensors: (numel, bytes)
    read: np.ndarray          # modelled bytes read, NaN
    written: np.ndarray       # modelled bytes written, NaN
    kind_source: np.ndarray


def _links(trace: Trace, model: pd.DataFrame | None = None) -> _Links:
    m = model if model is not None else model_kernels(trace)
    op = m["op_id"].to_numpy(np.int64)
    c = trace.cpu_slices
    # the launching ops' input tensors, parsed once per distinct (shapes, dtypes) text: a training
    # step's ~15k ops repeat a few dozen signatures (the whole 375k-row columns are not made text)
    ops = np.unique(op[op >= 0])
    dims = c["input_dims"].iloc[ops].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
    types = c["input_types"].iloc[ops].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
    names = c["name"].iloc[ops].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
    parsed: dict[tuple[str, str, bool], list[tuple[float, float]]] = {}
    of_op: dict[int, list[tuple[float, float]]] = {}
    for o, d, ty, nm in zip(ops.tolist(), dims, types, names):
        # copy_(dst, src) reads src alone: dst is its output (a cast's fp32 buffer is no intermediate read)
        key = (str(d), str(ty), overwrites_self(str(nm)))
        got = parsed.get(key)
        if got is None:
            args = _tensors(_parse(key[0]), _parse(key[1]))
            ts = [t for t in (args[1:] if key[2] else args) if t is not None]
            got = parsed[key] = [(float(t.numel), float(t.nbytes)) for t in ts]
        of_op[o] = got
    none: list[tuple[float, float]] = []
    inputs = [of_op[o] if o >= 0 else none for o in op.tolist()]
    total = m["model_bytes"].to_numpy(np.float64)
    written = m["model_bytes_written"].to_numpy(np.float64, copy=True)
    read = total - written
    helper = m["helper"].to_numpy(bool)
    writer = _writers(op, helper, m["kind"].to_numpy(dtype=object), kernel_blocks(trace.kernels),
                      trace.kernels["start"].to_numpy(np.int64))
    if writer.any():
        # the writer reads the op's inputs and writes its output: the op's whole traffic (the model
        # shares it among the op's kernels by time), while the kernels before it read the input again
        main = (op >= 0) & ~helper
        codes, uniq = pd.factorize(op[main])
        at = np.flatnonzero(main)
        for col in (read, written):
            sums = np.bincount(codes, weights=col[main], minlength=len(uniq))  # NaN stays NaN
            col[at[writer[main]]] = sums[codes[writer[main]]]
    return _Links(
        op=op, op_name=m["op_name"].to_numpy(dtype=object), op_kernels=_main_kernels(op, helper),
        helper=helper, writer=writer, out_numel=m["out_numel"].to_numpy(np.float64), inputs=inputs,
        read=read, written=written, kind_source=m["kind_source"].to_numpy(dtype=object),
    )


#: kinds that reduce (an op of several kernels with one of these computes statistics, then applies them)
_REDUCING = ("norm", "reduction", "softmax")


def _writers(op: np.ndarray, helper: np.ndarray, kinds: np.ndarray, blocks: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The kernel that writes the output of each op of several memory kernels, one of which reduces
    (GroupNorm: row moments, fused parameters, then the normalisation; BatchNorm in training:
    statistics, then the transform; their backward: the reductions, then the input gradient).

    The writer is the op's widest kernel by blocks (the statistics and the parameter gradients are
    per group or channel, the output per element: LayerNorm's backward writes the input gradient
    first, then the narrow parameter gradients), and of several as wide, the last launched (the
    statistics are computed before they are applied). An op of one kernel, a matrix op or an
    unknown grid decides nothing (no writer)."""
    n = len(op)
    out = np.zeros(n, dtype=bool)
    at = np.flatnonzero((op >= 0) & ~helper)
    if not len(at):
        return out
    codes, uniq = pd.factorize(op[at])
    m = len(uniq)
    count = np.bincount(codes, minlength=m)
    kd = kinds[at]
    memory = np.bincount(codes, weights=pd.Index(kd).isin(MEMORY_KINDS), minlength=m) == count
    reduces = np.bincount(codes, weights=pd.Index(kd).isin(_REDUCING), minlength=m) > 0
    b = blocks[at]
    known = np.bincount(codes, weights=b > 0, minlength=m) == count
    widest = np.zeros(m)
    np.maximum.at(widest, codes, b)
    top = b == widest[codes]
    last = np.full(m, np.iinfo(np.int64).min)
    np.maximum.at(last, codes[top], start[at][top])
    ok = (count >= 2) & memory & reduces & known
    # of kernels as wide launched at the same instant, none is the last: no writer
    top &= start[at] == last[codes]
    single = np.bincount(codes, weights=top, minlength=m) == 1
    out[at] = (ok & single)[codes] & top
    return out


def _main_kernels(op: np.ndarray, helper: np.ndarray) -> np.ndarray:
    """For each kernel, how many kernels that are not helpers its op launched (0 without an op)."""
    out = np.zeros(len(op), dtype=np.int64)
    at = np.flatnonzero((op >= 0) & ~helper)
    if len(at):
        _, inv, counts = np.unique(op[at], return_inverse=True, return_counts=True)
        out[at] = counts[inv]
    return out


def _depends(links: _Links | None, prev: int, j: int) -> bool:
    """Whether kernel ``j``'s op reads what kernel ``prev``'s op wrote (by element count)."""
    if links is None:
        return False
    if links.op[prev] < 0 or links.op[j] < 0 or links.op[prev] == links.op[j]:
        return False
    out = links.out_numel[prev]
    if not out > 1:
        return False
    return any(numel == out for numel, _ in links.inputs[j])


def _attention_copies(idx: np.ndarray, pos: dict[int, int], p: int, chain: list[int], kinds: np.ndarray, links: _Links | None,
                      previous: list[int]) -> list[int]:
    """The layout copies around an unfused attention that a fused attention kernel makes unnecessary.

    ``idx`` is the stream's kernels in start order, ``pos`` each one's position there, ``p`` the position of the chain's last member
    (its second batched GEMM). FlashAttention and SDPA's other kernels read Q, K and V strided (a
    head's rows need only a contiguous last dimension) and write their output in the layout the
    output projection reads, so the ``.contiguous()`` copies feeding the chain's GEMMs (run just
    before its first member or between its members) and the copy of its output right after it
    (``transpose(1, 2).reshape``) have no reason to run. A copy counts only where a member reads
    what it wrote, or it reads the last member's output (by element count, as every dependency
    here). ``previous``, the chain found before this one on the stream: its members are taken only
    when all of them are such copies (the caller then drops it)."""
    if links is None:
        return []
    members = set(chain)
    first = pos[chain[0]]
    found: list[int] = []
    q = first - 1
    while q >= 0 and kinds[idx[q]] == "copy" and any(_depends(links, int(idx[q]), m) for m in chain):
        found.append(int(idx[q]))
        q -= 1
    if previous and not set(previous) <= set(found):
        found = [j for j in found if j not in previous]
    for q in range(first + 1, p):
        j = int(idx[q])
        later = [m for m in chain if pos[m] > q]
        if j not in members and kinds[j] == "copy" and any(_depends(links, j, m) for m in later):
            found.append(j)
    if p + 1 < len(idx) and kinds[idx[p + 1]] == "copy" and _depends(links, chain[-1], int(idx[p + 1])):
        found.append(int(idx[p + 1]))
    return sorted(found, key=lambda j: pos[j])


def _independent(links: _Links | None, chain: list[int], j: int) -> bool:
    """Whether kernel ``j``'s op reads nothing any member of ``chain`` wrote (by element count), with
    both ops known."""
    if links is None or links.op[j] < 0:
        return False
    return not any(links.op[m] == links.op[j] or _depends(links, m, j) for m in chain)


def _chainable(links: _Links | None, j: int) -> bool:
    # a member must be its op's only kernel doing arithmetic (not a helper), or the writer of an op
    # of several memory kernels (which may only start a chain: its statistics kernels read its input
    # too, so that input stays in memory); the op's other kernels and its helpers (a converted
    # weight, BatchNorm's invstd) stay beside the chain
    return links is not None and links.op[j] >= 0 and (links.op_kernels[j] == 1 or bool(links.writer[j])) and not links.helper[j]


def _beside(links: _Links | None, last: int, j: int) -> bool:
    """Whether kernel ``j``, which does not join, runs beside the chain whose last member is ``last``
    rather than ending it: a helper or another kernel of that member's own op (the layout transform
    of a convolution's output, the parameter gradients after a LayerNorm backward's input gradient)."""
    return links is not None and links.op[j] >= 0 and links.op[j] == links.op[last]


def find_chains(
    sol: pd.DataFrame, steps: np.ndarray | None = None, options: FusionOptions = FusionOptions(), links: _Links | None = None,
    copies: dict[int, list[int]] | None = None,
) -> list[list[int]]:
    """Chains as lists of row positions of ``sol`` (see the module doc for the rules). ``copies``, when
    given, receives per chain index the layout copies an unfused attention's fused kernel makes
    unnecessary (:func:`_attention_copies`)."""
    chains: list[list[int]] = []
    if not len(sol):
        return chains
    kinds = sol["kind"].astype(str).to_numpy()
    bounds = sol["bound"].astype(str).to_numpy()
    start = sol["start"].to_numpy(np.int64)
    end = start + sol["dur"].to_numpy(np.int64)
    step = steps if steps is not None else np.full(len(sol), -1, dtype=np.int64)
    op_names = links.op_name if links is not None else np.full(len(sol), "", dtype=object)
    for _, group in sol.groupby(["device", "stream"], sort=False).indices.items():
        idx = np.asarray(group, dtype=np.int64)[np.argsort(start[group], kind="stable")]
        cur: list[int] = []
        mode = ""
        busy = 0  # end of the last kernel beside the chain since its last member (the GPU was not idle)
        absorbed: set[int] = set()
        pos: dict[int, int] = {}  # position of each kernel in idx, made at the stream's first attention
        for p, j in enumerate(idx):
            if j in absorbed:
                continue
            kind, mem = kinds[j], _is_memory_bound(kinds[j], bounds[j])
            ok = _chainable(links, j)
            joins = False
            if cur and ok and not (links is not None and links.writer[j]) and len(cur) < options.max_length:
                prev = cur[-1]
                idle = start[j] - max(end[prev], busy)
                # an idle GPU ends a chain (another phase of the program), unless the idle time is
                # shorter than the chain's own work: then it is the host launching late inside it
                work = int((end[cur] - start[cur]).sum())
                close = idle <= max(options.max_gap_ns, work) and (step[j] == step[prev] or step[j] < 0 or step[prev] < 0)
                if close and _depends(links, prev, j):
                    if mode == "epilogue":
                        joins = mem and kind == "elementwise"
                    elif mode == "attention":
                        # bmm -> (scale, mask)* -> softmax -> (dropout)* -> bmm: an unfused attention, its
                        # casts with it (Llama's softmax in fp32: a copy to fp32 before, one back after)
                        has_softmax = any(kinds[x] == "softmax" for x in cur)
                        joins = (mem and kind in ("elementwise", "softmax", "copy") and not (has_softmax and kind == "softmax")) or (
                            kind == "gemm" and has_softmax
                        )
                    elif mode == "memory":
                        joins = mem
            if joins:
                cur.append(int(j))
                busy = 0
                if mode == "attention" and kind == "gemm":
                    if copies is not None:
                        pos = pos or {int(x): q for q, x in enumerate(idx.tolist())}
                        found = _attention_copies(idx, pos, p, cur, kinds, links, chains[-1] if chains else [])
                        if chains and found and set(chains[-1]) <= set(found):
                            chains.pop()  # a chain of the attention's own operand copies: the attention takes them
                        if found:
                            copies[len(chains)] = found
                            absorbed.update(found)
                    chains.append(cur)
                    cur, mode = [], ""
                continue
            if cur and not ok and _beside(links, cur[-1], j):
                busy = max(busy, int(end[j]))
                continue
            if cur and mode == "attention" and kind not in ANCHORS and _independent(links, cur, j):
                # between an attention's members run kernels that read none of their outputs: the
                # mask built, the value tensor made contiguous for the second GEMM. They run
                # beside the chain (one fused kernel takes them as inputs) instead of ending it.
                busy = max(busy, int(end[j]))
                continue
            busy = 0
            if len(cur) >= options.min_length:
                chains.append(cur)
            if not ok:
                cur, mode = [], ""
            elif kind in ANCHORS:
                batched = str(op_names[j]).split("::")[-1] in ("bmm", "baddbmm", "matmul")
                cur, mode = [int(j)], "attention" if batched else "epilogue"
            elif mem:
                cur, mode = [int(j)], "memory"
            else:
                cur, mode = [], ""
        if len(cur) >= options.min_length:
            chains.append(cur)
    return chains


@dataclass(frozen=True)
class FusionResult:
    """The fusion candidates of one trace, as the CLI, the report and the window take them.

    Attributes
    ----------
    candidates
        Ranked candidates (columns :data:`FUSION_COLUMNS`); ``kernel_ids`` holds one tuple of
        kernel ids per instance.
    kernel_ns
        The trace's total kernel time, which the shares are of.
    """

    candidates: pd.DataFrame
    kernel_ns: float

    def summary(self) -> dict[str, float]:
        """Total estimated saving, its share of kernel time and the candidates without an
        estimate (see :func:`fusion_summary`)."""
        return _summary(self.candidates, self.kernel_ns)


def fusion(trace: Trace, sol: SolResult | None = None, device: str | None = None,
           options: FusionOptions = FusionOptions()) -> FusionResult:
    """:func:`fusion_candidates` as a :class:`FusionResult`; ``sol`` when already computed.

    Raises
    ------
    AnalysisError
        when ``sol`` is not given and the GPU cannot be recognised.
    """
    table = fusion_candidates(trace, device, options=options, sol=sol.table if sol is not None else None,
                              model=sol.model if sol is not None else None)
    return FusionResult(table, float(trace.kernels["dur"].sum()))


def fusion_candidates(
    trace: Trace,
    device: str | None = None,
    devices: Mapping[str, DeviceSpec] | None = None,
    options: FusionOptions = FusionOptions(),
    sol: pd.DataFrame | None = None,
    model: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Fusion candidates of a trace, aggregated and ranked (columns ``FUSION_COLUMNS``).

    ``kernel_ids`` holds, per candidate, a list of tuples of ``kernels.id`` (one tuple per
    instance) so a view can select them. ``sol`` may be passed when already computed, and
    ``model`` (:func:`kviewer.analysis.model.model_kernels` of the trace, ``SolResult.model``) with it.
    """
    if sol is None:
        sol = speed_of_light(trace, device, devices)
    links = _links(trace, model) if len(sol) else None
    copies: dict[int, list[int]] = {}
    chains = find_chains(sol, marked_steps(trace, every_rank=True)[1], options, links, copies)
    total_ns = float(sol["dur"].sum())
    if not chains or links is None:
        return _empty()
    dims = _op_dims(trace, sol)
    # numpy columns once: indexing a DataFrame per chain costs a millisecond each
    cols = {c: sol[c].to_numpy() for c in ("kind", "dur", "flops", "bytes", "t_sol_ns", "peak_flops", "peak_bw", "op_name", "short_name", "id",
                                           "sol_status", "sol_reason", "name")}
    training = is_training(trace)
    recs = [_estimate(cols, chain, dims, links, training, copies.get(i)) for i, chain in enumerate(chains)]
    df = pd.DataFrame(recs)
    agg = (
        df.groupby("key", sort=False)
        .agg(
            kind=("kind", "first"),
            chain=("chain", "first"),
            kernels=("kernels", "first"),
            count=("kind", "size"),
            length=("length", "first"),
            measured_ns=("measured_ns", "sum"),
            # NaN stays NaN: one instance without an estimate makes the total unknown
            fused_est_ns=("fused_est_ns", lambda v: v.sum() if v.notna().all() else np.nan),
            fused_sol_ns=("fused_sol_ns", lambda v: v.sum() if v.notna().all() else np.nan),
            savings_ns=("savings_ns", lambda v: v.sum() if v.notna().all() else np.nan),
            bytes_saved=("bytes_saved", "first"),
            intermediate=("intermediate", "first"),
            remedy=("remedy", "first"),
            confidence=("confidence", "first"),
            note=("note", "first"),
            kernel_ids=("kernel_ids", list),
        )
        .reset_index(drop=True)
    )
    agg.loc[agg["savings_ns"].isna(), "confidence"] = "low"
    agg["savings_per_instance_ns"] = agg["savings_ns"] / agg["count"]
    agg["gpu_time_pct"] = agg["savings_ns"] / total_ns * 100.0 if total_ns > 0 else np.nan
    # candidates without an estimate (no FLOPs/bytes known) are listed last
    agg = agg.sort_values(["savings_ns", "chain"], ascending=[False, True], kind="stable", na_position="last").reset_index(drop=True)
    agg["rank"] = np.arange(1, len(agg) + 1)
    agg["count"] = agg["count"].astype(np.int64)
    agg["length"] = agg["length"].astype(np.int64)
    return agg[FUSION_COLUMNS]


def _empty() -> pd.DataFrame:
    types = {
        "rank": "int64", "count": "int64", "length": "int64", "measured_ns": "float64", "fused_est_ns": "float64",
        "fused_sol_ns": "float64", "savings_ns": "float64", "savings_per_instance_ns": "float64",
        "gpu_time_pct": "float64", "bytes_saved": "float64",
    }
    return pd.DataFrame({c: pd.Series(dtype=types.get(c, object)) for c in FUSION_COLUMNS})


def _op_dims(trace: Trace, sol: pd.DataFrame) -> np.ndarray:
    return kernel_op_info(trace)[1]


_EPILOGUE_OPS = frozenset("add sub mul div gelu relu silu sigmoid tanh clamp clamp_min hardtanh leaky_relu dropout".split())
#: activations whose input the backward reads (the pre-activation a training epilogue must keep)
_ACTIVATION_OPS = frozenset("gelu relu silu sigmoid tanh hardtanh leaky_relu".split())
#: what a cuBLASLt / hipBLASLt epilogue computes: a bias (or the residual as C with beta = 1), then
#: one of these activations (DGELU / DRELU: their backward, fused into the backward GEMM)
_BLASLT_ACTIVATIONS = frozenset("gelu relu gelu_backward threshold_backward".split())


def _base(op: str) -> str:
    return op.split("::")[-1].split(".")[0].rstrip("_")


#: autograd's op names: ``MmBackward0``, ``autograd::engine::evaluate_function: ...``
_BACKWARD_OP = re.compile(r"Backward\d*$|^autograd::engine")


def is_training(trace: Trace) -> bool:
    """Whether the trace ran a backward pass (autograd ops recorded), decided on op names as data."""
    c = trace.cpu_slices
    if not len(c):
        return False
    names = c.loc[c["category"].astype(str).isin(["op", "python", "annotation"]), "name"].astype("category").cat.categories
    return any(_BACKWARD_OP.search(name) for name in names.astype(str))


def _blaslt_epilogue(bases: list[str]) -> str | None:
    """The cuBLASLt epilogue that computes these ops after a GEMM, None when none does."""
    adds = [b for b in bases if b in ("add", "sub")]
    acts = [b for b in bases if b in _BLASLT_ACTIVATIONS]
    if len(adds) + len(acts) != len(bases) or len(adds) > 1 or len(acts) > 1:
        return None
    if acts and bases[-1] != acts[0]:
        return None  # the activation comes last in an epilogue
    act = {"gelu": "GELU", "relu": "RELU", "gelu_backward": "DGELU", "threshold_backward": "DRELU"}.get(acts[0]) if acts else None
    if act and adds:
        return f"BIAS + {act}" if not act.startswith("D") else f"{act} + BGRAD"
    return act or "BIAS (or the residual as C with beta = 1)"


def _remedy(kinds: list[str], ops: list[str], names: list[str], training: bool = False) -> str:
    bases = [_base(o) for o in ops]
    amd = any(n.startswith("Cijk_") or "hipblaslt" in n.lower() or "rocblas" in n.lower() for n in names)
    if "softmax" in kinds and kinds[0] == "gemm":
        return "FlashAttention / SDPA (F.scaled_dot_product_attention)"
    if any(b.startswith("_foreach_") or b.startswith("_fused_") for b in bases):
        return "fused or foreach optimizer (torch.optim ... fused=True / foreach=True)"
    if kinds[0] in ("gemm", "conv"):
        if kinds[0] == "conv" and all(b in _EPILOGUE_OPS for b in bases[1:]):
            return "cuDNN/MIOpen fused convolution epilogue (conv+bias+activation), or torch.compile"
        epi = _blaslt_epilogue(bases[1:]) if kinds[0] == "gemm" else None
        if epi is not None:
            lib = "hipBLASLt" if amd else "cuBLASLt"
            aux = " with the _AUX output (keeps the pre-activation for the backward)" if training and ("GELU" in epi or "RELU" in epi) and not epi.startswith("D") else ""
            return f"{lib} epilogue {epi}{aux}"
        return "torch.compile (Inductor fuses the pointwise epilogue into one kernel, or into a Triton GEMM template)"
    if kinds[0] == "attention":
        return "torch.compile, or FlashAttention with the epilogue fused"
    if any(k in ("norm", "softmax", "reduction") for k in kinds):
        return "torch.compile (Inductor fuses the norm with its pointwise neighbours), or a hand-written Triton kernel"
    return "torch.compile (Inductor fuses pointwise chains)"


def _member_floor(dur: np.ndarray, read: np.ndarray, written: np.ndarray, inter: np.ndarray, anchored: bool,
                  keeps_preact: bool) -> float:
    """The least time the fused chain can take, from what its members keep at the bandwidth each
    achieves today: the traffic fusion cannot remove (not the intermediates a member reads back or
    writes for the next). An epilogue chain keeps its anchor's whole time plus each epilogue
    member's remaining traffic (its external reads; the final output is the anchor's write,
    redirected, or an extra write beside the pre-activation a training backward reads). A memory chain cannot save more than its other members' whole time
    and the removed traffic of the member that keeps the most: its floor is that member's remaining
    time (a BatchNorm + ReLU saves at most the ReLU kernel and the BatchNorm's intermediate write)."""
    n = len(dur)
    kept = []
    for a in range(n):
        if a == 0 and anchored:
            kept.append(float(dur[0]))
            continue
        moved = float(read[a] + written[a])
        # a middle member's output is an intermediate; an epilogue's final output is the anchor's own
        # write, redirected (already in the anchor's time), unless the anchor still writes its
        # pre-activation for the backward (keeps_preact: only an anchored chain, whose anchor is
        # taken whole above)
        write_gone = a < n - 1 or (anchored and not keeps_preact)
        removed = float(inter[a]) + (float(written[a]) if write_gone else 0.0)
        kept.append(float(dur[a]) * (max(moved - removed, 0.0) / moved if moved > 0 else 1.0))
    return float(sum(kept)) if anchored else max(kept, default=0.0)


def _estimate(cols: Mapping[str, np.ndarray], chain: list[int], dims: np.ndarray, links: _Links,
              training: bool = False, copies: list[int] | None = None) -> dict[str, object]:
    """One chain instance's record; ``copies``: layout copies the fused kernel makes unnecessary
    (:func:`_attention_copies`), removed with the chain: their time is saved, their traffic too."""
    at = np.asarray(chain, dtype=np.int64)
    kinds = [str(x) for x in cols["kind"][at]]
    dur = cols["dur"][at].astype(np.float64)
    flops = cols["flops"][at].astype(np.float64)
    nbytes = cols["bytes"][at].astype(np.float64)
    t_sol = cols["t_sol_ns"][at].astype(np.float64)
    status = [str(x) for x in cols["sol_status"][at]]
    notes: list[str] = []
    read = links.read[at]
    written = links.written[at]
    if links.writer[at].any():
        # a writer moves its op's whole traffic (see _links): its speed of light is that traffic's
        t_sol = np.where(links.writer[at], np.fmax(t_sol, (read + written) / cols["peak_bw"][at].astype(np.float64) * 1e9), t_sol)
    # a member above the DRAM roofline because the L2 cache served part of its traffic (an
    # activation small enough to stay in L2) has a measured rate but no speed of light
    l2 = [st == SOL_EXCEEDS and str(r) == "l2_served_traffic" for st, r in zip(status, cols["sol_reason"][at])]
    from_l2 = any(l2)
    known = bool(np.isfinite(read).all() and np.isfinite(written).all() and all(st == SOL_OK or x for st, x in zip(status, l2)))
    # intermediates: each producer's output, read back by the next member
    inter_read = 0.0
    member_inter = np.zeros(len(chain))  # intermediate bytes each member reads back
    external: list[float] = []
    for a in range(len(chain)):
        j = chain[a]
        used = False
        for numel, b in links.inputs[j]:
            if a > 0 and not used and numel == links.out_numel[chain[a - 1]]:
                inter_read += b
                member_inter[a] = b
                used = True
            else:
                external.append(b)
    anchored = kinds[0] in ANCHORS
    # a training GEMM + activation still writes the pre-activation: the backward reads it
    keeps_preact = anchored and training and len(chain) > 1 and any(
        _base(str(o)) in _ACTIVATION_OPS for o in cols["op_name"][at[1:]])
    external.append(float(written[-1]) if np.isfinite(written[-1]) else math.nan)
    fused_bytes = math.nan
    bytes_saved = math.nan
    fused_sol = math.nan
    fused_est = math.nan
    measured = float(dur.sum())
    if known:
        fused_bytes = float(read.sum()) - inter_read + float(written[-1]) + (float(written[0]) if keeps_preact else 0.0)
        largest = max((e for e in external if np.isfinite(e)), default=0.0)
        fused_bytes = max(fused_bytes, largest, 0.0)
        bytes_saved = max(float(read.sum() + written.sum()) - fused_bytes, 0.0)
        flops_f = float(np.nansum(flops))
        anchor = kinds[0] in ANCHORS
        peaks = cols["peak_flops"][at].astype(np.float64)
        peak = float(peaks[0]) if anchor or np.isnan(peaks).all() else float(np.nanmax(peaks))
        bw = float(cols["peak_bw"][at][0])
        t_c = flops_f / peak * 1e9 if peak > 0 else math.nan
        t_m = fused_bytes / bw * 1e9 if bw > 0 else math.nan
        if not (math.isnan(t_c) and math.isnan(t_m)):
            fused_sol = float(np.nanmax([t_c, t_m]))
        if anchor and t_sol[0] > 0:
            # never faster than the GEMM alone: an epilogue does not speed up the main loop
            fused_est = dur[0] * max(1.0, fused_sol / t_sol[0])
            notes.append("fused time = the anchor's time, scaled up when the fused speed of light exceeds the anchor's")
        elif np.isfinite(t_sol).all() and dur.sum() > 0 and t_sol.sum() > 0 and (dur > 0).all():
            # one streaming kernel moves the fused traffic at the rate the best-streaming member
            # shows on these tensors on this GPU: a slow member's implementation (eager's
            # channels_last BatchNorm at half the bandwidth its ReLU reaches) is not the fused
            # kernel's; what the members keep bounds it below
            eff = float(np.max(t_sol / dur))
            fused_est = fused_sol / eff
            notes.append(f"fused time = fused speed of light at the best member's {eff * 100:.0f}% of SOL")
        elif from_l2 and dur.sum() > 0:
            fused_est = 0.0  # raised to the members' own rates below
            # no chain efficiency to scale the fused speed of light by: L2 served part of the
            # traffic, so some members ran above the DRAM roofline
            notes.append("fused time = what the members keep of their traffic at their own measured rates (the L2 cache "
                         "served part of the chain's traffic), never below the fused speed of light")
        if np.isfinite(fused_est):
            # the work fusion cannot remove, at the efficiency it shows today: only intermediate
            # traffic goes (a BatchNorm + ReLU saves at most the ReLU kernel and the BatchNorm's
            # intermediate traffic at its own rate); an anchor keeps its whole time (the main loop is
            # unchanged) and its epilogue members their remaining traffic. One launch at least,
            # never more than today.
            own = _member_floor(dur, read, written, member_inter, anchored, keeps_preact)
            floor = max(float(dur.min()), fused_sol, own)
            if own > fused_est and not from_l2:
                notes.append("raised to what the members' own measured efficiency allows")
            fused_est = min(max(fused_est, floor), measured)
    if not np.isfinite(fused_est):
        fused_est = math.nan
        notes.append("a size or speed of light in the chain is unknown: no saving estimated")
    extra = np.asarray(copies or [], dtype=np.int64)
    if len(extra):
        measured += float(cols["dur"][extra].astype(np.float64).sum())
        moved = float((links.read[extra] + links.written[extra]).sum())
        bytes_saved = bytes_saved + moved if np.isfinite(moved) else math.nan
        notes.append(f"with {len(extra)} layout copies of its inputs and output that a fused attention kernel does not need "
                     "(it reads Q, K and V strided and writes the layout the next op reads)")
    ops = [str(x) for x in cols["op_name"][at]]
    short_full = [str(x) for x in cols["short_name"][at]]
    shorts = [_short(x) for x in short_full]
    labels = [o if o else s for o, s in zip(ops, shorts)]
    if ops[0]:
        labels[0] += _shapes(str(dims[chain[0]]))  # tells o_proj from down_proj: same op, same kernel
    chain_txt = " → ".join(labels)
    key = tuple(zip(short_full, ops, (str(dims[i]) for i in chain))) + tuple(str(cols["short_name"][j]) for j in extra)
    anchor = kinds[0] in ANCHORS
    kind = ("attention (unfused)" if "softmax" in kinds and kinds[0] == "gemm" else f"{kinds[0]}+epilogue") if anchor else "memory chain"
    from_ops = all(str(links.kind_source[j]) in ("op", "counters") for j in chain)
    confidence = "low" if math.isnan(fused_est) else ("high" if from_ops else "medium")
    return {
        "key": key,
        "kind": kind,
        "chain": chain_txt,
        "kernels": " → ".join(shorts),
        "length": len(chain),
        "measured_ns": measured,
        "fused_est_ns": fused_est,
        "fused_sol_ns": fused_sol,
        "savings_ns": measured - fused_est if not math.isnan(fused_est) else math.nan,
        "bytes_saved": bytes_saved,
        "intermediate": "shapes",
        "remedy": _remedy(kinds, ops, [str(x) for x in cols["name"][at]], training),
        "confidence": confidence,
        "note": "; ".join(notes),
        "kernel_ids": tuple(int(x) for x in cols["id"][np.concatenate([at, extra])]),
    }


def _shapes(dims_text: str) -> str:
    """``[[4096, 2048], [2048, 2048]]`` -> ``(4096x2048, 2048x2048)``; '' when none."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return ""
    parts = ["x".join(str(x) for x in d) for d in dims if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    return f"({', '.join(parts)})" if parts else ""


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def fusion_summary(candidates: pd.DataFrame, trace: Trace) -> dict[str, float]:
    """Total estimated saving (of the candidates with an estimate; NaN when none has one), its
    share of GPU kernel time, and how many candidates have no estimate (``unknown``)."""
    return _summary(candidates, float(trace.kernels["dur"].sum()))


def _summary(candidates: pd.DataFrame, total: float) -> dict[str, float]:
    savings = candidates["savings_ns"].to_numpy(np.float64) if len(candidates) else np.zeros(0)
    known = ~np.isnan(savings)
    saving = float(savings[known].sum()) if known.any() else math.nan
    return {
        "kernel_ns": total,
        "savings_ns": saving,
        "savings_pct": saving / total * 100.0 if total > 0 else math.nan,
        "unknown": int((~known).sum()),
    }
