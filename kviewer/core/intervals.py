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
    d_s = np.zeros(n, dtype=np.int32)
    idx = np.arange(n)
    level = 0
    while len(idx):
        s, e = s_all[idx], e_all[idx]
        first = np.ones(len(idx), dtype=bool)
        first[1:] = group[1:] != group[:-1]
        # the latest end so far in the group, before each interval
        latest = _group_cummax(e, group)
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


def _group_cummax(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each run of equal ``group`` (non-decreasing group
    numbers). Values are ranked so that (group, rank) fits one int64, then one accumulate."""
    distinct, rank = np.unique(values, return_inverse=True)
    g = (group - group[0]).astype(np.int64) if len(group) else group.astype(np.int64)
    width = np.int64(len(distinct) + 1)
    best = np.maximum.accumulate(g * width + rank.reshape(-1))
    return distinct[best - g * width]


def _walk(members: np.ndarray, run: np.ndarray, s_all: np.ndarray, e_all: np.ndarray, d_s: np.ndarray, level: int) -> None:
    """The stack walk over runs of intervals (consecutive in ``members``, ``run`` numbering them)
    that each start on a stack of ``level`` enclosing intervals that do not end inside them."""
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
