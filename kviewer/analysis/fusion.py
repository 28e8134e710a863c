"""Fusion candidates: kernel chains that one kernel could do, and what that would save.

Two shapes of chain are found on each (device, stream), walking kernels in start order:

* a **GEMM or attention kernel followed by an elementwise epilogue**: the run of memory-bound
  elementwise kernels right after it (``o_proj`` then the residual add; the up-projection then
  GELU, ``*1.0``, ``+0.0``);
* a **memory-bound chain**: consecutive memory-bound elementwise, normalisation, reduction or copy
  kernels.

Kernels join a chain only when the gap to the previous one is small (``max_gap_ns``) and they lie
in the same step where the trace marks steps. A normalisation or reduction ends an epilogue (it
needs whole rows, which a GEMM tile does not hold) and starts a memory-bound chain of its own.

What fusing saves
-----------------
Inside a chain each kernel writes its output and the next reads it back. The fused kernel keeps
that intermediate on chip, so its traffic is ``sum(bytes) - 2 x sum(intermediates)``; its FLOPs are
the sum. The intermediate sizes come from the launching ops' shapes (``intermediate = shapes``);
without ops each producer's output is assumed to be half of its bytes, as for a unary elementwise
kernel (``intermediate = assumed``). Intermediates are assumed to have no other consumer.

The fused speed of light ``fused_sol_ns`` is a floor no kernel reaches, so the estimate of the
fused kernel's time keeps the efficiency the chain already achieves:

* with a GEMM/attention anchor: ``anchor time x max(1, fused T_SOL / anchor T_SOL)`` (the fused
  kernel is the GEMM with a longer epilogue: it runs as efficiently as the GEMM did and is never
  faster than the GEMM alone);
* a memory-bound chain: ``fused T_SOL / (sum of T_SOL / sum of measured time)``.

``savings_ns = measured - fused estimate`` (kernel time only: the launch gaps between the kernels
go too, which is not counted). Identical chains (same kernels, ops and shapes) are aggregated
across steps and layers: ``count`` instances, total saving, share of all GPU kernel time, ranked
by total saving.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from kviewer.analysis.devices import DeviceSpec
from kviewer.analysis.sol import speed_of_light
from kviewer.core import Trace

ANCHORS = ("gemm", "attention")
MEMORY_KINDS = ("elementwise", "norm", "reduction", "copy")

FUSION_COLUMNS = [
    "rank",
    "kind",
    "chain",
    "kernels",
    "count",
    "length",
    "measured_ns",
    "fused_est_ns",
    "fused_sol_ns",
    "savings_ns",
    "savings_per_instance_ns",
    "gpu_time_pct",
    "bytes_saved",
    "intermediate",
    "note",
    "kernel_ids",
]

_STEP = re.compile(r"^(?:ProfilerStep#\d+|(?:train(?:ing)?[_ ]?)?(?:step|iter|iteration)[\s_#:=-]*\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class FusionOptions:
    max_gap_ns: int = 100_000
    """kernels further apart than this (idle GPU in between) do not chain"""
    min_length: int = 2


def kernel_steps(trace: Trace) -> np.ndarray:
    """Step index of every kernel, -1 where the trace marks no steps.

    Uses GPU-side step ranges (``gpu_annotation``, Kineto's projection of ``record_function``
    ranges) by kernel start, else host ranges (annotation / NVTX) by the start of the launching
    call found through the correlation id.
    """
    k = trace.kernels
    out = np.full(len(k), -1, dtype=np.int64)
    c = trace.cpu_slices
    if not len(k) or not len(c):
        return out
    cats = c["category"].astype(str)
    # match the distinct names once: slices repeat a few names many times
    names = c["name"].astype("category")
    step_cat = np.array([bool(_STEP.match(str(x))) for x in names.cat.categories] + [False])
    is_step = step_cat[names.cat.codes.to_numpy()]
    gpu = c[is_step & (cats == "gpu_annotation").to_numpy()]
    if len(gpu):
        return _assign(gpu["start"].to_numpy(), gpu["end"].to_numpy(), k["start"].to_numpy())
    host = c[is_step & cats.isin(["annotation", "nvtx"]).to_numpy()]
    if not len(host):
        return out
    calls = c[cats.isin(["runtime", "driver"]).to_numpy() & (c["correlation"] >= 0).to_numpy()]
    launch = pd.Series(calls["start"].to_numpy(), index=calls["correlation"].to_numpy())
    launch = launch[~launch.index.duplicated()]
    when = launch.reindex(k["correlation"].to_numpy()).to_numpy(dtype=np.float64)
    return _assign(host["start"].to_numpy(), host["end"].to_numpy(), when)


def _assign(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    order = np.argsort(starts, kind="stable")
    s, e = starts[order].astype(np.float64), ends[order].astype(np.float64)
    pos = np.searchsorted(s, t, side="right") - 1
    ok = (pos >= 0) & ~np.isnan(t)
    ok[ok] &= t[ok] < e[pos[ok]]
    out = np.full(len(t), -1, dtype=np.int64)
    out[ok] = order[pos[ok]]
    return out


def _is_memory_bound(kind: str, bound: str) -> bool:
    if kind not in MEMORY_KINDS:
        return False
    # kernels whose bound is unknown (no FLOPs) count when their kind is plain data movement
    return bound == "memory" or (bound == "unknown" and kind in ("elementwise", "copy"))


def find_chains(sol: pd.DataFrame, steps: np.ndarray | None = None, options: FusionOptions = FusionOptions()) -> list[list[int]]:
    """Chains as lists of row positions of ``sol`` (see the module doc for the rules)."""
    chains: list[list[int]] = []
    if not len(sol):
        return chains
    kinds = sol["kind"].astype(str).to_numpy()
    bounds = sol["bound"].astype(str).to_numpy()
    start = sol["start"].to_numpy(np.int64)
    end = start + sol["dur"].to_numpy(np.int64)
    step = steps if steps is not None else np.full(len(sol), -1, dtype=np.int64)
    for _, idx in sol.groupby(["device", "stream"], sort=False).indices.items():
        idx = idx[np.argsort(start[idx], kind="stable")]
        cur: list[int] = []
        mode = ""
        for j in idx:
            kind, mem = kinds[j], _is_memory_bound(kinds[j], bounds[j])
            joins = False
            if cur:
                prev = cur[-1]
                close = start[j] - end[prev] <= options.max_gap_ns and (step[j] == step[prev] or step[j] < 0 or step[prev] < 0)
                if close and mode == "epilogue":
                    joins = mem and kind == "elementwise"
                elif close and mode == "memory":
                    joins = mem
            if joins:
                cur.append(int(j))
                continue
            if len(cur) >= options.min_length:
                chains.append(cur)
            if kind in ANCHORS:
                cur, mode = [int(j)], "epilogue"
            elif mem:
                cur, mode = [int(j)], "memory"
            else:
                cur, mode = [], ""
        if len(cur) >= options.min_length:
            chains.append(cur)
    return chains


def fusion_candidates(
    trace: Trace,
    device: str | None = None,
    devices: Mapping[str, DeviceSpec] | None = None,
    options: FusionOptions = FusionOptions(),
    sol: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Fusion candidates of a trace, aggregated and ranked (columns ``FUSION_COLUMNS``).

    ``kernel_ids`` holds, per candidate, a list of tuples of ``kernels.id`` (one tuple per
    instance) so a view can select them. ``sol`` may be passed when already computed.
    """
    if sol is None:
        sol = speed_of_light(trace, device, devices)
    chains = find_chains(sol, kernel_steps(trace), options)
    total_ns = float(sol["dur"].sum())
    if not chains:
        return _empty()
    dims = _op_dims(trace, sol)
    # numpy columns once: indexing a DataFrame per chain costs a millisecond each
    cols = {c: sol[c].to_numpy() for c in ("kind", "dur", "flops", "bytes", "bytes_written", "t_sol_ns", "peak_flops", "peak_bw", "op_name", "short_name", "id")}
    recs = [_estimate(cols, chain, dims) for chain in chains]
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
            fused_est_ns=("fused_est_ns", "sum"),
            fused_sol_ns=("fused_sol_ns", "sum"),
            savings_ns=("savings_ns", lambda v: v.sum(min_count=1)),  # NaN stays NaN: no estimate
            bytes_saved=("bytes_saved", "first"),
            intermediate=("intermediate", "first"),
            note=("note", "first"),
            kernel_ids=("kernel_ids", list),
        )
        .reset_index(drop=True)
    )
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
    from kviewer.analysis.model import op_of_kernels

    op = op_of_kernels(trace)
    dims = np.full(len(sol), "", dtype=object)
    has = op >= 0
    if has.any():
        dims[has] = trace.cpu_slices["input_dims"].astype(str).to_numpy()[op[has]]
    return dims


