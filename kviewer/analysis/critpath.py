"""The critical path of every step, and what each nanosecond of it was spent on.

A step is a ``ProfilerStep#N`` range (Kineto), a ``step N`` NVTX / annotation range (nsys, user
annotations; :func:`kviewer.analysis.steps.find_steps`), a range the user names, else the whole
trace. A step *completes* at the later of its marker's end and the end of the last GPU op launched
inside the marker (the GPU often runs behind the host); its window runs from the previous step's
completion (the first step: its marker's start) to its own, so the windows tile the run and a
step's time is the time per iteration (see :func:`step_bounds`).

The path is walked backwards through the dependency graph (:mod:`kviewer.analysis.depgraph`) from
what ends the step (its last GPU op, or the host marker's end when the host finishes later),
always following the edge that bound each node's start: a GPU op's launch, its stream
predecessor, another stream it waited for; a host call's predecessor on its thread, or the GPU op
a synchronising call waited for. Every step of the walk is contiguous in time, so the path tiles
the step window exactly and its breakdown sums to the window:

``gpu_kernel``  kernels (not communication) on the path
``memcpy``      copies and memsets
``comm``        communication kernels (NCCL / RCCL); with several ranks open, the part of a
                collective after the last rank joined it (the path then crosses to that rank:
                what made it late is on the path, and the early ranks' wait is reported beside
                the breakdown as ``comm_wait`` per rank)
``launch``      launch calls and the launch latency until the GPU op starts (CPU-bound issue)
``cpu``         host work between API calls, and API calls that do not enqueue or wait
``sync``        host calls waiting for the GPU (the part after the awaited op ended, and
                non-blocking syncs)
``idle``        gaps between GPU ops the graph does not explain, and time before any recorded node
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from kviewer import analysis
from kviewer.analysis.depgraph import (
    B_CROSS,
    B_LAUNCH,
    B_STREAM,
    B_WAIT,
    E_COLL,
    G_COMM,
    G_KERNEL,
    G_MEMCPY,
    H_LAUNCH,
    H_SYNC,
    DepGraph,
    Replay,
    build_graph,
    map_host_time,
    replay,
)
from kviewer.analysis.steps import GPU_MARKER, find_steps, steps_of_gpu_ops
from kviewer.core import Trace
from kviewer.errors import AnalysisError

CLASSES = ("gpu_kernel", "memcpy", "launch", "cpu", "sync", "comm", "idle")
#: what :attr:`StepPath.unlaunched_ns` counts, as the CLI and the window say it
UNLAUNCHED = ("GPU work whose launch the trace does not hold (queued by an earlier step before the profiler started, "
              "or launched by an unrecorded thread)")
C_GPU, C_MEMCPY, C_LAUNCH, C_CPU, C_SYNC, C_COMM, C_IDLE = range(7)
_G_CLASS = {G_KERNEL: C_GPU, G_COMM: C_COMM, G_MEMCPY: C_MEMCPY}
_H_CLASS = {H_LAUNCH: C_LAUNCH, H_SYNC: C_SYNC}
#: segment lanes: a GPU op's stream, a host thread, or none (an unexplained gap)
LANE_GPU, LANE_HOST, LANE_NONE = 0, 1, 2
#: host work between API calls: ``node`` is a host call next to it (on its thread)
LANE_GAP = 3

SEGMENT_COLUMNS = ["start", "end", "cls", "lane", "node", "name"]


@dataclass(frozen=True)
class StepWindow:
    """One step: its marker and the GPU nodes launched inside it."""

    name: str
    marker_start: int
    marker_end: int
    thread: int
    """host thread index (in the graph) of the marker; -1 for a GPU-side marker or the whole trace"""
    gpu: np.ndarray
    """GPU node indices of the step"""

    def window(self, graph: DepGraph, rep: Replay) -> tuple[int, int]:
        """(marker start, completion) of the step in a replay (the measured run when nothing
        was changed): the completion is the later of the marker's end and its last GPU op's end."""
        if self.thread >= 0:
            lo = map_host_time(graph, rep, self.thread, self.marker_start)
            hi = map_host_time(graph, rep, self.thread, self.marker_end)
        else:
            lo, hi = self.marker_start, self.marker_end
        if len(self.gpu):
            hi = max(hi, int(rep.g_end[self.gpu].max()))
        return lo, hi


def step_bounds(graph: DepGraph, rep: Replay, windows: list[StepWindow]) -> list[tuple[int, int]]:
    """Each step's window in a replay: from the previous step's completion (the first step: its
    marker's start) to its own completion, so the steps tile the run and a step's time is the
    time per iteration, whether the host or the GPU is behind."""
    out: list[tuple[int, int]] = []
    prev: int | None = None
    for win in windows:
        lo, hi = win.window(graph, rep)
        if prev is not None:
            lo = min(prev, hi)
        out.append((lo, hi))
        prev = hi
    return out


@dataclass(frozen=True)
class StepPath:
    """The critical path of one step (times in the replay it was walked on)."""

    name: str
    start: int
    end: int
    breakdown: dict[str, int]
    top: list[dict[str, object]]
    columns: dict[str, np.ndarray] = field(repr=False, compare=False)
    """the path's segments, a column each (:data:`SEGMENT_COLUMNS`); :attr:`segments` as a frame"""
    comm_wait: dict[int, int] = field(default_factory=dict)
    """rank -> ns its collective kernels of the step spent waiting for another rank to join
    (several ranks open); not on the path, which crosses to the late rank"""
    unlaunched_ns: int = 0
    """ns of the path on GPU work whose launch call the trace does not hold: work an earlier step
    queued before the profiler started (the first step of a GPU-bound program waits for it), or
    launched by a thread the profiler did not record"""

    @cached_property
    def segments(self) -> pd.DataFrame:
        """The path's segments (:data:`SEGMENT_COLUMNS`), latest first; made when first read (the
        overlay reads them, the printed path does not)."""
        return pd.DataFrame(self.columns, columns=SEGMENT_COLUMNS)

    @property
    def measured_ns(self) -> int:
        return self.end - self.start

    @property
    def critical_path_ns(self) -> int:
        return int(sum(self.breakdown.values()))

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "measured_ns": self.measured_ns, "critical_path_ns": self.critical_path_ns,
                                  "breakdown": dict(self.breakdown), "top": list(self.top)}
        if self.comm_wait:
            out["comm_wait"] = [{"rank": r, "ns": ns} for r, ns in sorted(self.comm_wait.items())]
        if self.unlaunched_ns:
            out["unlaunched_ns"] = self.unlaunched_ns
        return out


