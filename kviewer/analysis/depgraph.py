"""The dependency graph of a trace and its discrete-event replay (Daydream, USENIX ATC 2020).

Nodes
-----
* **host nodes**: the runtime/driver calls of every thread (the outermost call where a runtime
  call holds driver calls), in start order per thread. The host time between two calls of a
  thread is *host work* (framework ops, Python) that the replay keeps as a gap before the call.
* **GPU nodes**: kernels, copies and memsets on their (device, stream).

Edges
-----
* thread order: a host call starts after the previous call of its thread ends, plus the gap;
* thread handoff: threads of one process whose framework ops never overlap anywhere in the trace
  take turns (the autograd engine's thread runs the backward while the thread that called
  ``backward()`` waits, then hands back): where one thread's run of activity ends and another's
  begins, the first call of the new run waits for the last call of the ended run
  (:func:`_handoffs`); its own thread's gap then holds only its own work, not the idle time;
* launch -> GPU op (``kernel_launch_calls``: flows, else the correlation id; a ``cudaGraphLaunch``
  reaches every kernel of its graph through the shared correlation id);
* stream order: a GPU op starts after the previous op of its stream;
* cross-stream: an op that started right after an op of another stream of its device ended,
  later than its launch and its stream allowed, waited for it (``cudaStreamWaitEvent``; the
  traces do not say which event, the timing does);
* sync waits: a synchronising call (``SYNC_CALLS``, blocking copies) ends after the last GPU op
  launched before it that ended before it returned;
* collectives across ranks: when several ranks are open, the kernels of one collective on every
  rank (:func:`kviewer.analysis.collectives.match_collectives`) cannot end before the last of
  them started: each ends ``c_eps`` after that arrival (the transfer once every rank joined), or
  after its own ``c_base`` when it did not wait. A rank that arrives early waits for the late one
  (the path crosses to the late rank); making the late rank's work shorter moves every rank.

Replay
------
Each edge carries a latency taken from the measured run: the binding edge of a node (the one that
became ready last) carries exactly the measured delay, the others the trace's typical delay for
that edge type (never more than the measured one). Replaying with the measured durations
therefore reproduces the measured start and end of every node; a transformation (shorter kernels,
removed launches, removed syncs) changes durations or drops edges and the replay moves everything
that depends on them. Everything is numpy arrays; the replay is one loop over the nodes in
measured order (a topological order of the graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kviewer import analysis
from kviewer.analysis.activity import BLOCKING_COPY_CALLS, SYNC_CALLS, op_launch_calls
from kviewer.analysis.collectives import match_collectives
from kviewer.analysis.kinds import is_communication
from kviewer.analysis.steps import kernel_launch_calls
from kviewer.core import Diagnostic, Trace

# activity, collectives, kinds and steps (with the kernel name rules they compile) are imported
# where the graph is built: a graph read back from the cache and replayed needs none of them
# (``kviewer whatif --cuda-graphs`` and ``kviewer critpath`` on a file seen before, issue 24)

#: host node classes
H_LAUNCH, H_SYNC, H_API = 0, 1, 2
#: GPU node classes
G_KERNEL, G_COMM, G_MEMCPY = 0, 1, 2
#: what bound a GPU node's start: its launch, its stream predecessor, another stream, nothing
B_LAUNCH, B_STREAM, B_CROSS, B_NONE = 0, 1, 2, 3
#: a host node's end: its own duration, or the GPU op it waited for
B_SELF, B_WAIT = 0, 1
#: a collective kernel's end: its own duration, or the last rank to join the collective
E_SELF, E_COLL = 0, 1

#: a cross-stream wait is inferred when an op starts within this long after another stream's op
#: ended, and later than its launch and its stream let it start
CROSS_STREAM_NS = 5_000
#: calls that put work on the GPU (their time on a path is launch overhead)
_ENQUEUE_WORDS = ("Launch", "MemcpyAsync", "MemsetAsync", "Memset", "EventRecord", "StreamWaitEvent")


def _enqueues(name: str) -> bool:
    return any(w in name for w in _ENQUEUE_WORDS)


def is_sync_call(name: str) -> bool:
    """A host call that waits for GPU work (the one list of :mod:`kviewer.analysis.activity`)."""
    return name in SYNC_CALLS or name in BLOCKING_COPY_CALLS


@dataclass
class DepGraph:
    """Nodes and edges as arrays; ``h_*`` host nodes, ``g_*`` GPU nodes (see the module doc).

    Latencies (``*_lat``) and the measured bindings make :func:`replay` reproduce the measured
    times; transformations edit copies of the duration arrays and the ``h_wait`` edges.
    """

    threads: list[tuple[int, int]]
    streams: list[tuple[int, int]]
    # host nodes, sorted by (thread, start)
    h_row: np.ndarray
    h_thread: np.ndarray
    h_name: np.ndarray
    h_start: np.ndarray
    h_end: np.ndarray
    h_class: np.ndarray
    h_prev: np.ndarray
    h_gap: np.ndarray
    h_wait: np.ndarray
    h_base: np.ndarray
    h_eps: np.ndarray
    # GPU nodes, sorted by start
    g_table: np.ndarray  # 0 kernels, 1 gpu_ops
    g_row: np.ndarray
    g_name: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_class: np.ndarray
    g_stream: np.ndarray
    g_launch: np.ndarray
    g_prev: np.ndarray
    g_cross: np.ndarray
    g_launch_lat: np.ndarray
    g_stream_lat: np.ndarray
    g_cross_lat: np.ndarray
    kernel_node: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """GPU node of each kernels row (-1 when none)"""
    typ_launch_ns: int = 5_000
    """median launch-call start -> GPU op start where the launch bound the op"""
    typ_stream_ns: int = 1_000
    """median gap after the stream predecessor where the stream bound the op (queued work)"""
    g_rank: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """rank of each GPU node (-1 unknown)"""
    h_rank: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """rank of each host node (-1 unknown)"""
    c_group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """the cross-rank collective each GPU node is part of (-1 none)"""
    c_members: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """GPU nodes of every collective, grouped: those of group g are c_members[c_ptr[g]:c_ptr[g + 1]]"""
    c_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    c_eps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """time from the last rank's arrival to the node's end (may be < 0 under clock skew)"""
    c_base: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """the node's duration had it not waited for another rank"""
    notes: list[Diagnostic] = field(default_factory=list)
    """what the graph could not link (collectives not matched across ranks)"""
    h_xdep: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """thread handoff: the host node (of another thread) each host node waited for, -1 none"""
    h_xlat: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """from the end of ``h_xdep`` to this node's start in the measured run"""
    h_idle: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """the part of ``h_gap`` this node's thread spent idle, waiting for the handoff"""
    h_xtail: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """of ``h_xlat``, the other thread's own work after ``h_xdep`` (the rest: the handoff and this
    thread's work before the node)"""

    @property
    def n_collectives(self) -> int:
        return len(self.c_ptr) - 1

    @property
    def n_host(self) -> int:
        return len(self.h_start)

    @property
    def n_gpu(self) -> int:
        return len(self.g_start)

    @property
    def h_dur(self) -> np.ndarray:
        return self.h_end - self.h_start

    @property
    def g_dur(self) -> np.ndarray:
        return self.g_end - self.g_start

    def host_node_at(self, thread: int, t: int, starts: np.ndarray | None = None) -> int:
        """The last host node of ``thread`` that starts at or before ``t`` (-1 when none);
        ``starts``: the host nodes' start times to read instead of the measured ones (a replay's
        ``h_start``)."""
        lo = int(np.searchsorted(self.h_thread, thread, "left"))
        hi = int(np.searchsorted(self.h_thread, thread, "right"))
        starts = self.h_start if starts is None else starts
        i = lo + int(np.searchsorted(starts[lo:hi], t, "right")) - 1
        return i if lo <= i < hi else -1

    def thread_index(self, pid: int, tid: int) -> int:
        try:
            return self.threads.index((pid, tid))
        except ValueError:
            return -1


