"""CUDA / HIP graphs: per graph, how often it was launched, what it ran and what a launch costs.

Reads the ``graph_launches`` table and the kernels' graph columns (filled by the loaders through
:mod:`kviewer.io.graphs`). A graph's kernels stay ordinary kernels everywhere else (speed of
light, fusion, compare see a captured GEMM as a GEMM); this only groups them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Trace

#: what :func:`graph_summary` reads of a trace
GRAPHS_READS = {"graph_launches": (), "kernels": ("name", "short_name", "dur", "graph_id", "graph_launch", "start")}


@dataclass
class GraphKernel:
    name: str
    short_name: str
    count: int
    """launches of this kernel over all launches of the graph"""
    total_ns: int
    med_ns: float


@dataclass
class GraphInfo:
    graph_id: int
    launches: int
    kernels_per_launch: float | None
    """median kernels per launch; None when the profiler recorded launches as single activities"""
    gpu_ns_per_launch_median: float | None
    """median GPU span of a launch (first kernel start to last kernel end)"""
    cpu_launch_ns_median: float | None
    """median duration of the launch call (cudaGraphLaunch) on the CPU"""
    gpu_busy_ns_per_launch_median: float | None
    """median kernel time per launch (sum of its kernels' durations)"""
    level: str
    kernels: list[GraphKernel] = field(default_factory=list)


@dataclass
class GraphsResult:
    graphs: list[GraphInfo]
    kernels_in_graphs: int
    kernels_total: int

    def to_json(self) -> dict[str, Any]:
        return {"graphs": [asdict(g) for g in self.graphs], "kernels_in_graphs": self.kernels_in_graphs,
                "kernels_total": self.kernels_total}


def _median(values: np.ndarray) -> float | None:
    values = values[values >= 0]
    return float(np.median(values)) if len(values) else None


def graph_summary(trace: Trace) -> GraphsResult:
    g = trace.graph_launches
    k = trace.kernels
    graphs: list[GraphInfo] = []
    gl = k["graph_launch"].to_numpy() if len(k) else np.zeros(0, dtype=np.int64)
    in_graph = gl >= 0
    if not len(g):
        return GraphsResult(graphs, int(in_graph.sum()), len(k))
    gid = g["graph_id"].to_numpy()
    dur = g["dur"].to_numpy()
    launch_ns = g["launch_ns"].to_numpy()
    count = g["kernels"].to_numpy()
    level = g["level"].astype(str).to_numpy()
    busy = np.zeros(len(g), dtype=np.int64)
    if in_graph.any():
        np.add.at(busy, gl[in_graph], k["dur"].to_numpy()[in_graph])
    k_gid = k["graph_id"].to_numpy() if len(k) else np.zeros(0, dtype=np.int64)
    for graph in np.unique(gid).tolist():
        sel = gid == graph
        node = sel & (level == "node")
        info = GraphInfo(
            graph_id=int(graph), launches=int(sel.sum()),
            kernels_per_launch=_median(count[node].astype(np.float64)) if node.any() else None,
            gpu_ns_per_launch_median=_median(dur[sel].astype(np.float64)),
            cpu_launch_ns_median=_median(launch_ns[sel].astype(np.float64)),
            gpu_busy_ns_per_launch_median=_median(busy[node].astype(np.float64)) if node.any() else None,
            level="/".join(sorted(set(level[sel].tolist()))),
        )  # fmt: skip
        rows = np.flatnonzero(in_graph & (k_gid == graph))
        if len(rows):
            # per kernel name, in order of first run (numpy: a graph holds few names, many launches)
            codes = np.asarray(k["name"].cat.codes)[rows]
            kdur = k["dur"].to_numpy()[rows]
            order = np.argsort(k["start"].to_numpy()[rows], kind="stable")
            uniq, first = np.unique(codes[order], return_index=True)
            cats = k["name"].cat.categories
            short = k["short_name"].astype(str).to_numpy()[rows]
            for u in uniq[np.argsort(first, kind="stable")].tolist():
                sel = codes == u
                d = kdur[sel]
                info.kernels.append(GraphKernel(str(cats[u]), str(short[np.flatnonzero(sel)[0]]), int(sel.sum()), int(d.sum()),
                                                float(np.median(d))))
        graphs.append(info)
    return GraphsResult(graphs, int(in_graph.sum()), len(k))


def graphs_frame(result: GraphsResult) -> pd.DataFrame:
    """One row per graph (the table / CSV form)."""
    cols = ["graph_id", "launches", "kernels_per_launch", "gpu_ns_per_launch_median", "gpu_busy_ns_per_launch_median",
            "cpu_launch_ns_median", "level", "distinct_kernels"]
    return pd.DataFrame(
        [[g.graph_id, g.launches, g.kernels_per_launch, g.gpu_ns_per_launch_median, g.gpu_busy_ns_per_launch_median,
          g.cpu_launch_ns_median, g.level, len(g.kernels)] for g in result.graphs],
        columns=cols,
    )  # fmt: skip