@dataclass(frozen=True)
class CritPathResult:
    """Critical paths of every step of a trace, with the graph they were walked on."""

    steps: list[StepPath]
    graph: DepGraph = field(repr=False)
    windows: list[StepWindow] = field(repr=False)
    step_source: str
    """ProfilerStep | nvtx | annotation | named | trace (the whole trace as one step)"""
    measured: Replay | None = field(default=None, repr=False)
    """the measured run as a replay (what the paths were walked on)"""

    def unlinked_launches(self) -> dict[str, int]:
        """Kernel/graph launch calls whose GPU work the trace does not hold, by API name (e.g.
        ``cudaGraphLaunch`` in an Nsight Systems export made with ``--cuda-graph-trace=graph``):
        that GPU time is missing from the paths, and the CLI says so."""
        g = self.graph
        linked = np.zeros(g.n_host, dtype=bool)
        linked[g.g_launch[g.g_launch >= 0]] = True
        names = g.h_name.astype(str)
        launch = (g.h_class == H_LAUNCH) & np.char.find(names.astype(str), "Launch").__ge__(0) & ~linked
        # inside the steps only: launches while a stream is captured into a graph run nothing
        inside = np.zeros(g.n_host, dtype=bool)
        for w in self.windows:
            inside |= (g.h_start >= w.marker_start) & (g.h_start <= w.marker_end) & ((g.h_thread == w.thread) | (w.thread < 0))
        launch &= inside
        got: dict[str, int] = {}
        for n in names[launch].tolist():
            got[n] = got.get(n, 0) + 1
        return got

    def as_dict(self) -> dict[str, object]:
        return {"steps": [s.as_dict() for s in self.steps], "step_source": self.step_source}


def check_graph(trace: Trace, graph: DepGraph) -> None:
    """Raise AnalysisError naming what the trace lacks for a dependency graph."""
    path = trace.meta.path
    if not len(trace.kernels):
        raise AnalysisError(f"{path}: the trace has no kernels: there is no GPU work to put on a critical path")
    if not graph.n_host or not (graph.g_launch >= 0).any():
        raise AnalysisError(f"{path}: the trace has no kernel launch calls (CUDA/HIP runtime or driver API) linked to its "
                            "kernels: a critical path needs them (record the API with the kernels: torch.profiler "
                            "activities=[CPU, CUDA], nsys --trace=cuda, rocprofv3 --hip-trace --kernel-trace in one run)")


