"""Timeline rows for what the profiler recorded beyond kernels: CUDA graph launches and memory.

Kept apart from :mod:`kviewer.session.tracks` (which calls these two functions) so the shared
track builder only gains a few lines.

* Graph launches: per (rank, device), a group that starts folded: its summary lane has one bar
  per launch drawn at the GPU span of the kernels it ran (first start to last end, or the
  profiler's one activity at graph level), standing for the ``cudaGraphLaunch`` call (its
  cpu_slices row: selecting the bar selects the call, whose flows lead to the kernels); expanded,
  it also shows the graphs' kernels (which stay on their stream lanes too).
* Memory: per device, the allocated total after each allocator event as a step counter, scaled
  to its peak; the label names the peak and when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kviewer import analysis
from kviewer.session.format import format_bytes
from kviewer.session.lod import StepCounter

if TYPE_CHECKING:
    import kviewer.analysis.memory
    from kviewer.core import Trace


def graph_launch_spans(trace: Trace) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(rank, device) -> (cpu_slices ids of the launch calls, GPU start, GPU end), by start."""
    g = trace.graph_launches
    out: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if not len(g):
        return out
    launch = g["launch"].to_numpy()
    ok = launch >= 0
    rank, dev = g["rank"].to_numpy(), g["device"].to_numpy()
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    for r, d in sorted(set(zip(rank[ok].tolist(), dev[ok].tolist()))):
        sel = ok & (rank == r) & (dev == d)
        order = np.argsort(start[sel], kind="stable")
        out[(int(r), int(d))] = (launch[sel][order].astype(np.int64), start[sel][order], end[sel][order])
    return out


def graph_kernels(trace: Trace, rank: int, device: int) -> np.ndarray:
    """Kernel ids a graph launch ran on one (rank, device), in start order."""
    k = trace.kernels
    if not len(k):
        return np.zeros(0, dtype=np.int64)
    sel = (k["graph_launch"].to_numpy() >= 0) & (k["rank"].to_numpy() == rank) & (k["device"].to_numpy() == device)
    return np.flatnonzero(sel).astype(np.int64)


def graph_lane_label(n: int, trace: Trace) -> str:
    graphs = len(np.unique(trace.graph_launches["graph_id"].to_numpy())) if len(trace.graph_launches) else 0
    return f"CUDA graph launches ({n}, {graphs} graph{'s' if graphs != 1 else ''})"


def memory_counters(trace: Trace) -> dict[tuple[int, int], list[tuple[str, StepCounter, float, str, int]]]:
    """(rank, device) -> [(label, counter, scale, tooltip, peak time)] for allocated and reserved memory."""
    m = trace.memory
    out: dict[tuple[int, int], list[tuple[str, StepCounter, float, str, int]]] = {}
    if not len(m):
        return out
    span = trace.span_ns()
    last = span[1] if span else int(m["start"].max())
    dev, rank = m["device"].to_numpy(), m["rank"].to_numpy()
    for r, d in sorted(set(zip(rank.tolist(), dev.tolist()))):
        if d < 0:
            continue
        for column, what in (("total_allocated", "allocated"), ("total_reserved", "reserved")):
            t, v = analysis.memory.memory_series(trace, int(d), column, rank=int(r))
            if not len(t):
                continue
            counter = step_counter(t, v, max(last, int(t.max())) + 1)
            peak = counter.peak
            at = int(t[int(np.argmax(v))])
            label = f"memory {what} (peak {format_bytes(peak)})"
            tip = f"device memory {what} after each allocator event; peak {format_bytes(peak)} at {at:,} ns (trace time)"
            out.setdefault((int(r), int(d)), []).append((label, counter, max(peak, 1.0), tip, at))
    return out


def step_counter(t: np.ndarray, v: np.ndarray, end: int) -> StepCounter:
    """A step function that holds ``v[j]`` from ``t[j]`` to the next time (the last to ``end``);
    of events at one time the last one's value holds."""
    t = np.asarray(t, dtype=np.int64)
    keep = np.r_[t[1:] != t[:-1], True]
    t, v = t[keep], np.asarray(v, dtype=np.float64)[keep]
    t = np.r_[t, max(int(end), int(t[-1]) + 1)]
    v = np.r_[v, 0.0]
    integral = np.r_[0.0, np.cumsum(v[:-1] * np.diff(t).astype(np.float64))]
    return StepCounter(t, v, integral)
