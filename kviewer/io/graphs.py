"""CUDA / HIP graph launches: which kernels one ``cudaGraphLaunch`` ran, as a unit of the model.

Every kernel a graph launch runs carries the correlation id of the launch call (CUPTI and
roctracer give the graph's kernels the id of ``cudaGraphLaunch`` / ``hipGraphLaunch``), so the
flows (launch call -> kernel) already say which kernels belong together. :func:`link_graphs`
turns that into the ``graph_launches`` table (one row per launch: its GPU span, the launch call,
its kernel count) and fills the kernels' ``graph_launch`` and ``graph_id`` columns.

The graph id is the profiler's when it names one (Nsight Systems' ``graphId``, given by the
loader in ``kernels.graph_id``); otherwise (Kineto writes none) launches that ran the same kernel
sequence are numbered as one graph, in order of first launch, from 0.

Loaders that record a launch as one activity (Nsight Systems ``--cuda-graph-trace=graph``) hand
those rows to :func:`link_graphs` in ``activities``; they keep ``kernels = -1`` (unknown).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Trace, make_table

#: launch calls that run a whole graph (runtime and driver spellings; _ptsz/_v suffixes allowed)
GRAPH_LAUNCH = re.compile(r"^(cuda|hip|cu)GraphLaunch(_ptsz|_spt|_v\d+)*$")


def graph_launch_calls(names: pd.Series) -> np.ndarray:
    """Bool per cpu_slices row: is it a graph launch call."""
    if not len(names):
        return np.zeros(0, dtype=bool)
    cats = names.cat.categories if hasattr(names, "cat") else pd.Index(pd.unique(names))
    hit = np.array([bool(GRAPH_LAUNCH.match(str(c))) for c in cats] + [False])
    if hasattr(names, "cat"):
        return hit[np.asarray(names.cat.codes)]
    return np.asarray(names.isin([c for c, h in zip(cats, hit) if h]))


def link_graphs(trace: Trace, activities: pd.DataFrame | None = None) -> Trace:
    """Fill ``trace.graph_launches`` and the kernels' graph columns (in place; returns the trace)."""
    k, c, f = trace.kernels, trace.cpu_slices, trace.flows
    n_k = len(k)
    launch_of = np.full(n_k, -1, dtype=np.int64)
    if len(f) and len(c):
        fk = f[f["dst_table"] == "kernels"]
        dst = fk["dst"].to_numpy()
        src = fk["src"].to_numpy()
        ok = (dst >= 0) & (dst < n_k) & (src >= 0) & (src < len(c))
        launch_of[dst[ok]] = src[ok]
    is_graph_call = graph_launch_calls(c["name"]) if len(c) else np.zeros(0, dtype=bool)
    in_graph = launch_of >= 0
    in_graph[in_graph] = is_graph_call[launch_of[in_graph]]
    given_gid = k["graph_id"].to_numpy() if n_k else np.zeros(0, dtype=np.int64)
    # a kernel the profiler put in a graph (graphNodeId) whose launch call is missing still ran in one
    node = k["graph_node"].to_numpy() if n_k else np.zeros(0, dtype=np.int64)
    corr = k["correlation"].to_numpy() if n_k else np.zeros(0, dtype=np.int64)
    in_graph |= ((node > 0) | (given_gid >= 0)) & (corr >= 0)

    rows = np.flatnonzero(in_graph)
    parts: list[dict[str, np.ndarray]] = []
    k_launch = np.full(n_k, -1, dtype=np.int64)
    k_gid = given_gid.copy() if n_k else np.zeros(0, dtype=np.int64)
    if len(rows):
        # one launch = the kernels sharing a correlation id (and rank: ranks merged into one trace)
        rank = k["rank"].to_numpy()[rows]
        key = pd.MultiIndex.from_arrays([rank, corr[rows]])
        grp, uniq = pd.factorize(key)
        n_l = len(uniq)
        start = k["start"].to_numpy()[rows]
        end = k["end"].to_numpy()[rows]
        l_start = np.full(n_l, np.iinfo(np.int64).max)
        np.minimum.at(l_start, grp, start)
        l_end = np.full(n_l, np.iinfo(np.int64).min)
        np.maximum.at(l_end, grp, end)
        count = np.bincount(grp, minlength=n_l)
        first = np.full(n_l, -1, dtype=np.int64)
        order = np.lexsort((start, grp))  # by launch, then start: the first kernel of each launch first
        g_sorted = grp[order]
        heads = np.r_[True, g_sorted[1:] != g_sorted[:-1]]
        first[g_sorted[heads]] = rows[order[heads]]
        calls = launch_of[first]
        # graph id: the profiler's, else one per distinct kernel sequence
        prof = given_gid[first]
        gid = prof.copy()
        need = gid < 0
        if need.any():
            names = np.asarray(k["name"].cat.codes)[rows]
            seq: dict[tuple[int, ...], int] = {}
            by_launch: list[list[int]] = [[] for _ in range(n_l)]
            for g_i, nm in zip(g_sorted.tolist(), names[order].tolist()):
                by_launch[g_i].append(nm)
            launch_order = np.argsort(l_start, kind="stable")
            base = int(prof.max()) + 1 if (~need).any() else 0
            for li in launch_order.tolist():
                if not need[li]:
                    continue
                sig = tuple(by_launch[li])
                if sig not in seq:
                    seq[sig] = base + len(seq)
                gid[li] = seq[sig]
        has_call = calls >= 0
        call = np.maximum(calls, 0)
        parts.append({
            "graph_id": gid, "start": l_start, "end": l_end,
            "device": k["device"].to_numpy()[first], "stream": k["stream"].to_numpy()[first],
            "rank": k["rank"].to_numpy()[first],
            "pid": np.where(has_call, c["pid"].to_numpy()[call] if len(c) else -1, k["pid"].to_numpy()[first]),
            "tid": np.where(has_call, c["tid"].to_numpy()[call] if len(c) else -1, k["tid"].to_numpy()[first]),
            "correlation": corr[first], "launch": calls,
            "launch_ns": np.where(has_call, c["dur"].to_numpy()[call] if len(c) else -1, -1),
            "kernels": count.astype(np.int64), "level": np.full(n_l, "node", dtype=object),
            "_grp_first": first,
        })  # fmt: skip
    if activities is not None and len(activities):
        a = activities
        acorr = a["correlation"].to_numpy()
        call = _call_by_correlation(c, acorr)
        has_call = call >= 0
        cc = np.maximum(call, 0)
        parts.append({
            "graph_id": a["graph_id"].to_numpy(), "start": a["start"].to_numpy(), "end": a["end"].to_numpy(),
            "device": a["device"].to_numpy(), "stream": a["stream"].to_numpy(),
            "rank": a["rank"].to_numpy() if "rank" in a else np.full(len(a), -1),
            "pid": np.where(has_call, c["pid"].to_numpy()[cc] if len(c) else -1, a["pid"].to_numpy()),
            "tid": np.where(has_call, c["tid"].to_numpy()[cc] if len(c) else -1, -1),
            "correlation": acorr, "launch": call,
            "launch_ns": np.where(has_call, c["dur"].to_numpy()[cc] if len(c) else -1, -1),
            "kernels": np.full(len(a), -1, dtype=np.int64), "level": np.full(len(a), "graph", dtype=object),
            "_grp_first": np.full(len(a), -1, dtype=np.int64),
        })  # fmt: skip
    if not parts:
        if n_k:
            trace.kernels["graph_launch"] = k_launch
        trace.graph_launches = make_table("graph_launches", 0)
        return trace
    cols = {key: np.concatenate([p[key] for p in parts]) for key in parts[0] if key != "_grp_first"}
    order = np.argsort(cols["start"], kind="stable")
    given: dict[str, Any] = {key: v[order] for key, v in cols.items()}
    given["level"] = pd.Categorical(given["level"], categories=["node", "graph"])
    table = make_table("graph_launches", len(order), given)
    # kernels -> their launch's id (position after sorting)
    if len(rows):
        new_id = np.empty(len(order), dtype=np.int64)
        new_id[order] = np.arange(len(order), dtype=np.int64)
        k_launch[rows] = new_id[grp]
        k_gid[rows] = cols["graph_id"][grp]
    trace.kernels["graph_launch"] = k_launch
    trace.kernels["graph_id"] = k_gid
    trace.graph_launches = table
    return trace


def _call_by_correlation(c: pd.DataFrame, corr: np.ndarray) -> np.ndarray:
    """cpu_slices id of the graph launch call with each correlation id, or -1."""
    if not len(c) or not len(corr):
        return np.full(len(corr), -1, dtype=np.int64)
    is_call = graph_launch_calls(c["name"])
    ids = np.flatnonzero(is_call)
    cc = c["correlation"].to_numpy()[ids]
    order = np.argsort(cc, kind="stable")
    cc, ids = cc[order], ids[order]
    if not len(cc):
        return np.full(len(corr), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(cc, corr), len(cc) - 1)
    return np.where((corr >= 0) & (cc[pos] == corr), ids[pos], -1)
