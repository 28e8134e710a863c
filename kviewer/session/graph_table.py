"""The kernel table grouped by CUDA / HIP graph (no Qt): one row per graph of every open trace,
plus one row for the kernels outside graphs, so the rows still cover every kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kviewer import analysis
from kviewer.session.table_data import Col, TableData, _trace_col

if TYPE_CHECKING:
    import kviewer.analysis.graphs
    from kviewer.session.tracks import TraceTracks

#: the label of the row of kernels that no graph launch ran
NOT_IN_GRAPH = "(not in a graph)"


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def graph_grouped_data(traces: Sequence[TraceTracks]) -> TableData:
    """One row per graph that ran kernels, with what ``kviewer graphs`` says of it
    (:func:`kviewer.analysis.graphs.graph_summary`: launches, median kernels per launch, median GPU
    span and launch call), and one row of the kernels outside graphs."""
    labels: list[str] = []
    keys: list[int] = []
    members: list[np.ndarray] = []
    launches: list[int] = []
    per_launch: list[float] = []
    count: list[int] = []
    total: list[float] = []
    span_med: list[float] = []
    cpu_med: list[float] = []
    pos: list[int] = []
    for ti, t in enumerate(traces):
        k = t.trace.kernels
        if not len(k):
            continue
        summary = {info.graph_id: info for info in analysis.graphs.graph_summary(t.trace).graphs}
        gid = k["graph_id"].to_numpy()
        gl = k["graph_launch"].to_numpy()
        dur = k["dur"].to_numpy()
        in_graph = gl >= 0
        for graph in np.unique(gid[in_graph]).tolist():
            ids = np.flatnonzero(in_graph & (gid == graph))
            info = summary.get(int(graph))
            labels.append(f"graph {graph}")
            launches.append(info.launches if info is not None else 0)
            per_launch.append(_nan(info.kernels_per_launch) if info is not None else float("nan"))
            span_med.append(_nan(info.gpu_ns_per_launch_median) if info is not None else float("nan"))
            cpu_med.append(_nan(info.cpu_launch_ns_median) if info is not None else float("nan"))
            members.append(ids)
            count.append(len(ids))
            total.append(float(dur[ids].sum()))
            keys.append(t.key)
            pos.append(ti)
        rest = np.flatnonzero(~in_graph)
        if len(rest):
            labels.append(NOT_IN_GRAPH)
            launches.append(-1)
            per_launch.append(float("nan"))
            span_med.append(float("nan"))
            cpu_med.append(float("nan"))
            members.append(rest)
            count.append(len(rest))
            total.append(float(dur[rest].sum()))
            keys.append(t.key)
            pos.append(ti)
    cats = sorted(set(labels))
    where = {c: i for i, c in enumerate(cats)}
    cols: list[Col] = []
    if len(traces) > 1:
        cols.append(_trace_col(traces, np.array(pos, dtype=np.int64)))
    cols.append(Col("graph", "graph", "text", np.array([where[c] for c in labels], dtype=np.int64), cats))
    cols.append(Col("launches", "launches", "int", np.array(launches, dtype=np.int64), missing_int=True))
    cols.append(Col("count", "kernels", "int", np.array(count, dtype=np.int64)))
    cols.append(Col("per_launch", "kernels / launch (median)", "number", np.array(per_launch, dtype=np.float64)))
    cols.append(Col("total", "kernel time", "time", np.array(total, dtype=np.float64)))
    cols.append(Col("span_med", "GPU span / launch (median)", "time", np.array(span_med, dtype=np.float64)))
    cols.append(Col("cpu_med", "launch call (median)", "time", np.array(cpu_med, dtype=np.float64)))
    trace_key = np.array(keys, dtype=np.int64)
    return TableData(cols, trace_key, np.full(len(trace_key), -1, dtype=np.int64), members)