def step_windows(trace: Trace, graph: DepGraph, step: str | None = None) -> tuple[list[StepWindow], str]:
    """The steps of a trace as windows over the graph, and where they came from.

    ``step`` names a range (any host range category) to use as the step instead of the
    markers :func:`find_steps` recognises.
    """
    # here, not at the top: the step rules (and the kernel name rules they import) are not needed
    # to replay or walk a graph read back from the cache (issue 24)
    c = trace.cpu_slices
    if step is not None:
        cat = c["category"].astype(str)
        named = (c["name"].astype(str) == step) & ~cat.isin(["runtime", "driver", "sync"])
        # a host range and its GPU-side projection (Kineto gpu_user_annotation): the host one
        sel = c[named & (cat != "gpu_annotation")] if (named & (cat != "gpu_annotation")).any() else c[named]
        if not len(sel):
            raise AnalysisError(f"{trace.meta.path}: no range named {step!r} to use as the step")
        marks = pd.DataFrame({"name": sel["name"].astype(str).to_numpy(), "start": sel["start"].to_numpy(np.int64),
                              "end": sel["end"].to_numpy(np.int64), "source": "named",
                              "pid": sel["pid"].to_numpy(np.int64), "tid": sel["tid"].to_numpy(np.int64)})
        marks = marks.sort_values("start", kind="stable").reset_index(drop=True)
        source = "named"
    else:
        found = find_steps(trace, detect=False)
        if not len(found):
            span = trace.span_ns() or (0, 0)
            return [StepWindow("trace", span[0], span[0], -1, np.arange(graph.n_gpu))], "trace"
        rows = _marker_rows(c, found)
        marks = pd.DataFrame({"name": found["name"].astype(str).to_numpy(), "start": found["start"].to_numpy(np.int64),
                              "end": found["end"].to_numpy(np.int64), "source": found["source"].to_numpy(),
                              "pid": c["pid"].to_numpy(np.int64)[rows], "tid": c["tid"].to_numpy(np.int64)[rows]})
        source = str(found["source"].iloc[0])
    # each GPU op belongs to the step its launching call started in (steps.steps_of_gpu_ops)
    ms = marks["start"].to_numpy(np.int64)
    me = marks["end"].to_numpy(np.int64)
    gpu_marker = source == GPU_MARKER
    linked = graph.g_launch >= 0
    launch_t = np.where(linked, graph.h_start[np.maximum(graph.g_launch, 0)] if graph.n_host else 0, graph.g_start)
    step_of = steps_of_gpu_ops(ms, me, launch_t, linked, graph.g_start, graph.g_stream, on_gpu=gpu_marker)
    if not gpu_marker and graph.n_host and len(graph.threads) > 1:
        # several processes (ranks merged into one trace): a step holds its own process's work
        thread_pid = np.asarray([p for p, _ in graph.threads], dtype=np.int64)
        op_pid = np.where(graph.g_launch >= 0, thread_pid[graph.h_thread[np.maximum(graph.g_launch, 0)]], -1)
        mark_pid = marks["pid"].to_numpy(np.int64)
        other = (step_of >= 0) & (op_pid >= 0) & (op_pid != mark_pid[np.maximum(step_of, 0)])
        step_of = np.where(other, -1, step_of)
    out = []
    for r in range(len(marks)):
        th = -1 if gpu_marker else graph.thread_index(int(marks["pid"].iloc[r]), int(marks["tid"].iloc[r]))
        out.append(StepWindow(str(marks["name"].iloc[r]), int(ms[r]), int(me[r]), th, np.flatnonzero(step_of == r)))
    return out, source


