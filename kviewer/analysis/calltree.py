"""Python call trees from ``python_function`` events (PyTorch profiler ``with_stack=True``).

Per thread, the python frames nest by time (a frame's children start and end inside it); each
frame is one event, so its inclusive time is the event's duration and its self time is that minus
its children's. :func:`call_tree` returns the frames with their parent; :func:`folded` writes the
"folded stacks" text that flamegraph.pl, speedscope and inferno read (one line per distinct stack,
``thread;outer;...;inner <self ns>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kviewer.core import Trace

#: what :func:`call_tree` reads of a trace
CALLTREE_READS = {"cpu_slices": ("name", "category", "start", "end", "dur", "pid", "tid")}


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


def call_tree(trace: Trace) -> CallTree:
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
        if limit_depth is None or d < limit_depth:
            out["children"] = [node(j, d + 1) for j in kids[i]]
        return out

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, int(tree.depth.max(initial=0)) * 3 + 1000))
    try:
        for i in np.flatnonzero(tree.parent < 0).tolist():
            threads.setdefault(tree.thread_label(i), []).append(node(i, 0))
    finally:
        sys.setrecursionlimit(old)
    return {"threads": [{"thread": t, "frames": f} for t, f in threads.items()]}


def launched_kernels(trace: Trace, slice_id: int) -> np.ndarray:
    """Kernel ids launched inside a frame: kernels whose launch call (flows) starts within the
    frame's time on the frame's thread."""
    c, f = trace.cpu_slices, trace.flows
    if not len(f) or not (0 <= slice_id < len(c)):
        return np.zeros(0, dtype=np.int64)
    fk = f[f["dst_table"] == "kernels"]
    src = fk["src"].to_numpy()
    s0, e0 = int(c["start"].to_numpy()[slice_id]), int(c["end"].to_numpy()[slice_id])
    tid, pid = int(c["tid"].to_numpy()[slice_id]), int(c["pid"].to_numpy()[slice_id])
    cs = c["start"].to_numpy()[src]
    hit = (cs >= s0) & (cs <= e0) & (c["tid"].to_numpy()[src] == tid) & (c["pid"].to_numpy()[src] == pid)
    return np.unique(fk["dst"].to_numpy()[hit])