def _median(values: np.ndarray, default: float) -> float:
    values = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    return float(np.median(values)) if len(values) else default


def build_graph(trace: Trace) -> DepGraph:
    """The dependency graph of ``trace`` (see the module doc)."""
    c = trace.cpu_slices
    k = trace.kernels
    g = trace.gpu_ops
    # ---- host nodes: outermost runtime/driver calls per thread
    cat = c["category"].astype(str).to_numpy() if len(c) else np.zeros(0, dtype=object)
    api = np.flatnonzero((cat == "runtime") | (cat == "driver"))
    pid = c["pid"].to_numpy(np.int64)
    tid = c["tid"].to_numpy(np.int64)
    cstart = c["start"].to_numpy(np.int64)
    cend = c["end"].to_numpy(np.int64)
    pairs = pd.MultiIndex.from_arrays([pid[api], tid[api]]) if len(api) else pd.MultiIndex.from_arrays([[], []])
    th_codes, th_uniques = pd.factorize(pairs) if len(api) else (np.zeros(0, dtype=np.int64), pd.MultiIndex.from_arrays([[], []]))
    threads = [(int(a), int(b)) for a, b in pd.MultiIndex.from_tuples(th_uniques) if len(api)] if len(api) else []
    th = np.asarray(th_codes, dtype=np.int64)
    order = np.lexsort((-cend[api], cstart[api], th))
    api, th = api[order], th[order]
    s, e = cstart[api], cend[api]
    # drop calls inside an earlier call of the same thread (driver calls under a runtime call)
    keep = np.ones(len(api), dtype=bool)
    if len(api):
        lo_t = int(min(s.min(), 0))
        span = int(e.max() - lo_t + 1)
        key = th * span + (e - lo_t)
        cm = np.maximum.accumulate(key)
        prev_cm = np.concatenate([[-1], cm[:-1]])
        same = np.concatenate([[False], th[1:] == th[:-1]])
        keep = ~same | (s - lo_t + th * span >= prev_cm)
    api, th, s, e = api[keep], th[keep], s[keep], e[keep]
    nh = len(api)
    names = c["name"].astype(str).to_numpy()[api] if nh else np.zeros(0, dtype=object)
    uniq, inv = np.unique(names, return_inverse=True) if nh else (np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64))
    cls_of = np.array([H_SYNC if is_sync_call(str(n)) else (H_LAUNCH if _enqueues(str(n)) else H_API) for n in uniq], dtype=np.int8)
    h_class = cls_of[inv] if nh else np.zeros(0, dtype=np.int8)
    h_prev = np.arange(nh, dtype=np.int64) - 1
    if nh:
        h_prev[0] = -1
        h_prev[1:][th[1:] != th[:-1]] = -1
    h_gap = np.where(h_prev >= 0, s - e[np.maximum(h_prev, 0)], 0).astype(np.int64)
    # call row -> host node: the outermost kept call holding it
    node_of_row = np.full(len(c), -1, dtype=np.int64)
    node_of_row[api] = np.arange(nh)
    all_api = np.flatnonzero((cat == "runtime") | (cat == "driver"))
    orphan = all_api[node_of_row[all_api] < 0]
    if len(orphan):
        tkey = pd.MultiIndex.from_arrays([pid[orphan], tid[orphan]])
        oth = pd.Index(pd.MultiIndex.from_tuples(threads) if threads else pd.MultiIndex.from_arrays([[], []])).get_indexer(tkey)
        for r, t in zip(orphan.tolist(), oth.tolist()):
            if t < 0:
                continue
            lo = int(np.searchsorted(th, t, "left"))
            hi = int(np.searchsorted(th, t, "right"))
            i = lo + int(np.searchsorted(s[lo:hi], cstart[r], "right")) - 1
            if lo <= i < hi and e[i] >= cend[r]:
                node_of_row[r] = i

    # ---- GPU nodes: kernels and gpu_ops, by start
    kstart = k["start"].to_numpy(np.int64)
    gstart = g["start"].to_numpy(np.int64)
    start = np.concatenate([kstart, gstart])
    end = np.concatenate([k["end"].to_numpy(np.int64), g["end"].to_numpy(np.int64)])
    table = np.concatenate([np.zeros(len(k), np.int8), np.ones(len(g), np.int8)])
    row = np.concatenate([np.arange(len(k)), np.arange(len(g))]).astype(np.int64)
    dev = np.concatenate([k["device"].to_numpy(np.int64), g["device"].to_numpy(np.int64)])
    grank = np.concatenate([k["rank"].to_numpy(np.int64), g["rank"].to_numpy(np.int64)])
    stream = np.concatenate([k["stream"].to_numpy(np.int64), g["stream"].to_numpy(np.int64)])
    kcalls = kernel_launch_calls(trace)
    gcalls = op_launch_calls(trace) if len(g) else np.zeros(0, dtype=np.int64)
    calls = np.concatenate([kcalls, gcalls])
    knames = k["short_name"].astype(str).to_numpy() if len(k) else np.zeros(0, dtype=object)
    gnames = g["name"].astype(str).to_numpy() if len(g) else np.zeros(0, dtype=object)
    gname = np.concatenate([knames, gnames]).astype(object)
    kcat = k["name"].astype("category") if len(k) else pd.Series([], dtype="category")
    comm = np.array([is_communication(str(x)) for x in kcat.cat.categories] + [False])[kcat.cat.codes.to_numpy()] if len(k) else np.zeros(0, bool)
    gcls = np.concatenate([np.where(comm, G_COMM, G_KERNEL), np.full(len(g), G_MEMCPY)]).astype(np.int8)
    k_comm = comm
    order = np.lexsort((table, start))
    start, end, row, dev, stream, calls, grank = (a[order] for a in (start, end, row, dev, stream, calls, grank))
    table, gcls, gname = table[order], gcls[order], gname[order]
    ng = len(start)
    launch = np.where(calls >= 0, node_of_row[np.maximum(calls, 0)] if len(c) else -1, -1).astype(np.int64) if ng else np.zeros(0, np.int64)
    s_codes, s_uniques = pd.factorize(pd.MultiIndex.from_arrays([dev, stream])) if ng else (np.zeros(0, np.int64), pd.MultiIndex.from_arrays([[], []]))
    g_stream = np.asarray(s_codes, dtype=np.int64)
    streams = [(int(a), int(b)) for a, b in pd.MultiIndex.from_tuples(s_uniques)] if ng else []
    # previous op on the same stream
    g_prev = np.full(ng, -1, dtype=np.int64)
    if ng:
        by = np.lexsort((np.arange(ng), g_stream))
        same = np.concatenate([[False], g_stream[by][1:] == g_stream[by][:-1]])
        g_prev[by[1:][same[1:]]] = by[:-1][same[1:]]
    kernel_node = np.full(len(k), -1, dtype=np.int64)
    kernel_node[row[table == 0]] = np.flatnonzero(table == 0)
    coll = _collectives(trace, k_comm, kernel_node, start, end, ng)

    # ---- edge readiness in the measured run and the binding edge
    big = np.iinfo(np.int64).min // 4
    r_launch = np.where(launch >= 0, s[np.maximum(launch, 0)] if nh else big, big)
    r_stream = np.where(g_prev >= 0, end[np.maximum(g_prev, 0)], big)
    g_cross = _cross_stream(start, end, dev, g_stream, np.maximum(r_launch, r_stream))
    r_cross = np.where(g_cross >= 0, end[np.maximum(g_cross, 0)], big)
    ready = np.stack([r_launch, r_stream, r_cross])
    bind = np.argmax(ready, axis=0) if ng else np.zeros(0, np.int64)
    typ_launch = _median((start - r_launch)[(bind == B_LAUNCH) & (launch >= 0)], 5_000.0)
    typ_stream = _median((start - r_stream)[(bind == B_STREAM) & (g_prev >= 0)], 1_000.0)

    def lat(r: np.ndarray, b: int, typ: float) -> np.ndarray:
        slack = start - r
        return np.where(bind == b, slack, np.minimum(slack, int(typ))).astype(np.int64)

    # ---- syncs: the GPU op each synchronising call waited for
    h_wait = np.full(nh, -1, dtype=np.int64)
    sync_nodes = np.flatnonzero(h_class == H_SYNC)
    if len(sync_nodes) and ng:
        by_end = np.argsort(end, kind="stable")
        ends = end[by_end]
        lstart = np.where(launch >= 0, r_launch, start)  # unknown launch: its own start
        hpid = np.array([threads[t][0] for t in th], dtype=np.int64) if nh else np.zeros(0, np.int64)
        gpid = np.where(launch >= 0, hpid[np.maximum(launch, 0)] if nh else -1, -1)
        for j in sync_nodes.tolist():
            i = int(np.searchsorted(ends, e[j], "right")) - 1
            stop = max(i - 512, -1)
            while i > stop:
                n = by_end[i]
                if lstart[n] <= s[j] and (gpid[n] == hpid[j] or gpid[n] < 0):
                    h_wait[j] = n
                    break
                i -= 1
    dur = e - s
    w_end = np.where(h_wait >= 0, end[np.maximum(h_wait, 0)] if ng else 0, big)
    blocked = (h_wait >= 0) & (w_end > s)
    typ_base = _median(dur[(h_class == H_SYNC) & ~blocked], 2_000.0)
    typ_eps = _median((e - w_end)[blocked], 5_000.0)
    h_base = np.where(blocked, np.minimum(dur, int(typ_base)), dur).astype(np.int64)
    h_eps = np.where(blocked, e - w_end, np.where(h_wait >= 0, np.minimum(e - w_end, int(typ_eps)), 0)).astype(np.int64)

    xdep, xlat, idle, xtail = _handoffs(c, cat, threads, th, s, e, h_prev)

    return DepGraph(
        threads=threads, streams=streams,
        h_row=api.astype(np.int64), h_thread=th.astype(np.int64), h_name=names, h_start=s.astype(np.int64), h_end=e.astype(np.int64),
        h_class=h_class, h_prev=h_prev, h_gap=h_gap, h_wait=h_wait, h_base=h_base, h_eps=h_eps,
        g_table=table, g_row=row, g_name=gname, g_start=start, g_end=end, g_class=gcls, g_stream=g_stream,
        g_launch=launch, g_prev=g_prev, g_cross=g_cross,
        g_launch_lat=lat(r_launch, B_LAUNCH, typ_launch), g_stream_lat=lat(r_stream, B_STREAM, typ_stream),
        g_cross_lat=lat(r_cross, B_CROSS, 0.0), kernel_node=kernel_node,
        typ_launch_ns=int(typ_launch), typ_stream_ns=int(typ_stream),
        g_rank=grank, h_rank=c["rank"].to_numpy(np.int64)[api] if nh else np.zeros(0, np.int64), **coll,
        h_xdep=xdep, h_xlat=xlat, h_idle=idle, h_xtail=xtail,
    )