def _marker_rows(c: pd.DataFrame, found: pd.DataFrame) -> np.ndarray:
    """cpu_slices row of each step marker (by name and start; the names tested once, as codes)."""
    names = c["name"].astype("category")
    wanted = set(found["name"].astype(str))
    hit = np.array([str(x) in wanted for x in names.cat.categories] + [False])[names.cat.codes.to_numpy()]
    rows = np.flatnonzero(hit)
    key = pd.MultiIndex.from_arrays([names.to_numpy()[rows].astype(str), c["start"].to_numpy(np.int64)[rows]])
    want = pd.MultiIndex.from_arrays([found["name"].astype(str).to_numpy(), found["start"].to_numpy(np.int64)])
    first = ~key.duplicated()
    idx = key[first].get_indexer(want)
    return rows[np.flatnonzero(first)][np.maximum(idx, 0)]


def walk_lists(graph: DepGraph, rep: Replay, g_launch: np.ndarray | None = None) -> dict[str, list[int]]:
    """The arrays a walk reads, as Python lists: build them once per (graph, replay, launch
    edges) and pass them to every :func:`walk` of that replay."""
    return {
        "launch": (g_launch if g_launch is not None else graph.g_launch).tolist(),
        "gs": rep.g_start.tolist(), "ge": rep.g_end.tolist(), "gb": rep.g_bind.tolist(),
        "hs": rep.h_start.tolist(), "he": rep.h_end.tolist(), "hb": rep.h_bind.tolist(),
        "g_prev": graph.g_prev.tolist(), "g_cross": graph.g_cross.tolist(), "g_cls": graph.g_class.tolist(),
        "h_prev": graph.h_prev.tolist(), "h_wait": graph.h_wait.tolist(), "h_cls": graph.h_class.tolist(),
        "geb": rep.g_ebind.tolist() if len(rep.g_ebind) else [0] * graph.n_gpu,
        "c_group": graph.c_group.tolist() if len(graph.c_group) else [-1] * graph.n_gpu,
        "c_arrive": rep.c_arrive.tolist(), "c_last": rep.c_last.tolist(),
        "hsb": rep.h_sbind.tolist() if len(rep.h_sbind) == graph.n_host else [0] * graph.n_host,
        "h_xdep": graph.h_xdep.tolist() if len(graph.h_xdep) == graph.n_host else [-1] * graph.n_host,
        "h_xtail": graph.h_xtail.tolist() if len(graph.h_xtail) == graph.n_host else [0] * graph.n_host,
    }


