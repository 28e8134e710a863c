"""Per-rank views of a distributed trace: summaries per rank and across ranks, step-time spread
and the straggler rank.

A trace covers several ranks when it was loaded from a folder of per-rank files (its tables'
``rank`` column then tells rows apart). Every function also works on a one-rank trace, whose
rows may carry rank -1 (unknown): it is then one group.

Steps are found per rank by :mod:`kviewer.analysis.steps` (``ProfilerStep#N`` ranges, else
``step_N`` user annotations or NVTX ranges).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from kviewer.analysis.steps import busy_ns, find_steps
from kviewer.analysis.summary import SUMMARY_COLUMNS, kernel_summary
from kviewer.core import Trace

STEP_COLUMNS = ["step", "rank", "name", "start", "end", "dur", "kernel_ns", "busy_ns", "kernel_count"]
SPREAD_COLUMNS = ["step", "ranks", "min_ns", "median_ns", "max_ns", "spread_ns", "spread_pct", "fastest_rank", "slowest_rank"]
STRAGGLER_COLUMNS = ["rank", "steps", "mean_ns", "median_ns", "max_ns", "mean_busy_ns", "excess_pct", "times_slowest"]
ACROSS_COLUMNS = ["name", "ranks", "count", "total_ns", "mean_rank_ns", "min_rank_ns", "max_rank_ns", "spread_ns", "slowest_rank"]


def ranks_of(trace: Trace) -> list[int]:
    """The ranks present in the trace's tables (``meta.ranks`` first), sorted; [-1] when none."""
    found: set[int] = {int(r) for r in trace.meta.ranks}
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        df = trace.table(name)
        if len(df):
            found.update(int(r) for r in np.unique(df["rank"].to_numpy()))
    return sorted(found) or [-1]


def _only_rank(trace: Trace, rank: int) -> Trace:
    """A view of the trace with the kernels of one rank (for reusing the one-trace summaries)."""
    k = trace.kernels
    return Trace(meta=trace.meta, kernels=k[k["rank"].to_numpy() == rank])


def kernel_summary_by_rank(trace: Trace, by: str = "name") -> pd.DataFrame:
    """:func:`~kviewer.analysis.summary.kernel_summary` for each rank, stacked.

    Columns: rank, then the summary's (time_pct is the share of that rank's kernel time).
    Sorted by rank, then total_ns descending.
    """
    parts = []
    for rank in ranks_of(trace):
        s = kernel_summary(_only_rank(trace, rank), by=by)
        if len(s):
            s.insert(0, "rank", np.full(len(s), rank, dtype=np.int64))
            parts.append(s)
    if not parts:
        empty = kernel_summary(_only_rank(trace, -2), by=by)
        empty.insert(0, "rank", pd.Series(dtype="int64"))
        return empty
    return pd.concat(parts, ignore_index=True)[["rank", *SUMMARY_COLUMNS]]


def across_ranks(per: pd.DataFrame) -> pd.DataFrame:
    """Each kernel name's time on every rank, from per-rank totals: how evenly the ranks share it.

    Columns: name, ranks (how many ranks ran it), count and total_ns (over all ranks),
    mean/min/max_rank_ns (the per-rank totals), spread_ns (max - min over the ranks that ran it)
    and slowest_rank. Sorted by total_ns descending, then name.

    ``per`` has one row per (name, rank) with
    ``sum`` (the rank's kernel time of that name) and ``size`` (its kernel count). ``kviewer fleet``
    builds it from per-file summaries."""
    if not len(per):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "float64" if c == "mean_rank_ns" else "int64") for c in ACROSS_COLUMNS})
    per = per.sort_values(["name", "rank"], kind="stable").reset_index(drop=True)
    g = per.groupby("name", sort=False)
    out = pd.DataFrame(
        {
            "ranks": g.size().astype(np.int64),
            "count": g["size"].sum().astype(np.int64),
            "total_ns": g["sum"].sum().astype(np.int64),
            "mean_rank_ns": g["sum"].mean().astype(np.float64),
            "min_rank_ns": g["sum"].min().astype(np.int64),
            "max_rank_ns": g["sum"].max().astype(np.int64),
        }
    )
    out["spread_ns"] = out["max_rank_ns"] - out["min_rank_ns"]
    slowest = per.loc[per.groupby("name", sort=False)["sum"].idxmax()].set_index("name")["rank"]
    out["slowest_rank"] = slowest.reindex(out.index).astype(np.int64)
    out = out.reset_index().rename(columns={"index": "name"})
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[ACROSS_COLUMNS]