def _handoffs(c: pd.DataFrame, cat: np.ndarray, threads: list[tuple[int, int]], th: np.ndarray, s: np.ndarray, e: np.ndarray,
              h_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Thread handoffs (see the module doc): ``(h_xdep, h_xlat, h_idle, h_xtail)`` per host node.

    A thread's *activity* is the union of its framework ops and API calls; a run of it, a
    maximal interval of that union. Threads of one process with framework ops whose activity
    never overlaps the others' anywhere in the trace (each such thread joins the group when it
    overlaps none of its members; the busiest first) take turns; a *turn* is a thread's runs
    until another thread's run begins. At every change of turn, the first call of the new turn
    (if it has one) waits for the last call of the ended turn (if it has one), and the time its
    thread was idle since its own previous turn is that wait.
    """
    union_intervals = analysis.timerange.union_intervals

    nh = len(s)
    xdep = np.full(nh, -1, dtype=np.int64)
    xlat = np.zeros(nh, dtype=np.int64)
    idle = np.zeros(nh, dtype=np.int64)
    xtail = np.zeros(nh, dtype=np.int64)
    if nh == 0 or len(threads) < 2:
        return xdep, xlat, idle, xtail
    has_op = cat == "op"
    rows = np.flatnonzero(has_op | (cat == "runtime") | (cat == "driver"))
    pid, tid = c["pid"].to_numpy(np.int64)[rows], c["tid"].to_numpy(np.int64)[rows]
    cs, ce, op = c["start"].to_numpy(np.int64)[rows], c["end"].to_numpy(np.int64)[rows], has_op[rows]
    runs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for t, (p, d) in enumerate(threads):  # a few threads: a mask each
        m = (pid == p) & (tid == d)
        if op[m].any():
            runs[t] = union_intervals(cs[m], ce[m])
    by_pid: dict[int, list[int]] = {}
    for t in sorted(runs, key=lambda t: -int((runs[t][1] - runs[t][0]).sum())):
        by_pid.setdefault(threads[t][0], []).append(t)

    def overlaps(a: list[int], b: int) -> bool:
        st = np.concatenate([runs[x][0] for x in a] + [runs[b][0]])
        en = np.concatenate([runs[x][1] for x in a] + [runs[b][1]])
        o = np.argsort(st, kind="stable")
        st, en = st[o], en[o]
        return bool(len(st) > 1 and (st[1:] < np.maximum.accumulate(en)[:-1]).any())

    for members in by_pid.values():
        group: list[int] = []
        for t in members:
            if len(runs[t][0]) >= 2 and (not group or not overlaps(group, t)):
                group.append(t)
        if len(group) < 2:
            continue
        rs = np.concatenate([runs[t][0] for t in group])
        re_ = np.concatenate([runs[t][1] for t in group])
        rt = np.concatenate([np.full(len(runs[t][0]), t, dtype=np.int64) for t in group])
        o = np.argsort(rs, kind="stable")
        rs, re_, rt = rs[o], re_[o], rt[o]
        # turns: the runs of one thread until another thread's run begins
        head = np.flatnonzero(np.r_[True, rt[1:] != rt[:-1]])
        ts, tt = rs[head], rt[head]
        te = np.maximum.reduceat(re_, head)
        prev_end_same = np.full(len(ts), -1, dtype=np.int64)  # the end of the same thread's previous turn
        for t in group:
            k = np.flatnonzero(tt == t)
            prev_end_same[k[1:]] = te[k[:-1]]
        for a in range(len(ts) - 1):
            b = a + 1  # turn a (thread X) ended, turn b (thread Y) began
            x_t, y_t = int(tt[a]), int(tt[b])
            lo_x, hi_x = int(np.searchsorted(th, x_t, "left")), int(np.searchsorted(th, x_t, "right"))
            lo_y, hi_y = int(np.searchsorted(th, y_t, "left")), int(np.searchsorted(th, y_t, "right"))
            # the last call of turn a, the first call of turn b (the calls of a thread do not overlap)
            x = lo_x + int(np.searchsorted(e[lo_x:hi_x], te[a], "right")) - 1
            y = lo_y + int(np.searchsorted(s[lo_y:hi_y], ts[b], "left"))
            if not (lo_x <= x < hi_x and s[x] >= ts[a]) or not (lo_y <= y < hi_y and s[y] < te[b]):
                continue
            xdep[y] = x
            xlat[y] = s[y] - e[x]
            xtail[y] = te[a] - e[x]
            # the thread's first turn: no call before this one, so nothing of its own to keep
            idle[y] = ts[b] - prev_end_same[b] if h_prev[y] >= 0 and prev_end_same[b] >= 0 else 0
    return xdep, xlat, idle, xtail


def _collectives(trace: Trace, comm: np.ndarray, kernel_node: np.ndarray, start: np.ndarray, end: np.ndarray, ng: int) -> dict[str, Any]:
    """The cross-rank collective edges (see the module doc) as DepGraph fields; ``comm``: which
    kernels rows are communication."""
    match = match_collectives(trace, comm)
    c_group = np.full(ng, -1, dtype=np.int64)
    hit = np.flatnonzero(match.group >= 0)
    c_group[kernel_node[hit]] = match.group[hit]
    members = np.flatnonzero(c_group >= 0)
    members = members[np.argsort(c_group[members], kind="stable")]
    ptr = np.zeros(match.n_groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(c_group[members], minlength=match.n_groups), out=ptr[1:])
    dur = end - start
    c_eps = np.zeros(ng, dtype=np.int64)
    c_base = dur.copy()
    if len(members):
        arrive = np.full(match.n_groups, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(arrive, c_group[members], start[members])
        a = arrive[c_group[members]]
        eps = end[members] - a
        c_eps[members] = eps
        waited = (start[members] < a) & (eps > 0)
        # had it not waited, it would have taken the transfer after the last arrival (no more
        # than it took)
        c_base[members] = np.where(waited, np.minimum(dur[members], eps), dur[members])
    return {"c_group": c_group, "c_members": members, "c_ptr": ptr, "c_eps": c_eps, "c_base": c_base, "notes": list(match.diagnostics)}


def _cross_stream(start: np.ndarray, end: np.ndarray, dev: np.ndarray, stream: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """For each GPU op, the op of another stream of its device it waited for (-1 for none)."""
    out = np.full(len(start), -1, dtype=np.int64)
    if not len(start) or len(np.unique(stream)) < 2:
        return out
    late = np.flatnonzero(start - ready > 0)
    if not len(late):
        return out
    for d in np.unique(dev[late]).tolist():
        on = np.flatnonzero(dev == d)
        by_end = on[np.argsort(end[on], kind="stable")]
        ends = end[by_end]
        mine = late[dev[late] == d]
        pos = np.searchsorted(ends, start[mine], "right") - 1
        found = np.full(len(mine), -1, dtype=np.int64)
        # the latest-ending ops before each late op (a few back: some are on its own stream)
        for back in range(16):
            i = pos - back
            ok = (found == -1) & (i >= 0)
            if not ok.any():
                break
            ic = np.maximum(i, 0)
            m = by_end[ic]
            near = ok & (start[mine] - ends[ic] <= CROSS_STREAM_NS) & (ends[ic] > ready[mine])
            hit = near & (stream[m] != stream[mine])
            found[hit] = m[hit]
            # past the window: stop looking for that op
            found[ok & ~near] = -2
        out[mine] = np.where(found >= 0, found, -1)
    return out


@dataclass
class Replay:
    """Times of every node in one replay, and what bound each one."""

    h_start: np.ndarray
    h_end: np.ndarray
    h_bind: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_bind: np.ndarray
    g_ebind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    """what bound each GPU node's end: E_SELF, or E_COLL (it waited for another rank)"""
    c_arrive: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """when the last rank joined each collective"""
    c_last: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """the GPU node of the last rank to join each collective"""
    h_sbind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    """what bound each host node's start: 0 its thread, 1 a handoff from another thread (``h_xdep``)"""


