"""Intervals on one timeline track: the one nesting-depth rule (no Qt, no I/O, numpy only: the
timeline imports it on the way to the first window).

Every loader computes ``cpu_slices.depth`` with :func:`nesting_depth`, and the timeline lays its
lanes out with it, so a slice has one depth everywhere: on ``[0,10), [5,15)`` the second is one
level below the first (``[0, 1]``), and no two intervals of one level on a track overlap.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nesting_depth"]


def nesting_depth(start: np.ndarray, end: np.ndarray, *track: np.ndarray) -> np.ndarray:
    """Nesting depth of each interval on its track: 0 = outermost, 1 inside it, ...

    ``track``: arrays naming each interval's track (e.g. pid and tid; none: one track).

    Intervals that overlap without nesting (NVTX start/end ranges may) are put one level deeper
    than what is still open, so no two intervals on one level overlap.

    The rule is a stack walk in (track, start, longest first) order: pop what ended by this
    start, the depth is what is left open. It runs level by level in numpy: on one level the
    intervals fall into runs that start on an empty stack (the start is at or past every end
    before it); a run whose first interval outlasts the rest is that interval (at this level)
    and, one level down, a problem of the same kind (its first interval never pops there). Only
    runs with an interval outlasting the first (a partial overlap) walk the stack in Python.
    """
    n = len(start)
    depth = np.zeros(n, dtype=np.int32)
    if not n:
        return depth
    start = np.asarray(start)
    end = np.asarray(end)
    keys = [np.asarray(k) for k in track]
    order = np.lexsort((-end, start, *reversed(keys)))
    s_all, e_all = start[order], end[order]
    change = np.zeros(max(n - 1, 0), dtype=bool)
    for k in keys:
        k_s = k[order]
        change |= k_s[1:] != k_s[:-1]
    group = np.cumsum(np.concatenate([[True], change]))
    # every end ranked once: a level's running maximum compares ranks (one sort, not one a level)
    distinct, e_rank = np.unique(e_all, return_inverse=True)
    e_rank = e_rank.reshape(-1).astype(np.int64)
    d_s = np.zeros(n, dtype=np.int32)
    idx = np.arange(n)
    level = 0
    while len(idx):
        s, e = s_all[idx], e_all[idx]
        first = np.ones(len(idx), dtype=bool)
        first[1:] = group[1:] != group[:-1]
        # the latest end so far in the group, before each interval
        latest = _group_cummax(e_rank[idx], group, distinct)
        run_start = first.copy()
        run_start[1:] |= s[1:] >= latest[:-1]
        heads = np.flatnonzero(run_start)
        run = np.cumsum(run_start) - 1
        nested = np.maximum.reduceat(e, heads) <= e[heads]
        d_s[idx[heads]] = level
        inside = nested[run] & ~run_start
        if not nested.all():
            _walk(idx[~nested[run]], run[~nested[run]], s_all, e_all, d_s, level)
        idx, group = idx[inside], run[inside]
        level += 1
    depth[order] = d_s
    return depth


def _group_cummax(rank: np.ndarray, group: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """Running maximum within each run of equal ``group`` (non-decreasing group numbers) of the
    values ``distinct[rank]`` (``distinct`` sorted): (group, rank) fits one int64, then one
    accumulate."""
    g = (group - group[0]).astype(np.int64) if len(group) else group.astype(np.int64)
    width = np.int64(len(distinct) + 1)
    best = np.maximum.accumulate(g * width + rank)
    return distinct[best - g * width]


#: rounds of pointer jumping in :func:`_walk` before it gives the run to the plain stack walk
_ROUNDS = 64


def _walk(members: np.ndarray, run: np.ndarray, s_all: np.ndarray, e_all: np.ndarray, d_s: np.ndarray, level: int) -> None:
    """The stack walk over runs of intervals (consecutive in ``members``, ``run`` numbering them)
    that each start on a stack of ``level`` enclosing intervals that do not end inside them.

    In numpy: the walk's stack under an interval is the chain of its parents, and its parent is
    the first interval on the chain from the one before it that has not ended by its start (the
    walk pops only from the top, so an interval ending early under one still open stays). Each
    interval starts from the one before it and, while the one it points at has ended, jumps to
    where that one points; every pointer keeps leading to the true parent through intervals
    ended by the start (starts are sorted), so they settle in a few rounds of jumping. The depth
    is then the length of the parent chain, counted by doubling."""
    s, e = s_all[members], e_all[members]
    n = len(s)
    parent = np.arange(-1, n - 1, dtype=np.int64)
    if n:
        parent[np.flatnonzero(np.concatenate([[True], run[1:] != run[:-1]]))] = -1  # a run starts on an empty stack
    todo = np.flatnonzero(parent >= 0)
    for _ in range(_ROUNDS):
        todo = todo[e[parent[todo]] <= s[todo]]  # pointing at an interval that has ended: jump on
        if not len(todo):
            break
        parent[todo] = parent[parent[todo]]
        todo = todo[parent[todo] >= 0]
    else:
        _walk_stack(members, run, s_all, e_all, d_s, level)
        return
    count = (parent >= 0).astype(np.int32)  # enclosing intervals between each and where it jumps to
    jump = parent.copy()
    live = np.flatnonzero(jump >= 0)
    while len(live):
        to = jump[live]
        count[live] += count[to]
        jump[live] = jump[to]
        live = live[jump[live] >= 0]
    d_s[members] = level + count


def _walk_stack(members: np.ndarray, run: np.ndarray, s_all: np.ndarray, e_all: np.ndarray, d_s: np.ndarray, level: int) -> None:
    """:func:`_walk` one interval at a time, for runs whose pointers take long to settle."""
    s_l, e_l, r_l = s_all[members].tolist(), e_all[members].tolist(), run.tolist()
    out = [0] * len(s_l)
    stack: list[int] = []
    prev = None
    for i, (s, e, r) in enumerate(zip(s_l, e_l, r_l)):
        if r != prev:
            stack.clear()
            prev = r
        while stack and stack[-1] <= s:
            stack.pop()
        out[i] = level + len(stack)
        stack.append(e)
    d_s[members] = out