def rank_subtrace(trace: Trace, rank: int) -> Trace:
    """The rows of one rank as a trace of their own: ids renumbered, flows and metrics followed.

    On a trace without ranks (every row -1) ``rank_subtrace(trace, -1)`` is the whole trace.
    """
    tables: dict[str, pd.DataFrame] = {}
    id_maps: dict[str, np.ndarray] = {}
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        df = trace.table(name)
        sel = df["rank"].to_numpy() == rank
        if sel.all():
            tables[name] = df
            id_maps[name] = np.arange(len(df), dtype=np.int64)
            continue
        # ids are row positions; old id -> new id (-1 where the row is another rank's)
        new_id = np.full(len(df), -1, dtype=np.int64)
        new_id[sel] = np.arange(int(sel.sum()), dtype=np.int64)
        sub = df[sel].reset_index(drop=True)
        sub["id"] = np.arange(len(sub), dtype=np.int64)
        tables[name] = sub
        id_maps[name] = new_id

    def follow(old: np.ndarray, lookup: np.ndarray) -> np.ndarray:
        out = np.full(len(old), -1, dtype=np.int64)
        ok = (old >= 0) & (old < len(lookup))
        out[ok] = lookup[old[ok]]
        return out

    f = trace.flows
    if len(f):
        src = follow(f["src"].to_numpy(), id_maps["cpu_slices"])
        dst_old = f["dst"].to_numpy()
        kinds = f["dst_table"].astype(str).to_numpy()
        dst = np.full(len(f), -1, dtype=np.int64)
        for tbl in ("kernels", "gpu_ops"):
            sel = kinds == tbl
            dst[sel] = follow(dst_old[sel], id_maps[tbl])
        keep = (src >= 0) | (dst >= 0)
        f = f[keep].reset_index(drop=True)
        f["src"] = src[keep]
        f["dst"] = dst[keep]
    m = trace.metrics
    if len(m):
        kernel = follow(m["kernel"].to_numpy(), id_maps["kernels"])
        keep = kernel >= 0
        m = m[keep].reset_index(drop=True)
        m["kernel"] = kernel[keep]
    d = trace.devices
    if len(d) and (d["rank"].to_numpy() >= 0).any():
        d = d[d["rank"].to_numpy() == rank].reset_index(drop=True)
    meta = dataclasses.replace(trace.meta, ranks=[rank] if rank >= 0 else [])
    return Trace(meta=meta, flows=f, metrics=m, devices=d, **tables)


@dataclasses.dataclass(frozen=True)
class RankSteps:
    """One rank's rows (:func:`rank_subtrace`) and the steps found on them."""

    rank: int
    trace: Trace
    steps: pd.DataFrame


def rank_steps(trace: Trace) -> list[RankSteps]:
    """Each rank's rows and steps (:func:`kviewer.analysis.steps.find_steps` on that rank's rows:
    ``ProfilerStep#N`` ranges, else ``step_N`` annotations / NVTX ranges), in :func:`ranks_of`
    order. Found once where both the step times and the MFU are wanted (``summary --steps``, a
    fleet's rank files): :func:`step_times` and :func:`kviewer.analysis.mfu.mfu` take it."""
    out = []
    for rank in ranks_of(trace):
        sub = rank_subtrace(trace, rank)
        out.append(RankSteps(rank, sub, find_steps(sub, detect=False)))
    return out