@dataclass
class Edits:
    """A transformation of the graph: new durations, removed nodes and edges (None = as measured)."""

    g_dur: np.ndarray | None = None
    g_removed: np.ndarray | None = None
    """removed GPU ops take no time and no latency (a fused member)"""
    h_dur: np.ndarray | None = None
    h_gap: np.ndarray | None = None
    h_nowait: np.ndarray | None = None
    """host nodes that no longer wait for the GPU (a sync removed)"""
    g_launch_ready: np.ndarray | None = None
    """GPU ops whose launch edge leads to another host node (a CUDA graph launch), -1 unchanged"""
    g_launch_lat: np.ndarray | None = None
    g_stream_lat: np.ndarray | None = None
    h_xlat: np.ndarray | None = None
    """the handoff latencies (the host work around a handoff, gone in a CUDA graph replay)"""


def replay(graph: DepGraph, edits: Edits | None = None) -> Replay:
    """Discrete-event replay of the graph with the edits applied (see the module doc)."""
    ed = edits or Edits()
    nh, ng = graph.n_host, graph.n_gpu
    g_dur = (ed.g_dur if ed.g_dur is not None else graph.g_dur).tolist()
    g_rem = (ed.g_removed if ed.g_removed is not None else np.zeros(ng, bool)).tolist()
    h_dur = (ed.h_dur if ed.h_dur is not None else graph.h_dur).tolist()
    h_gap = (ed.h_gap if ed.h_gap is not None else graph.h_gap).tolist()
    nowait = (ed.h_nowait if ed.h_nowait is not None else np.zeros(nh, bool)).tolist()
    glaunch = (np.where(ed.g_launch_ready >= 0, ed.g_launch_ready, graph.g_launch) if ed.g_launch_ready is not None else graph.g_launch).tolist()
    h_prev = graph.h_prev.tolist()
    h_wait = graph.h_wait.tolist()
    has_x = len(graph.h_xdep) == nh and bool((graph.h_xdep >= 0).any())
    h_xdep = graph.h_xdep.tolist() if has_x else []
    h_xlat = (ed.h_xlat if ed.h_xlat is not None else graph.h_xlat).tolist() if has_x else []
    h_idle = graph.h_idle.tolist() if has_x else []
    hsb = [0] * nh
    h_base = graph.h_base.tolist()
    h_eps = graph.h_eps.tolist()
    h_s0 = graph.h_start.tolist()
    g_prev = graph.g_prev.tolist()
    g_cross = graph.g_cross.tolist()
    l_lat = (ed.g_launch_lat if ed.g_launch_lat is not None else graph.g_launch_lat).tolist()
    s_lat = (ed.g_stream_lat if ed.g_stream_lat is not None else graph.g_stream_lat).tolist()
    x_lat = graph.g_cross_lat.tolist()
    g_s0 = graph.g_start.tolist()
    hs = [0] * nh
    he = [0] * nh
    hb = [B_SELF] * nh
    gs = [0] * ng
    ge = [0] * ng
    gb = [B_NONE] * ng
    geb = [E_SELF] * ng
    nc = graph.n_collectives
    c_arrive = [0] * nc
    c_last = [-1] * nc
    if nc:
        # a collective kernel made shorter or longer: its transfer and its own time in proportion
        old = graph.g_dur
        new = np.asarray(ed.g_dur, dtype=np.float64) if ed.g_dur is not None else old.astype(np.float64)
        scale = np.where(old > 0, new / np.maximum(old, 1), 1.0)
        c_eps = np.round(graph.c_eps * scale).astype(np.int64).tolist()
        c_base = np.round(graph.c_base * scale).astype(np.int64).tolist()
        c_members = graph.c_members.tolist()
        c_ptr = graph.c_ptr.tolist()
    order_kinds, order_idx = _event_order(graph)
    neg = -(1 << 62)
    for kind, i in zip(order_kinds, order_idx):
        if kind == 3:  # every rank's part of collective i has started: their ends
            mem = c_members[c_ptr[i]:c_ptr[i + 1]]
            last = -1
            arrive = neg
            for m in mem:
                if not g_rem[m] and gs[m] > arrive:
                    arrive, last = gs[m], m
            c_arrive[i], c_last[i] = arrive, last
            for m in mem:
                if g_rem[m]:
                    continue
                own = gs[m] + c_base[m]
                t = arrive + c_eps[m]
                if t > own and m != last:
                    ge[m], geb[m] = t, E_COLL
                else:
                    ge[m] = own
            continue
        if kind == 2:
            if g_rem[i]:
                p = g_prev[i]
                t = ge[p] if p >= 0 else g_s0[i]
                gs[i] = ge[i] = t
                gb[i] = B_STREAM if p >= 0 else B_NONE
                continue
            best, b = neg, B_NONE
            L = glaunch[i]
            if L >= 0:
                best, b = hs[L] + l_lat[i], B_LAUNCH
            p = g_prev[i]
            if p >= 0:
                t = ge[p] + s_lat[i]
                if t > best:
                    best, b = t, B_STREAM
            x = g_cross[i]
            if x >= 0:
                t = ge[x] + x_lat[i]
                if t > best:
                    best, b = t, B_CROSS
            if b == B_NONE:
                best = g_s0[i]
            gs[i] = best
            ge[i] = best + g_dur[i]
            gb[i] = b
        elif kind == 1:
            p = h_prev[i]
            if has_x and h_xdep[i] >= 0:
                # its thread's own work before it, or the other thread's turn it waited for
                hs[i] = he[p] + max(h_gap[i] - h_idle[i], 0) if p >= 0 else neg
                t = he[h_xdep[i]] + h_xlat[i]
                if t > hs[i]:
                    hs[i], hsb[i] = t, 1
            else:
                hs[i] = he[p] + h_gap[i] if p >= 0 else h_s0[i]
        else:
            w = h_wait[i]
            if w >= 0 and not nowait[i]:
                own = hs[i] + min(h_base[i], h_dur[i])
                t = ge[w] + h_eps[i]
                if t > own:
                    he[i], hb[i] = t, B_WAIT
                else:
                    he[i] = own
            else:
                he[i] = hs[i] + (min(h_base[i], h_dur[i]) if nowait[i] else h_dur[i])
    return Replay(
        h_start=np.asarray(hs, dtype=np.int64), h_end=np.asarray(he, dtype=np.int64), h_bind=np.asarray(hb, dtype=np.int8),
        g_start=np.asarray(gs, dtype=np.int64), g_end=np.asarray(ge, dtype=np.int64), g_bind=np.asarray(gb, dtype=np.int8),
        g_ebind=np.asarray(geb, dtype=np.int8), c_arrive=np.asarray(c_arrive, dtype=np.int64), c_last=np.asarray(c_last, dtype=np.int64),
        h_sbind=np.asarray(hsb, dtype=np.int8),
    )


