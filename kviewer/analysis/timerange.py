"""What happens inside a time range: the Range panel and ``kviewer summary FILE --range``.

One function, :func:`range_summary`, feeds both, so the window and the command line print the same
numbers. Intervals that reach across an edge of the range are clipped to it: a kernel half inside
counts once, with half its time; a copy half inside counts with half its time and half its bytes
(bytes are spread evenly over a copy's duration), so bandwidth stays bytes / time.

Times are the trace's own (relative to its origin, :attr:`kviewer.core.trace.TraceMeta.clock`), the
times the timeline, SQL and ``--range`` show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kviewer.analysis.gpu_metrics import tensor_check, window_stats
from kviewer.core import Trace

if TYPE_CHECKING:
    from kviewer.analysis.gpu_metrics import TensorCheck

#: cpu_slices categories listed as ranges (NVTX, torch user annotations)
RANGE_CATEGORIES = ("nvtx", "annotation", "gpu_annotation")

KERNEL_COLUMNS = ["name", "count", "total_ns", "avg_ns", "range_pct"]
STREAM_COLUMNS = ["device", "stream", "kernels", "ops", "busy_ns", "idle_ns", "busy_pct"]
COPY_COLUMNS = ["kind", "direction", "count", "bytes", "total_ns", "bandwidth_gbs"]
NVTX_COLUMNS = ["name", "count", "total_ns", "range_pct"]


@dataclass
class RangeSummary:
    """The four tables of one range (trace time, ns)."""

    start: int
    end: int
    kernels: pd.DataFrame
    """by name: count, total_ns (clipped), avg_ns, range_pct (total / range; above 100 when
    streams overlap)"""
    streams: pd.DataFrame
    """per (device, stream): kernels and ops in the range, busy_ns (union of its work), idle_ns, busy_pct"""
    copies: pd.DataFrame
    """by (kind, direction): count, bytes (prorated; NaN when no op of the group knows its size),
    total_ns, bandwidth_gbs (bytes / ns = GB/s over the ops that know their size)"""
    nvtx: pd.DataFrame
    """NVTX / user ranges by name: count, total_ns (clipped), range_pct"""
    gpu_metrics: pd.DataFrame | None = None
    """sampled GPU metrics in the range (:func:`kviewer.analysis.gpu_metrics.window_stats`:
    device, metric, unit, samples, mean, p50, p95, max); None when the trace has no samples"""
    tensor: TensorCheck | None = None
    """:class:`kviewer.analysis.gpu_metrics.TensorCheck` of the range when the trace has samples
    and a SOL table was given (its ``sentence()`` is what the window says when they disagree)"""

    @property
    def duration(self) -> int:
        return self.end - self.start

    def sections(self) -> dict[str, pd.DataFrame]:
        out = {"kernels": self.kernels, "streams": self.streams, "copies": self.copies, "nvtx": self.nvtx}
        if self.gpu_metrics is not None:
            out["gpu_metrics"] = self.gpu_metrics
        return out


def _clipped(start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
    """(inside mask, clipped duration) of intervals against ``[t0, t1]``; a zero-length
    interval inside the range counts."""
    inside = (start < t1) & (end > t0) | ((start == end) & (start >= t0) & (start <= t1))
    dur = np.minimum(end, t1) - np.maximum(start, t0)
    return inside, np.where(inside, np.maximum(dur, 0), 0)


def union_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals as disjoint intervals (starts, ends), in time order; intervals
    that touch are merged."""
    if not len(start):
        return np.zeros(0, dtype=np.asarray(start).dtype), np.zeros(0, dtype=np.asarray(end).dtype)
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    heads = np.flatnonzero(np.r_[True, s[1:] > e[:-1]])
    return s[heads], np.maximum.reduceat(e, heads)


def union_ns(start: np.ndarray, end: np.ndarray) -> int:
    """Total time covered by at least one of the intervals."""
    s, e = union_intervals(start, end)
    return int((e - s).sum())


def _by_name(names: pd.Series, inside: np.ndarray, dur: np.ndarray, span: int, with_avg: bool) -> pd.DataFrame:
    df = pd.DataFrame({"name": names.astype(str).to_numpy()[inside], "dur": dur[inside]})
    g = df.groupby("name", sort=False)["dur"]
    out = pd.DataFrame({"count": g.size().astype(np.int64), "total_ns": g.sum().astype(np.int64)})
    if with_avg:
        out["avg_ns"] = out["total_ns"] / out["count"]
    out["range_pct"] = out["total_ns"] / span * 100.0 if span > 0 else np.nan
    out = out.reset_index()
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[KERNEL_COLUMNS if with_avg else NVTX_COLUMNS]