def step_times(trace: Trace, per_rank: list[RankSteps] | None = None) -> pd.DataFrame:
    """Every step of every rank (columns :data:`STEP_COLUMNS`): ``dur`` is the host-side step
    range and ``kernel_ns`` / ``busy_ns`` the GPU work launched inside it. ``per_rank``: the
    trace's :func:`rank_steps`, when the caller has them."""
    parts = []
    for r in rank_steps(trace) if per_rank is None else per_rank:
        rank, st = r.rank, r.steps
        if len(st):
            st = st.assign(rank=np.full(len(st), rank, dtype=np.int64))
            parts.append(st[STEP_COLUMNS])
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "int64") for c in STEP_COLUMNS})
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)


def step_spread(trace: Trace | None, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per step, how far apart the ranks' durations are.

    Columns: step, ranks (how many ranks have it), min/median/max_ns, spread_ns (max - min),
    spread_pct (spread as a percentage of min), fastest_rank, slowest_rank (the straggler of that
    step). Sorted by step.
    """
    st = step_times(trace) if steps is None and trace is not None else steps
    assert st is not None, "steps or a trace"
    if not len(st):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("median_ns", "spread_pct") else "int64") for c in SPREAD_COLUMNS})
    g = st.groupby("step", sort=True)["dur"]
    out = pd.DataFrame(
        {
            "ranks": g.size().astype(np.int64),
            "min_ns": g.min().astype(np.int64),
            "median_ns": g.median().astype(np.float64),
            "max_ns": g.max().astype(np.int64),
        }
    )
    out["spread_ns"] = out["max_ns"] - out["min_ns"]
    out["spread_pct"] = np.where(out["min_ns"] > 0, out["spread_ns"] / out["min_ns"].where(out["min_ns"] > 0, 1) * 100.0, np.nan)
    out["fastest_rank"] = st.loc[g.idxmin(), ["step", "rank"]].set_index("step")["rank"].reindex(out.index).astype(np.int64)
    out["slowest_rank"] = st.loc[g.idxmax(), ["step", "rank"]].set_index("step")["rank"].reindex(out.index).astype(np.int64)
    return out.reset_index()[SPREAD_COLUMNS]


def rank_step_stats(trace: Trace | None, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank: steps, mean/median/max step time (host range), mean_busy_ns (GPU busy time of the
    work launched in a step), excess_pct (mean step time over the median of the ranks' means,
    percent) and times_slowest (in how many steps it was the slowest rank).
    Sorted by mean_ns descending: the first row is the straggler."""
    st = step_times(trace) if steps is None and trace is not None else steps
    assert st is not None, "steps or a trace"
    if not len(st):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("mean_ns", "median_ns", "mean_busy_ns", "excess_pct") else "int64") for c in STRAGGLER_COLUMNS})
    g = st.groupby("rank", sort=True)["dur"]
    out = pd.DataFrame(
        {
            "steps": g.size().astype(np.int64),
            "mean_ns": g.mean().astype(np.float64),
            "median_ns": g.median().astype(np.float64),
            "max_ns": g.max().astype(np.int64),
            "mean_busy_ns": st.groupby("rank", sort=True)["busy_ns"].mean().astype(np.float64),
        }
    )
    typical = float(np.median(out["mean_ns"].to_numpy()))
    out["excess_pct"] = (out["mean_ns"] / typical - 1.0) * 100.0 if typical > 0 else np.nan
    spread = step_spread(trace, st)
    # a step that only one rank has says nothing about stragglers
    contested = spread[spread["ranks"] > 1]
    slow_counts = contested["slowest_rank"].value_counts()
    out["times_slowest"] = slow_counts.reindex(out.index, fill_value=0).astype(np.int64)
    out = out.reset_index().sort_values(["mean_ns", "rank"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[STRAGGLER_COLUMNS]


def straggler(trace: Trace, steps: pd.DataFrame | None = None) -> int | None:
    """The rank whose steps take longest on average, or None with fewer than two ranks' steps."""
    stats = rank_step_stats(trace, steps)
    if len(stats) < 2:
        return None
    return int(stats["rank"].iloc[0])
