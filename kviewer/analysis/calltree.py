"""Call trees per thread: python frames (``python_function`` events, PyTorch profiler
``with_stack=True``) or sampled call stacks (Nsight Systems CPU sampling with backtraces).

Per thread, the python frames nest by time (a frame's children start and end inside it); each
frame is one event, so its inclusive time is the event's duration and its self time is that minus
its children's.

Sampled stacks (:func:`sampled_call_tree`) become frames the same way a profiler's "time order"
view draws them: consecutive samples of a thread that share a frame (the same stack up to it) are
one frame, from its first sample to one sampling interval after its last. The interval is the
thread's own median gap between samples (a thread is sampled at a fixed rate while it runs); a gap
longer than 1.5 intervals (the thread was off the CPU) ends every open frame. So a frame's inclusive
time is its samples times the interval, and each frame knows its sample count. :func:`call_tree` returns the frames with their parent; :func:`folded` writes the
"folded stacks" text that flamegraph.pl, speedscope and inferno read (one line per distinct stack,
``thread;outer;...;inner <self ns>``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Trace
from kviewer.core.schema import STACK_SEP

#: what :func:`call_tree` reads of a trace
CALLTREE_READS = {"cpu_slices": ("name", "category", "start", "end", "dur", "pid", "tid"),
                  "cpu_samples": ("start", "pid", "tid", "stack")}  # fmt: skip


@dataclass
class CallTree:
    """Python frames of a trace, as arrays in start order per thread."""

    ids: np.ndarray
    """cpu_slices ids of the frames"""
    parent: np.ndarray
    """position (into these arrays) of each frame's parent, -1 for a root"""
    depth: np.ndarray
    inclusive_ns: np.ndarray
    """the event's duration"""
    self_ns: np.ndarray
    """inclusive minus the children's inclusive (never below 0)"""
    names: list[str]
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    samples: np.ndarray | None = None
    """per frame, the CPU samples it spans (sampled trees); None for frames that are events"""

    @property
    def sampled(self) -> bool:
        return self.samples is not None

    def __len__(self) -> int:
        return len(self.ids)

    def thread_label(self, i: int) -> str:
        return f"pid {int(self.pid[i])} tid {int(self.tid[i])}"

    def stack(self, i: int) -> list[str]:
        out = []
        j = i
        while j >= 0:
            out.append(self.names[j])
            j = int(self.parent[j])
        return out[::-1]

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(len(self))]
        for i, p in enumerate(self.parent.tolist()):
            if p >= 0:
                kids[p].append(i)
        return kids


def call_tree(trace: Trace, source: str = "auto") -> CallTree:
    """The trace's call tree: ``source`` "events" (python frames), "samples" (sampled stacks) or
    "auto" (python frames when the trace has them, else its CPU samples)."""
    if source == "samples":
        return sampled_call_tree(trace)
    tree = _event_call_tree(trace)
    if source == "auto" and not len(tree) and len(trace.cpu_samples):
        return sampled_call_tree(trace)
    return tree


def sampled_call_tree(trace: Trace) -> CallTree:
    """Frames from the CPU samples' call stacks (see the module): per thread in time order."""
    s = trace.cpu_samples
    ids: list[int] = []
    parent: list[int] = []
    depth: list[int] = []
    names: list[str] = []
    pids: list[int] = []
    tids: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    counts: list[int] = []
    if len(s):
        stack_col = s["stack"]
        if isinstance(stack_col.dtype, pd.CategoricalDtype):
            cats = [str(c).split(STACK_SEP) if str(c) else [] for c in stack_col.cat.categories]
            codes = stack_col.cat.codes.to_numpy()
        else:
            uniq, codes = np.unique(stack_col.astype(str).to_numpy(), return_inverse=True)
            cats = [str(c).split(STACK_SEP) if str(c) else [] for c in uniq]
        t = s["start"].to_numpy()
        pid, tid = s["pid"].to_numpy(), s["tid"].to_numpy()
        order = np.lexsort((t, tid, pid))
        t, pid, tid, codes = t[order], pid[order], tid[order], codes[order]
        cuts = np.flatnonzero((np.diff(pid) != 0) | (np.diff(tid) != 0)) + 1
        for lo, hi in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [len(t)]]).tolist()):
            tt = t[lo:hi]
            gaps = np.diff(tt)
            gaps = gaps[gaps > 0]
            if not len(gaps):
                continue  # one sample: no interval to give it a duration (unknown, not 0)
            period = int(np.median(gaps))
            p_, d_ = int(pid[lo]), int(tid[lo])
            open_: list[int] = []  # positions of the open frames, outermost first
            prev_t = None
            for k in range(lo, hi):
                now = int(t[k])
                frames = cats[codes[k]] if codes[k] >= 0 else []
                if prev_t is not None and now - prev_t > period * 3 // 2:
                    for j in open_:
                        ends[j] = prev_t + period
                    open_ = []
                keep = 0
                while keep < len(open_) and keep < len(frames) and names[open_[keep]] == frames[keep]:
                    keep += 1
                for j in open_[keep:]:
                    ends[j] = (prev_t if prev_t is not None else now) + period
                del open_[keep:]
                for j in open_:
                    counts[j] += 1
                for d in range(keep, len(frames)):
                    ids.append(-1)
                    parent.append(open_[-1] if open_ else -1)
                    depth.append(d)
                    names.append(frames[d])
                    pids.append(p_)
                    tids.append(d_)
                    starts.append(now)
                    ends.append(now + period)
                    counts.append(1)
                    open_.append(len(names) - 1)
                prev_t = now
            for j in open_:
                ends[j] = int(prev_t) + period if prev_t is not None else ends[j]
    n = len(names)
    par = np.asarray(parent, dtype=np.int64)
    start_a = np.asarray(starts, dtype=np.int64)
    inclusive = np.asarray(ends, dtype=np.int64) - start_a if n else np.zeros(0, dtype=np.int64)
    child_sum = np.zeros(n, dtype=np.int64)
    has = par >= 0
    np.add.at(child_sum, par[has], inclusive[has])
    return CallTree(np.asarray(ids, dtype=np.int64), par, np.asarray(depth, dtype=np.int64), inclusive,
                    np.maximum(inclusive - child_sum, 0), names, np.asarray(pids, dtype=np.int64),
                    np.asarray(tids, dtype=np.int64), start_a, np.asarray(counts, dtype=np.int64))