def range_summary(trace: Trace, start: int, end: int, sol: pd.DataFrame | None = None) -> RangeSummary:
    """Aggregate what lies inside ``[start, end]`` (trace time, ns); see the module doc. ``sol``
    (the trace's SOL table) adds the tensor-pipe check against sampled GPU metrics."""
    t0, t1 = int(start), int(end)
    if t1 <= t0:
        raise ValueError(f"empty range: {t0} .. {t1}")
    span = t1 - t0
    k = trace.kernels
    g = trace.gpu_ops
    c = trace.cpu_slices
    ks, ke = k["start"].to_numpy(dtype=np.int64), k["end"].to_numpy(dtype=np.int64)
    gs, ge = g["start"].to_numpy(dtype=np.int64), g["end"].to_numpy(dtype=np.int64)
    k_in, k_dur = _clipped(ks, ke, t0, t1)
    g_in, g_dur = _clipped(gs, ge, t0, t1)
    kernels = _by_name(k["name"], k_in, k_dur, span, with_avg=True)

    # streams: every stream of the trace, busy = union of its kernels' and ops' clipped times
    rows = []
    keys = sorted(set(zip(k["device"].tolist(), k["stream"].tolist())) | set(zip(g["device"].tolist(), g["stream"].tolist())))
    kd, kst = k["device"].to_numpy(), k["stream"].to_numpy()
    gd, gst = g["device"].to_numpy(), g["stream"].to_numpy()
    for dev, stream in keys:
        km = k_in & (kd == dev) & (kst == stream)
        gm = g_in & (gd == dev) & (gst == stream)
        s = np.concatenate([np.maximum(ks[km], t0), np.maximum(gs[gm], t0)])
        e = np.concatenate([np.minimum(ke[km], t1), np.minimum(ge[gm], t1)])
        busy = union_ns(s, e)
        rows.append((int(dev), int(stream), int(km.sum()), int(gm.sum()), busy, span - busy, busy / span * 100.0))
    streams = pd.DataFrame(rows, columns=STREAM_COLUMNS).astype({"busy_ns": np.int64, "idle_ns": np.int64}) if rows else \
        pd.DataFrame({col: pd.Series(dtype=np.int64) for col in STREAM_COLUMNS})

    # copies and memsets by direction
    full = np.maximum(ge - gs, 0)
    frac = np.where(full > 0, g_dur / np.maximum(full, 1), 1.0)
    nbytes = g["bytes"].to_numpy(dtype=np.float64)
    known = nbytes >= 0
    kinds = g["kind"].astype(str).to_numpy()
    dirs = g["direction"].astype(str).to_numpy()
    cf = pd.DataFrame({"kind": kinds[g_in], "direction": dirs[g_in], "dur": g_dur[g_in],
                       "bytes": np.where(known, nbytes * frac, np.nan)[g_in],
                       "known_dur": np.where(known, g_dur, 0)[g_in]})
    if len(cf):
        grp = cf.groupby(["kind", "direction"], sort=True)
        copies = pd.DataFrame({
            "count": grp.size().astype(np.int64),
            "bytes": grp["bytes"].sum(min_count=1),
            "total_ns": grp["dur"].sum().astype(np.int64),
            "known_ns": grp["known_dur"].sum(),
        }).reset_index()
        copies["bandwidth_gbs"] = np.where(copies["known_ns"] > 0, copies["bytes"] / copies["known_ns"].where(copies["known_ns"] > 0), np.nan)
        copies = copies.sort_values(["total_ns", "kind", "direction"], ascending=[False, True, True], kind="stable")
        copies = copies[COPY_COLUMNS].reset_index(drop=True)
    else:
        copies = pd.DataFrame({"kind": pd.Series(dtype=object), "direction": pd.Series(dtype=object), "count": pd.Series(dtype=np.int64),
                               "bytes": pd.Series(dtype=np.float64), "total_ns": pd.Series(dtype=np.int64), "bandwidth_gbs": pd.Series(dtype=np.float64)})

    cat = c["category"].astype(str).to_numpy()
    is_range = np.isin(cat, RANGE_CATEGORIES)
    c_in, c_dur = _clipped(c["start"].to_numpy(dtype=np.int64), c["end"].to_numpy(dtype=np.int64), t0, t1)
    nvtx = _by_name(c["name"], c_in & is_range, c_dur, span, with_avg=False)
    metrics = None
    tensor = None
    if len(trace.gpu_samples):
        metrics = window_stats(trace, t0, t1)
        if sol is not None:
            tensor = tensor_check(trace, sol, t0, t1)
    return RangeSummary(t0, t1, kernels, streams, copies, nvtx, metrics, tensor)