def _input_sizes(dims_text: str) -> set[int]:
    """Element counts of an op's input tensors, from its input_dims JSON text."""
    import json

    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return set()
    out = set()
    for d in dims if isinstance(dims, list) else []:
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            out.add(int(np.prod(d, dtype=np.float64)))
    return out


def _estimate(cols: Mapping[str, np.ndarray], chain: list[int], dims: np.ndarray) -> dict[str, object]:
    at = np.asarray(chain, dtype=np.int64)
    kinds = [str(x) for x in cols["kind"][at]]
    dur = cols["dur"][at].astype(np.float64)
    flops = cols["flops"][at].astype(np.float64)
    nbytes = cols["bytes"][at].astype(np.float64)
    written = cols["bytes_written"][at].astype(np.float64)
    t_sol = cols["t_sol_ns"][at].astype(np.float64)
    notes: list[str] = []
    # intermediates: what each producer writes and the next kernel reads back
    inter = 0.0
    source = "shapes"
    for a in range(len(chain) - 1):
        w = written[a]
        if math.isnan(w) or w <= 0:
            if math.isnan(nbytes[a]):
                source = "unknown"
                continue
            w = nbytes[a] / 2.0
            source = "assumed" if source != "unknown" else source
        else:
            # check with the consumer's input shapes that it reads a tensor of that size
            sizes = _input_sizes(str(dims[chain[a + 1]]))
            itemsize_ok = any(abs(s * b - w) <= 0.01 * w for s in sizes for b in (1, 2, 4, 8))
            if sizes and not itemsize_ok:
                source = "assumed" if source == "shapes" else source
        inter += w
    if source == "assumed":
        notes.append("intermediate sizes partly assumed (half of the producer's bytes, or not seen among the consumer's inputs)")
    elif source == "unknown":
        notes.append("some intermediate sizes unknown: their traffic is not subtracted")
    bytes_f = float(np.nansum(nbytes)) - 2.0 * inter
    flops_f = float(np.nansum(flops))
    anchor = kinds[0] in ANCHORS
    peaks = cols["peak_flops"][at].astype(np.float64)
    peak = float(peaks[0]) if anchor or np.isnan(peaks).all() else float(np.nanmax(peaks))
    bw = float(cols["peak_bw"][at][0])
    t_c = flops_f / peak * 1e9 if peak > 0 else math.nan
    t_m = bytes_f / bw * 1e9 if bw > 0 else math.nan
    fused_sol = float(np.nanmax([t_c, t_m])) if not (math.isnan(t_c) and math.isnan(t_m)) else math.nan
    measured = float(dur.sum())
    if anchor and t_sol[0] > 0:
        # never faster than the GEMM alone: an epilogue does not speed up the main loop
        fused_est = dur[0] * max(1.0, fused_sol / t_sol[0])
        notes.append("fused time = the anchor's time, scaled up when the fused speed of light exceeds the anchor's")
    else:
        known = ~np.isnan(t_sol)
        eff = float(t_sol[known].sum() / dur[known].sum()) if known.any() and dur[known].sum() > 0 else math.nan
        fused_est = fused_sol / eff if eff > 0 else math.nan
        if not math.isnan(eff):
            notes.append(f"fused time = fused speed of light at the chain's {eff * 100:.0f}% of SOL")
    if math.isnan(fused_est):
        notes.append("no speed of light for this chain: no saving estimated")
    else:
        fused_est = min(max(fused_est, fused_sol), measured)
    ops = [str(x) for x in cols["op_name"][at]]
    short_full = [str(x) for x in cols["short_name"][at]]
    shorts = [_short(x) for x in short_full]
    labels = [o if o else s for o, s in zip(ops, shorts)]
    if ops[0]:
        labels[0] += _shapes(str(dims[chain[0]]))  # tells o_proj from down_proj: same op, same kernel
    chain_txt = " → ".join(labels)
    key = tuple(zip(short_full, ops, (str(dims[i]) for i in chain)))
    kind = f"{kinds[0]}+epilogue" if anchor else "memory chain"
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
        "bytes_saved": 2.0 * inter,
        "intermediate": source,
        "note": "; ".join(notes),
        "kernel_ids": tuple(int(x) for x in cols["id"][at]),
    }


def _shapes(dims_text: str) -> str:
    """``[[4096, 2048], [2048, 2048]]`` -> ``(4096x2048, 2048x2048)``; '' when none."""
    import json

    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return ""
    parts = ["x".join(str(x) for x in d) for d in dims if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    return f"({', '.join(parts)})" if parts else ""


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def fusion_summary(candidates: pd.DataFrame, trace: Trace) -> dict[str, float]:
    """Total estimated saving and its share of GPU kernel time."""
    total = float(trace.kernels["dur"].sum())
    saving = float(np.nansum(candidates["savings_ns"].to_numpy(np.float64))) if len(candidates) else 0.0
    return {"kernel_ns": total, "savings_ns": saving, "savings_pct": saving / total * 100.0 if total > 0 else math.nan}