def walk(graph: DepGraph, rep: Replay, win: StepWindow, bounds: tuple[int, int],
         g_launch: np.ndarray | None = None, lists: dict[str, list[int]] | None = None) -> dict[str, np.ndarray]:
    """The critical path of one step in a replay over ``bounds`` (:func:`step_bounds`): its
    segments (columns start, end, cls, lane, node), latest first. ``lists``: the replay's
    :func:`walk_lists` (built here when not given; build them once when walking many steps)."""
    lo, hi = bounds
    lists = lists if lists is not None else walk_lists(graph, rep, g_launch)
    launch, gs, ge, gb, hs, he, hb = lists["launch"], lists["gs"], lists["ge"], lists["gb"], lists["hs"], lists["he"], lists["hb"]
    g_prev, g_cross, g_cls = lists["g_prev"], lists["g_cross"], lists["g_cls"]
    h_prev, h_wait, h_cls = lists["h_prev"], lists["h_wait"], lists["h_cls"]
    hsb, h_xdep, h_xtail = lists["hsb"], lists["h_xdep"], lists["h_xtail"]
    geb, c_group, c_arrive, c_last = lists["geb"], lists["c_group"], lists["c_arrive"], lists["c_last"]
    seg_s: list[int] = []
    seg_e: list[int] = []
    seg_c: list[int] = []
    seg_l: list[int] = []
    seg_n: list[int] = []

    def add(a: int, b: int, cls: int, lane: int, node: int) -> None:
        a = max(a, lo)
        if b > a:
            seg_s.append(a)
            seg_e.append(b)
            seg_c.append(cls)
            seg_l.append(lane)
            seg_n.append(node)

    t = hi
    # what ends the step: its last GPU op, or the host marker's end when the host is later
    state, node = "none", -1
    if len(win.gpu):
        last = int(win.gpu[np.argmax(rep.g_end[win.gpu])])
        if ge[last] >= hi:
            state, node = "g", last
    if state == "none" and win.thread >= 0:
        j = graph.host_node_at(win.thread, hi, rep.h_start)
        if j >= 0:
            if he[j] <= hi:
                add(he[j], hi, C_CPU, LANE_GAP, j)
                t = he[j]
            state, node = "h", j
    guard = 4 * (graph.n_host + graph.n_gpu) + 16
    while t > lo and guard > 0:
        guard -= 1
        if state == "g":
            i = node
            if geb[i] == E_COLL and c_group[i] >= 0 and c_last[c_group[i]] >= 0:
                # it waited for the last rank to join: the transfer after that is comm, and the
                # path goes on from the start of that rank's part
                c = c_group[i]
                add(c_arrive[c], min(t, ge[i]), C_COMM, LANE_GPU, i)
                t = min(t, c_arrive[c])
                node = c_last[c]
                continue
            add(gs[i], min(t, ge[i]), _G_CLASS[g_cls[i]], LANE_GPU, i)
            t = min(t, gs[i])
            b = gb[i]
            if b == B_LAUNCH and launch[i] >= 0:
                L = launch[i]
                add(hs[L], t, C_LAUNCH, LANE_HOST, L)
                t = min(t, hs[L])
                state, node = "hstart", L
            elif b == B_STREAM and g_prev[i] >= 0:
                p = g_prev[i]
                add(ge[p], t, C_IDLE, LANE_GPU, i)
                t = min(t, ge[p])
                node = p
            elif b == B_CROSS and g_cross[i] >= 0:
                x = g_cross[i]
                add(ge[x], t, C_IDLE, LANE_GPU, i)
                t = min(t, ge[x])
                node = x
            else:
                add(lo, t, C_IDLE, LANE_NONE, -1)
                t = lo
        elif state == "h":
            j = node
            if hb[j] == B_WAIT and h_wait[j] >= 0:
                w = h_wait[j]
                add(ge[w], t, C_SYNC, LANE_HOST, j)
                t = min(t, ge[w])
                state, node = "g", w
            else:
                add(hs[j], t, _H_CLASS.get(h_cls[j], C_CPU), LANE_HOST, j)
                t = min(t, hs[j])
                state = "hstart"
        else:  # "hstart": at the start of host node `node`: the host work before it
            p = h_prev[node]
            if hsb[node] == 1 and h_xdep[node] >= 0:
                # it waited for another thread's turn: this thread's work before the call and the
                # handoff, then the other thread's work after its last call (named on its thread)
                x = h_xdep[node]
                mid = min(he[x] + h_xtail[node], t)
                add(mid, t, C_CPU, LANE_GAP, node)
                add(he[x], mid, C_CPU, LANE_GAP, x)
                t = min(t, he[x])
                state, node = "h", x
            elif p < 0:
                add(lo, t, C_CPU, LANE_GAP, node)
                t = lo
            else:
                add(he[p], t, C_CPU, LANE_GAP, node)
                t = min(t, he[p])
                state, node = "h", p
    if t > lo:  # the guard ran out (never expected): the rest is unexplained
        add(lo, t, C_IDLE, LANE_NONE, -1)
    return {"start": np.asarray(seg_s, np.int64), "end": np.asarray(seg_e, np.int64), "cls": np.asarray(seg_c, np.int8),
            "lane": np.asarray(seg_l, np.int8), "node": np.asarray(seg_n, np.int64)}


def _name_segments(graph: DepGraph, lane: np.ndarray, node: np.ndarray, cls: np.ndarray, op_names: np.ndarray | None = None) -> np.ndarray:
    names = np.full(len(lane), "", dtype=object)
    gpu = (lane == LANE_GPU) & (cls != C_IDLE)
    names[gpu] = graph.g_name[node[gpu]]
    host = (lane == LANE_HOST) & (node >= 0)
    names[host] = graph.h_name[node[host]]
    gap = lane == LANE_GAP
    names[gap] = "host work outside recorded ranges" if op_names is not None else "host work between API calls"
    if op_names is not None:
        named = gap & (op_names != "")
        names[named] = op_names[named]
    names[(cls == C_IDLE) & (lane == LANE_GPU)] = "GPU gap between ops (stream or cross-stream wait)"
    names[(cls == C_IDLE) & (lane == LANE_NONE)] = "unexplained (no dependency recorded)"
    return names