def _event_call_tree(trace: Trace) -> CallTree:
    c = trace.cpu_slices
    rows = np.flatnonzero(c["category"].astype(str).to_numpy() == "python") if len(c) else np.zeros(0, dtype=np.int64)
    start = c["start"].to_numpy()[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    end = c["end"].to_numpy()[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    pid = c["pid"].to_numpy()[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    tid = c["tid"].to_numpy()[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    # by thread, then start, the longer first at a tie (it is the parent)
    order = np.lexsort((-(end - start), start, tid, pid))
    rows, start, end, pid, tid = rows[order], start[order], end[order], pid[order], tid[order]
    n = len(rows)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    stack: list[int] = []
    prev: tuple[int, int] | None = None
    s_l, e_l, p_l, t_l = start.tolist(), end.tolist(), pid.tolist(), tid.tolist()
    for i in range(n):
        key = (p_l[i], t_l[i])
        if key != prev:
            stack = []
            prev = key
        while stack and e_l[stack[-1]] <= s_l[i] and not (e_l[stack[-1]] == s_l[i] == e_l[i]):
            stack.pop()
        # a frame that starts inside the open one but ends after it (clock noise) still nests
        if stack:
            parent[i] = stack[-1]
            depth[i] = len(stack)
        stack.append(i)
    inclusive = (end - start).astype(np.int64)
    child_sum = np.zeros(n, dtype=np.int64)
    has = parent >= 0
    np.add.at(child_sum, parent[has], inclusive[has])
    names = c["name"].astype(str).to_numpy()[rows].tolist() if n else []
    return CallTree(rows, parent, depth, inclusive, np.maximum(inclusive - child_sum, 0), names, pid, tid, start)


def folded(tree: CallTree, per_thread: bool = True) -> list[tuple[str, int]]:
    """(stack text, self ns) per distinct stack, in first-seen order; stacks with 0 self time are
    kept when they are leaves (a flame graph still shows them as a sliver)."""
    acc: dict[str, int] = {}
    paths: list[str] = [""] * len(tree)
    for i in range(len(tree)):
        p = int(tree.parent[i])
        name = tree.names[i].replace(";", ":")
        if p >= 0:
            paths[i] = paths[p] + ";" + name
        else:
            paths[i] = (tree.thread_label(i) + ";" if per_thread else "") + name
        acc[paths[i]] = acc.get(paths[i], 0) + int(tree.self_ns[i])
    return list(acc.items())


def tree_json(tree: CallTree, limit_depth: int | None = None) -> dict[str, Any]:
    """Per thread, the frames as nested objects: name, id (cpu_slices), start_ns, inclusive_ns, self_ns, children."""
    kids = tree.children()
    threads: dict[str, list[dict[str, Any]]] = {}

    def node(i: int, d: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": tree.names[i], "id": int(tree.ids[i]), "start_ns": int(tree.start[i]),
                               "inclusive_ns": int(tree.inclusive_ns[i]), "self_ns": int(tree.self_ns[i])}
        if tree.samples is not None:
            out["samples"] = int(tree.samples[i])
        if limit_depth is None or d < limit_depth:
            out["children"] = [node(j, d + 1) for j in kids[i]]
        return out

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, int(tree.depth.max(initial=0)) * 3 + 1000))
    try:
        for i in np.flatnonzero(tree.parent < 0).tolist():
            threads.setdefault(tree.thread_label(i), []).append(node(i, 0))
    finally:
        sys.setrecursionlimit(old)
    return {"source": "samples" if tree.sampled else "events",
            "threads": [{"thread": t, "frames": f} for t, f in threads.items()]}


def launched_kernels(trace: Trace, slice_id: int) -> np.ndarray:
    """Kernel ids launched inside a frame: kernels whose launch call (flows) starts within the
    frame's time on the frame's thread."""
    c = trace.cpu_slices
    if not (0 <= slice_id < len(c)):
        return np.zeros(0, dtype=np.int64)
    s0, e0 = int(c["start"].to_numpy()[slice_id]), int(c["end"].to_numpy()[slice_id])
    tid, pid = int(c["tid"].to_numpy()[slice_id]), int(c["pid"].to_numpy()[slice_id])
    return launched_between(trace, pid, tid, s0, e0)


def launched_between(trace: Trace, pid: int, tid: int, s0: int, e0: int) -> np.ndarray:
    """Kernel ids whose launch call (flows) starts on thread (pid, tid) between s0 and e0 (a
    sampled frame has no event of its own: its thread and time say what it launched)."""
    c, f = trace.cpu_slices, trace.flows
    if not len(f) or not len(c):
        return np.zeros(0, dtype=np.int64)
    fk = f[f["dst_table"] == "kernels"]
    src = fk["src"].to_numpy()
    cs = c["start"].to_numpy()[src]
    hit = (cs >= s0) & (cs <= e0) & (c["tid"].to_numpy()[src] == tid) & (c["pid"].to_numpy()[src] == pid)
    return np.unique(fk["dst"].to_numpy()[hit])