def _chain_max(key: np.ndarray, group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``key`` raised so that it grows by at least 1 along each group's ``order``."""
    k = key[order]
    g = group[order]
    pos = np.arange(len(k), dtype=np.int64)
    span = int(k.max() - k.min() + len(k) + 1) if len(k) else 1
    base = int(k.min()) if len(k) else 0
    # per group: cumulative max of (key - pos), offset by group so groups do not mix
    gid = np.concatenate([[0], np.cumsum(g[1:] != g[:-1])]) if len(k) else g
    adj = (k - base - pos) + gid * (2 * span)
    cm = np.maximum.accumulate(adj) - gid * (2 * span) + pos + base
    out = key.copy()
    out[order] = np.maximum(k, cm)
    return out


def _event_order(graph: DepGraph) -> tuple[list[int], list[int]]:
    """The replay's event order: a topological order of the graph.

    Events are host starts, host ends, GPU ops and collectives (the moment every rank's part has
    started: their ends are set then), keyed by their measured time (x4, plus a rank so that at
    equal times a host end precedes a host start precedes a GPU op). Where clocks disagree (a
    kernel that starts before its launch call in the trace, ranks whose clocks differ), keys are
    raised until every event comes after what it depends on.
    """
    nh, ng, nc = graph.n_host, graph.n_gpu, graph.n_collectives
    he = graph.h_end * 4
    hs = graph.h_start * 4 + 1
    gk = graph.g_start * 4 + 2
    # thread chains: start_j < end_j < start_{j+1}, interleaved
    t_key = np.empty(2 * nh, dtype=np.int64)
    t_group = np.repeat(graph.h_thread, 2)
    t_order = np.lexsort((np.tile([0, 1], nh), np.repeat(np.arange(nh), 2), t_group)) if nh else np.zeros(0, np.int64)
    s_order = np.lexsort((np.arange(ng), graph.g_stream)) if ng else np.zeros(0, np.int64)
    launch, wait, cross = graph.g_launch, graph.h_wait, graph.g_cross
    xdep = graph.h_xdep
    cg = graph.c_group if nc else np.zeros(0, np.int64)
    members = graph.c_members
    in_coll = cg >= 0 if nc else np.zeros(ng, bool)
    prev = graph.g_prev
    ck = np.zeros(nc, dtype=np.int64)

    def end_key(gk: np.ndarray, ck: np.ndarray) -> np.ndarray:
        """The key after which a GPU node's end is known (its collective's, for a member)."""
        if not nc:
            return gk
        return np.where(in_coll, ck[np.maximum(cg, 0)], gk)

    for _ in range(64):
        t_key[0::2], t_key[1::2] = hs, he
        t_key = _chain_max(t_key, t_group, t_order) if nh else t_key
        hs, he = t_key[0::2].copy(), t_key[1::2].copy()
        if nh and len(xdep) == nh:  # a handoff: after the other thread's call ended
            hs = np.where(xdep >= 0, np.maximum(hs, he[np.maximum(xdep, 0)] + 1), hs)
        before = gk.copy()
        ck_before = ck.copy()
        if ng:
            if nh:
                gk = np.where(launch >= 0, np.maximum(gk, hs[np.maximum(launch, 0)] + 1), gk)
            gk = _chain_max(gk, graph.g_stream, s_order)
            if nc:
                ck = np.full(nc, np.iinfo(np.int64).min, dtype=np.int64)
                np.maximum.at(ck, cg[members], gk[members] + 1)
            ek = end_key(gk, ck)
            if nc:
                gk = np.where((prev >= 0) & in_coll[np.maximum(prev, 0)], np.maximum(gk, ek[np.maximum(prev, 0)] + 1), gk)
            gk = np.where(cross >= 0, np.maximum(gk, ek[np.maximum(cross, 0)] + 1), gk)
        he_before = he
        if nh and ng:
            ek = end_key(gk, ck)
            he = np.where(wait >= 0, np.maximum(he, ek[np.maximum(wait, 0)] + 1), he)
        if np.array_equal(before, gk) and np.array_equal(he_before, he) and np.array_equal(ck_before, ck):
            t_key[0::2], t_key[1::2] = hs, he
            if np.array_equal(_chain_max(t_key, t_group, t_order) if nh else t_key, t_key):
                break
    # at equal keys: host end, host start, GPU op, collective
    keys = np.concatenate([he, hs, gk, ck])
    kinds = np.concatenate([np.zeros(nh, np.int8), np.ones(nh, np.int8), np.full(ng, 2, np.int8), np.full(nc, 3, np.int8)])
    idx = np.concatenate([np.arange(nh), np.arange(nh), np.arange(ng), np.arange(nc)])
    order = np.lexsort((kinds, keys))
    return kinds[order].tolist(), idx[order].tolist()


def map_host_times(graph: DepGraph, rep: Replay, thread: int, t: np.ndarray) -> np.ndarray:
    """Where host times ``t`` of ``thread`` (step marker edges, host ranges) land in a replay.

    Inside a call: the same offset from its start (clipped to its replayed end); in the gap after
    a call: the same offset from its end, clipped to the replayed gap before the thread's next
    call. Times before the thread's first call, and every time of a thread without calls (or
    ``thread`` -1), keep their value.
    """
    t = np.asarray(t, dtype=np.int64)
    lo = int(np.searchsorted(graph.h_thread, thread, "left"))
    hi = int(np.searchsorted(graph.h_thread, thread, "right"))
    if thread < 0 or hi <= lo:
        return t
    hs, he = graph.h_start[lo:hi], graph.h_end[lo:hi]
    rs, re_ = rep.h_start[lo:hi], rep.h_end[lo:hi]
    j = np.searchsorted(hs, t, "right") - 1
    jc = np.clip(j, 0, hi - lo - 1)
    inside = (j >= 0) & (t < he[jc])
    next_start = np.append(rs[1:], np.iinfo(np.int64).max // 4)
    gap_room = np.maximum(next_start - re_, 0)
    after = np.where(inside, np.minimum(rs[jc] + (t - hs[jc]), re_[jc]), re_[jc] + np.minimum(t - he[jc], gap_room[jc]))
    return np.where(j >= 0, after, t).astype(np.int64)


def map_host_time(graph: DepGraph, rep: Replay, thread: int, t: int) -> int:
    """:func:`map_host_times` of one time."""
    if thread < 0:
        return t
    return int(map_host_times(graph, rep, thread, np.asarray([t], dtype=np.int64))[0])