def summarise(name: str, lo: int, hi: int, segs: pd.DataFrame | dict[str, np.ndarray], graph: DepGraph, top: int = 10,
              ops: HostOps | None = None, rep: Replay | None = None) -> StepPath:
    """Breakdown per class and the costliest operations of one walked path; ``ops`` (on a
    measured path) names host work by the framework op it ran in. With several ranks, each
    operation in ``top`` says its ``rank``, and ``rep`` (the replay walked) gives the step's
    ``comm_wait``."""
    start = np.asarray(segs["start"], dtype=np.int64)
    end = np.asarray(segs["end"], dtype=np.int64)
    cls = np.asarray(segs["cls"], dtype=np.int64)
    lane = np.asarray(segs["lane"], dtype=np.int64)
    node = np.asarray(segs["node"], dtype=np.int64)
    dur = end - start
    op_names = None
    if ops is not None and ops.by_thread and len(dur):
        gap = (lane == LANE_GAP) & (node >= 0)
        op_names = np.full(len(dur), "", dtype=object)
        if gap.any():
            op_names[gap] = ops.innermost(graph.h_thread[node[gap]], ((start + end) // 2)[gap])
            # host work inside a collective is communication, not CPU work: gloo's all-reduce runs
            # on the host (its own threads), c10d's ops wait there (the taxonomy's op kind)
            uniq, inv = np.unique(op_names[gap].astype(str), return_inverse=True)
            comm = np.array([analysis.kinds.op_kind(str(n)) == "communication" for n in uniq], dtype=bool)[inv]
            where = np.flatnonzero(gap)[comm & (cls[gap] == C_CPU)]
            cls = cls.copy()
            cls[where] = C_COMM
    per = np.bincount(cls, weights=dur, minlength=len(CLASSES)) if len(dur) else np.zeros(len(CLASSES))
    breakdown = {c: int(round(v)) for c, v in zip(CLASSES, per)}
    names = _name_segments(graph, lane, node, cls, op_names)
    total = max(hi - lo, 1)
    ranked = graph.n_collectives > 0
    if ranked:
        rank = np.full(len(dur), -1, dtype=np.int64)
        on_gpu = (lane == LANE_GPU) & (node >= 0)
        rank[on_gpu] = graph.g_rank[node[on_gpu]]
        on_host = ((lane == LANE_HOST) | (lane == LANE_GAP)) & (node >= 0)
        rank[on_host] = graph.h_rank[node[on_host]]
    else:
        rank = np.full(len(dur), -1, dtype=np.int64)
    acc: dict[tuple[str, int, int], int] = {}
    for n, c, r, d in zip(names.tolist(), cls.tolist(), rank.tolist(), dur.tolist()):
        acc[(n, c, r)] = acc.get((n, c, r), 0) + d
    best = sorted(acc.items(), key=lambda kv: -kv[1])[:top]
    tops: list[dict[str, object]] = [{"name": str(n), "kind": CLASSES[c], "ns": int(v), "pct": round(float(v) / total * 100.0, 2),
                                      **({"rank": r} if ranked else {})}
                                     for (n, c, r), v in best]
    columns: dict[str, np.ndarray] = {"start": start, "end": end, "cls": cls.astype(np.int8), "lane": lane.astype(np.int8),
                                      "node": node, "name": names}
    waits = collective_waits(graph, rep, lo, hi) if rep is not None and ranked else {}
    gpu = (lane == LANE_GPU) & (node >= 0) & (cls != C_IDLE)  # the work itself, not the gaps before it
    unlaunched = int(dur[gpu][graph.g_launch[node[gpu]] < 0].sum())
    return StepPath(name, lo, hi, breakdown, tops, columns, waits, unlaunched)


def collective_waits(graph: DepGraph, rep: Replay, lo: int, hi: int) -> dict[int, int]:
    """rank -> ns its collective kernels spent in [lo, hi] waiting for the last rank to join."""
    mem = graph.c_members
    if not len(mem) or not len(rep.c_arrive):
        return {}
    waited = rep.g_ebind[mem] == E_COLL
    mem = mem[waited]
    a = rep.c_arrive[graph.c_group[mem]]
    ns = np.clip(np.minimum(a, hi) - np.maximum(rep.g_start[mem], lo), 0, None)
    out: dict[int, int] = {}
    for r, v in zip(graph.g_rank[mem].tolist(), ns.tolist()):
        if v > 0:
            out[r] = out.get(r, 0) + int(v)
    return out


#: how far back (in ops started) :meth:`HostOps.innermost` looks for an op still open
_WALK_BACK = 64


class HostOps:
    """The framework ops and user ranges (``op``, ``nvtx``, ``annotation``; not the step markers)
    of each host thread, to name host work by the innermost one it ran in."""

    def __init__(self, trace: Trace, graph: DepGraph, steps: Collection[str] = ()) -> None:
        c = trace.cpu_slices
        self.by_thread: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._maxima: dict[int, list[np.ndarray]] = {}
        if not len(c):
            return
        ranges = np.isin(c["category"].astype(str).to_numpy(), ["op", "nvtx", "annotation"])
        if steps:
            cats = c["name"].astype("category")
            is_step = np.array([str(x) in set(steps) for x in cats.cat.categories] + [False])[cats.cat.codes.to_numpy()]
            ranges &= ~is_step
        sel = np.flatnonzero(ranges)
        if not len(sel):
            return
        pid, tid = c["pid"].to_numpy(np.int64)[sel], c["tid"].to_numpy(np.int64)[sel]
        names = c["name"].astype(str).to_numpy()[sel]
        start, end, depth = c["start"].to_numpy(np.int64)[sel], c["end"].to_numpy(np.int64)[sel], c["depth"].to_numpy(np.int64)[sel]
        for t, (p, d) in enumerate(graph.threads):
            m = (pid == p) & (tid == d)
            if m.any():
                o = np.lexsort((depth[m], start[m]))
                self.by_thread[t] = (start[m][o], end[m][o], depth[m][o], names[m][o])

    def _end_maxima(self, thread: int) -> list[np.ndarray]:
        """The thread's ops, level k: the latest end among the 2**k ops from each one (k up to 6: 64
        ops); made on the thread's first query."""
        got = self._maxima.get(thread)
        if got is None:
            got = [self.by_thread[thread][1]]
            while (1 << len(got)) <= _WALK_BACK:
                h = 1 << (len(got) - 1)
                got.append(np.maximum(got[-1][:-h], got[-1][h:]) if len(got[-1]) > h else got[-1][:0])
            self._maxima[thread] = got
        return got

    def innermost(self, threads: np.ndarray, times: np.ndarray) -> np.ndarray:
        """The innermost op running at each (thread, time); '' where none."""
        out = np.full(len(times), "", dtype=object)
        for t in np.unique(threads).tolist():
            got = self.by_thread.get(int(t))
            if got is None:
                continue
            s, e, d, n = got
            q = np.flatnonzero(threads == t)
            when = times[q]
            j = np.searchsorted(s, when, "right") - 1
            # the latest-starting op still open, at most 64 ops back from the last one started:
            # the innermost (ops nest). The longest run just before j whose ops all ended before
            # `when`, found by halving steps over the maxima of the ends (runs of 64, 32, .. 1)
            ends = self._end_maxima(int(t))
            low = np.maximum(j - _WALK_BACK, 0)
            pos = j + 1
            for k in range(len(ends) - 1, -1, -1):
                if not len(ends[k]):  # fewer ops than a run of this length
                    continue
                w = 1 << k
                i = pos - w
                fits = i >= low
                step = fits & (ends[k][np.where(fits, i, 0)] < when)
                pos = np.where(step, i, pos)
            j = pos - 1
            ok = (j >= low) & (e[np.maximum(j, 0)] >= when)
            out[q[ok]] = n[j[ok]]
        return out


def critical_paths(trace: Trace, step: str | None = None, graph: DepGraph | None = None,
                   base: tuple[DepGraph, list[StepWindow], str, Replay] | None = None) -> CritPathResult:
    """The critical path of every step of ``trace`` (see the module doc). ``base``: the graph,
    its step windows (for ``step``), where they came from and the measured replay, when the
    caller has them (a cache).

    Raises
    ------
    AnalysisError
        when the trace has no kernels or no launch calls linked to them, or ``step`` names no range.
    """
    if base is not None:
        graph, windows, source, rep = base
    else:
        graph = graph if graph is not None else build_graph(trace)
        check_graph(trace, graph)
        windows, source = step_windows(trace, graph, step)
        rep = replay(graph)
    paths = []
    ops = HostOps(trace, graph, {w.name for w in windows})
    lists = walk_lists(graph, rep)
    for win, (lo, hi) in zip(windows, step_bounds(graph, rep, windows)):
        paths.append(summarise(win.name, lo, hi, walk(graph, rep, win, (lo, hi), lists=lists), graph, ops=ops, rep=rep))
    return CritPathResult(paths, graph, windows, source, rep)
