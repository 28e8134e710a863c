"""Put Nsight Compute counters on the kernels of a timeline trace of the same program.

An Nsight Systems export or a PyTorch trace says when each kernel ran; an Nsight Compute report
says what it did (FLOPs, DRAM bytes, throughput percentages), but with its kernels serialised and
replayed and, usually, only a window of the launches (``--launch-skip N --launch-count M``).
:func:`match_kernels` pairs the two kernel lists and :func:`merge_ncu` copies the measured
columns (and the metrics rows) onto the timeline's kernels.

Matching
--------
A kernel's *key* is (signature, grid, block), the grid and block as totals (blocks, threads); the
signature (:func:`kviewer.analysis.matching.identifier`) is the full name with its template
arguments in one spelling, so two instantiations of a template never pair. Where the two files spell names too differently for
that, the key falls back to the base name. The base name is the kernel's identifier without
namespaces, template arguments, argument list and return type
(``void at::native::vectorized_elementwise_kernel<8, ...>(int, ...)`` ->
``vectorized_elementwise_kernel``): the profilers demangle differently (``at::native::`` vs
``at::``, ``3ul`` vs ``(unsigned long)3``, ``(anonymous namespace)`` vs ``<unnamed>``), the base
identifier survives all of them.

Both lists are put in launch order (the timeline by correlation id when it has them, else by
start; the report in its own order). The report covers a window of the timeline's launches, so
the matcher looks for the window start ``o`` by a greedy in-order walk (the n-th report kernel with a
key against the n-th timeline kernel with that key at or after ``o``), then pairs the kernels by
aligning the report's whole key sequence with the timeline's launches from ``o`` on
(:func:`align_window`, :func:`near_pairs`), so gaps in the report's window and launches the
timeline lacks do not shift the pairs, also where the program repeats itself step after step. Candidate starts are the timeline positions whose key equals
the first report kernel's; the best start is the one where the walk matches the most kernels and
skips the fewest timeline kernels (a contiguous window skips none). When several starts tie —
a program that repeats one step gives a perfect fit at every step — the one closest to the
report's ``--launch-skip`` (kept by the ncu-rep loader in ``meta.ncu_capture.launch_skip``) wins,
else the earliest; the report says how many starts fit equally well and lists them
(``MatchReport.starts``), so a caller can offer the choice (``start=`` picks one).

A report taken with ``--kernel-name/-k`` (kept in ``meta.ncu_capture.kernel_filter``) counted only
the launches the filter matched, ``--launch-skip`` included: the timeline kernels the filter does
not match are left out of the search (and of the launch-skip tie-break), and the report says how
many were left out.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from bisect import bisect_left
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Sequence, TypeVar

import numpy as np
import pandas as pd

from kviewer.analysis.matching import identifier
from kviewer.core import schema
from kviewer.core.names import short_name
from kviewer.core.trace import Trace

def _measured_block() -> tuple[str, ...]:
    """The schema's measured block: every kernels column from ``flops_fp64`` up to the modelled
    ones (``model_flops``), so a measured column added there is merged without a second list."""
    names = schema.KERNELS.names
    return tuple(names[names.index("flops_fp64") : names.index("model_flops")])


#: kernels-table columns that a counter profiler measures and the merge copies
MEASURED = _measured_block()
#: launch attributes the timeline may lack (-1) and the report knows
LAUNCH_FILL = ("registers", "shared_mem")
#: how many report kernels score a candidate window start
SCORE_WINDOW = 256


def base_name(name: str) -> str:
    """The kernel's identifier without scope, template arguments, arguments and return type."""
    s = short_name(str(name)).strip()
    # last component of a scoped name, ignoring "::" inside parentheses ("(anonymous namespace)")
    depth = 0
    cut = 0
    for i, ch in enumerate(s):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and s.startswith("::", i):
            cut = i + 2
    return s[cut:] or s


def _total(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Blocks (threads) in a grid (block); -1 when unknown."""
    return np.where(x >= 0, np.maximum(x, 1) * np.maximum(y, 1) * np.maximum(z, 1), -1)


def kernel_keys(kernels: pd.DataFrame, exact: bool = False) -> list[tuple[str, int, int]]:
    """(base name, blocks in the grid, threads in a block) for every row of a kernels table; with
    ``exact`` the name is the full :func:`kviewer.analysis.matching.identifier` (template arguments
    kept, in one spelling whatever demangled it) instead.

    Totals rather than x/y/z: a rocprof kernel trace reports a 1024x1024 grid where its counter
    collection of the same dispatch reports 1048576 work-items in one dimension.
    """
    names = kernels["name"].astype(str).to_numpy()
    name_of = identifier if exact else base_name
    bases_of = {n: name_of(n) for n in set(names.tolist())}
    bases = [bases_of[n] for n in names]
    g = _total(*(kernels[c].to_numpy(dtype=np.int64) for c in ("grid_x", "grid_y", "grid_z")))
    b = _total(*(kernels[c].to_numpy(dtype=np.int64) for c in ("block_x", "block_y", "block_z")))
    return [(name, int(g[i]), int(b[i])) for i, name in enumerate(bases)]


def filter_mask(names: Sequence[str], kernel_filter: str) -> np.ndarray:
    """Which kernel names Nsight Compute's ``--kernel-name/-k FILTER`` selects.

    ``regex:EXPR`` searches the expression in the demangled name and in its base name; a plain
    filter must equal the base name, the short name or the full name (ncu compares the function
    name by default). An unusable regex selects everything (the filter then says nothing).
    """
    names = [str(n) for n in names]
    f = kernel_filter.strip()
    if f.startswith("regex:"):
        try:
            rx = re.compile(f[len("regex:"):])
        except re.error:
            return np.ones(len(names), dtype=bool)
        hit = {n: bool(rx.search(n) or rx.search(base_name(n))) for n in set(names)}
    else:
        hit = {n: f in (n, base_name(n), short_name(n)) for n in set(names)}
    return np.fromiter((hit[n] for n in names), dtype=bool, count=len(names))


def launch_order(kernels: pd.DataFrame) -> np.ndarray:
    """Row positions of a timeline's kernels in launch order."""
    corr = kernels["correlation"].to_numpy(dtype=np.int64)
    if len(corr) and (corr >= 0).all():
        return np.lexsort((kernels["start"].to_numpy(), corr))
    return np.argsort(kernels["start"].to_numpy(), kind="stable")


@dataclass
class MatchReport:
    """How the kernels of an ncu report were paired with the kernels of a timeline."""

    ncu_total: int
    timeline_total: int
    pairs: pd.DataFrame
    """columns ``timeline_id``, ``ncu_id`` (kernel ids), ``name`` (the timeline's name)"""
    unmatched_ncu: np.ndarray
    """ncu kernel ids without a partner"""
    unmatched_timeline: np.ndarray
    """timeline kernel ids without a partner (outside the report's window, or filtered out)"""
    start: int = -1
    """launch-order position in the timeline of the report's first kernel (-1: nothing matched)"""
    start_source: str = ""
    """"given", "search" or "search, closest to --launch-skip N" """
    equal_starts: int = 0
    """how many window starts fit as well as the chosen one (>1: the program repeats itself)"""
    notes: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """every window start that fits as well as the chosen one (timeline launch positions)"""
    start_kernels: list[int] = field(default_factory=list)
    """for each of ``starts``, the timeline kernel id the report's first matched kernel lands on"""
    filtered_out: int = 0
    """timeline kernels the report's ``-k`` filter does not select (never candidates)"""
    tool: str = "ncu"
    """who measured: "ncu" (Nsight Compute) or "counter run" (rocprof --pmc and the like)"""

    @property
    def matched(self) -> int:
        return len(self.pairs)

    def summary(self) -> str:
        return f"{self.tool} kernels matched: {self.matched} of {self.ncu_total}"


_Key = TypeVar("_Key", bound=Hashable)


def _places(seq: Sequence[_Key]) -> dict[_Key, list[int]]:
    """Each key's positions in ``seq``, ascending (what :func:`_walk` searches)."""
    out: dict[_Key, list[int]] = {}
    for p, key in enumerate(seq):
        out.setdefault(key, []).append(p)
    return out


def _walk(tl_pos: Mapping[_Key, list[int]], nk: Sequence[_Key], start: int) -> tuple[list[tuple[int, int]], int]:
    """Greedy in-order pairing from timeline position ``start``: [(ncu index, timeline position)]
    and the number of timeline kernels skipped between matches (``tl_pos``: each key's timeline
    positions, ascending)."""
    pairs: list[tuple[int, int]] = []
    cursor = start
    skipped = 0
    for i, key in enumerate(nk):
        positions = tl_pos.get(key)
        if positions is None:
            continue
        j = bisect_left(positions, cursor)
        if j >= len(positions):
            continue
        p = positions[j]
        if pairs:
            skipped += p - cursor
        pairs.append((i, p))
        cursor = p + 1
    return pairs, skipped


def aligned_pairs(a_codes: Sequence[int] | np.ndarray, b_codes: Sequence[int] | np.ndarray) -> list[tuple[int, int]]:
    """[(index in a, index in b)] of the elements the two code sequences share when aligned
    (``difflib.SequenceMatcher``: longest common blocks first, no junk heuristic), in block order.
    The codes are ints (keys encoded once: hashing ints is what makes long sequences fast)."""
    a = a_codes.tolist() if isinstance(a_codes, np.ndarray) else list(a_codes)
    b = b_codes.tolist() if isinstance(b_codes, np.ndarray) else list(b_codes)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(i + t, j + t) for i, j, size in sm.get_matching_blocks() for t in range(size)]


#: the most cells (len(a) x len(b)) :func:`aligned_pairs` is given: on a small alphabet (kinds and
#: precisions) ``difflib`` takes about quadratic time, ~0.3 s at 2,000 x 2,000, ~1.2 s at 4,000 x 4,000
ALIGN_MAX_CELLS = 4_000_000


def occurrence_pairs(a_codes: np.ndarray, b_codes: np.ndarray) -> list[tuple[int, int]]:
    """[(index in a, index in b)]: the n-th occurrence of each code in ``a`` with the n-th in ``b``
    (linear time; the same pairs as :func:`aligned_pairs` where the sequences are equal, where one
    lacks an element a run of pairs after it may shift, which an alignment avoids). Sorted by the
    index in a."""
    a = np.asarray(a_codes, dtype=np.int64)
    b = np.asarray(b_codes, dtype=np.int64)
    if not len(a) or not len(b):
        return []
    fa = pd.DataFrame({"code": a, "i": np.arange(len(a))})
    fb = pd.DataFrame({"code": b, "j": np.arange(len(b))})
    fa["n"] = fa.groupby("code").cumcount()
    fb["n"] = fb.groupby("code").cumcount()
    both = fa.merge(fb, on=["code", "n"], how="inner").sort_values("i")
    return list(zip(both["i"].tolist(), both["j"].tolist()))


#: how far past the report's length the aligned timeline segment reaches (gaps in the window)
ALIGN_SLACK = 64
#: how many elements past a mismatch :func:`near_pairs` compares to choose how to resume
NEAR_WINDOW = 32
#: the longest windows :func:`near_pairs` compares (blocks added or missing up to about this long)
NEAR_WINDOW_MAX = 2048
#: how many later occurrences of a mismatched element :func:`near_pairs` tries as the place to resume
NEAR_CANDIDATES = 16
#: matched runs are found this many elements at a time
_RUN = 256


def near_pairs(
    a_codes: Sequence[int] | np.ndarray, b_codes: Sequence[int] | np.ndarray, b_weight: float = 1.0
) -> list[tuple[int, int]] | None:
    """[(index in a, index in b)] of two sequences that are nearly the same: a few elements
    added, missing or replaced, in runs of any length, in order. Sorted by both indices. None
    where they are not nearly the same (more than :func:`near_edits` mismatches).

    Both are walked together; equal runs pair element by element. At a mismatch ``a[i] != b[j]``
    there are three ways on: ``b[j:p]`` is missing from ``a`` (``a[i]`` pairs with a later
    ``b[p]``), ``a[i:q]`` is missing from ``b``, or the two were replaced by each other. Each way
    (up to :data:`NEAR_CANDIDATES` later occurrences for the first two) costs the elements it
    leaves unpaired: those it passes over, and those of the next :data:`NEAR_WINDOW` that find no
    partner in the other's next window (their longest common subsequence: an estimate of the
    edits still to come), an element of ``b`` weighing ``b_weight`` of one of ``a`` (0: ``a`` is
    a part of ``b``, e.g. a report's launches of a timeline, and only ``a``'s unpaired elements
    count). The cheapest wins; at a tie a way that pairs, then the one that passes over fewer
    elements. Unlike :func:`aligned_pairs` (longest common blocks first,
    each placed at its *earliest* occurrence), a program that repeats itself (steps, layers)
    cannot anchor a block a period away from where it ran and leave everything before it
    unpaired. Time: linear in the runs, plus a vector step per mismatch.
    """
    a = np.asarray(a_codes, dtype=np.int64)
    b = np.asarray(b_codes, dtype=np.int64)
    n, m = len(a), len(b)
    pairs_i: list[np.ndarray] = []
    pairs_j: list[np.ndarray] = []
    if not n or not m:
        return []
    # padded with values no code takes (and unequal to each other) so windows need no bounds
    lo = int(min(a.min(), b.min()))
    ap = np.concatenate([a, np.full(NEAR_WINDOW_MAX + 1, lo - 1, dtype=np.int64)])
    bp = np.concatenate([b, np.full(NEAR_WINDOW_MAX + 1, lo - 2, dtype=np.int64)])
    pos_a = _positions(a)
    pos_b = _positions(b)
    edits = near_edits(n, m)
    used = 0
    i = j = 0
    while i < n and j < m:
        # the run of equal elements from (i, j)
        k = min(_RUN, n - i, m - j)
        eq = a[i : i + k] == b[j : j + k]
        run = k if eq.all() else int(np.argmin(eq))
        if run:
            pairs_i.append(np.arange(i, i + run))
            pairs_j.append(np.arange(j, j + run))
            i += run
            j += run
            continue
        used += 1
        if used > edits or (used > NEAR_EDITS_FREE and used * 16 > i + j):  # so far, too many to be near
            return None
        pb = _later(pos_b, int(a[i]), j)  # a[i] found later in b: b[j:p] missing from a
        qa = _later(pos_a, int(b[j]), i)  # b[j] found later in a: a[i:q] missing from b
        # the nearest way of each kind first; the others only where one of them could cost less
        way, cost = _way_on(ap, bp, n, m, i, j, pb[:1], qa[:1], b_weight, lo)
        bound = min(b_weight * float(pb[1] - j) if len(pb) > 1 else np.inf, float(qa[1] - i) if len(qa) > 1 else np.inf)
        if cost > bound:
            way, cost = _way_on(ap, bp, n, m, i, j, pb, qa, b_weight, lo)
        if way is None:
            i += 1
            j += 1
            continue
        i, j = way
        pairs_i.append(np.array([i]))
        pairs_j.append(np.array([j]))
        i += 1
        j += 1
    if not pairs_i:
        return []
    return list(zip(np.concatenate(pairs_i).tolist(), np.concatenate(pairs_j).tolist()))


#: mismatches :func:`near_pairs` handles before it asks how many there are for the length walked
NEAR_EDITS_FREE = 64


def near_edits(n: int, m: int) -> int:
    """The most mismatches two sequences of these lengths may have and still be nearly the same
    (also at any point of the walk, past the first :data:`NEAR_EDITS_FREE`, one per 16 elements
    walked of the two)."""
    return NEAR_EDITS_FREE + (n + m) // 16


def _way_on(ap: np.ndarray, bp: np.ndarray, n: int, m: int, i: int, j: int, pb: np.ndarray, qa: np.ndarray,
            b_weight: float, lo: int) -> tuple[tuple[int, int] | None, float]:
    """At a mismatch of ``a[i]`` and ``b[j]`` (``ap``, ``bp``: padded), the way on and its cost:
    the pair it makes ((i, p) for a ``p`` of ``pb``, (q, j) for a ``q`` of ``qa``), or None for
    a replacement.

    Each way costs the elements it leaves unpaired: those it passes over and those of both next
    windows left without a partner in the other (their longest common subsequence: an estimate of
    the edits still to come); the cheapest wins, at a tie one that pairs, then the one passing
    over fewest. Where one that passes over a block resumes cleanly yet costs more than a
    replacement, windows as long as the block decide.
    """
    w = NEAR_WINDOW
    # where each way resumes: replaced (i + 1, j + 1), then (i + 1, p + 1), then (q + 1, j + 1)
    ra = np.concatenate([[i + 1], np.full(len(pb), i + 1), qa + 1])
    rb = np.concatenate([[j + 1], pb + 1, np.full(len(qa), j + 1)])
    passed = np.concatenate([[2], pb - j, qa - i])
    passed_cost = np.concatenate([[1 + b_weight], b_weight * (pb - j), qa - i])
    pairs = np.concatenate([[1], np.zeros(len(pb) + len(qa), dtype=np.int64)])
    span = w
    while True:
        steps = np.arange(span)
        # windows of equal length, as far as both sequences reach (past an end is no loss;
        # an element of the longer one past the other's end stays unpaired whatever it meets)
        real_a, real_b = np.clip(n - ra, 0, span), np.clip(m - rb, 0, span)
        most = np.minimum(real_a, real_b)
        reach = most[:, None] > steps
        common = _common(np.where(reach, ap[ra[:, None] + steps], lo - 1), np.where(reach, bp[rb[:, None] + steps], lo - 2))
        cost = passed_cost + (real_a - common) + b_weight * (real_b - common)
        x = int(np.lexsort((passed, pairs, cost))[0])
        # a longer look only where a replacement would leave most of its window unpaired
        # while a way that passes over a block resumes without a loss
        clean = (common[1:] == most[1:]) & (most[1:] >= w)  # a window's worth, not an end's few
        if x or span >= NEAR_WINDOW_MAX or 2 * common[0] >= most[0] or not clean.any():
            break
        span *= 4
    if x == 0:
        return None, float(cost[0])
    return (int(ra[x]) - 1, int(rb[x]) - 1), float(cost[x])


def best_pairs(
    a_codes: Sequence[int] | np.ndarray, b_codes: Sequence[int] | np.ndarray, b_weight: float = 1.0
) -> list[tuple[int, int]]:
    """The alignment of ``a`` with ``b`` that pairs more elements: :func:`near_pairs`, or
    :func:`aligned_pairs` where that is affordable (:data:`ALIGN_MAX_CELLS`) and pairs more
    (sequences that differ by more than a few edits, e.g. a step that starts with a run the other
    lacks, where its longest blocks first find more in common). Both pair only equal codes, in
    order; the one closer to the longest common subsequence wins, at a tie :func:`near_pairs`.
    Sequences that are not nearly the same and too long to align pair by occurrence.
    """
    near = near_pairs(a_codes, b_codes, b_weight)
    if len(a_codes) * len(b_codes) <= ALIGN_MAX_CELLS:
        blocks = aligned_pairs(a_codes, b_codes)
        if near is None or len(blocks) > len(near):
            return blocks
    return near if near is not None else occurrence_pairs(np.asarray(a_codes), np.asarray(b_codes))


def _common(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Length of the longest common subsequence of each row of ``x`` with the same row of ``y``
    (both (k, w)): the textbook recurrence a row of ``x`` at a time, all k and w at once."""
    k, w = x.shape
    prev = np.zeros((k, w + 1), dtype=np.int64)
    for r in range(w):
        took = np.where(x[:, r : r + 1] == y, prev[:, :-1] + 1, prev[:, 1:])
        prev[:, 1:] = np.maximum.accumulate(took, axis=1)
    return prev[:, -1]


def _positions(x: np.ndarray) -> dict[int, np.ndarray]:
    """Each value's indices in ``x``, ascending."""
    order = np.argsort(x, kind="stable")
    vals, first = np.unique(x[order], return_index=True)
    return dict(zip(vals.tolist(), np.split(order, first[1:])))


def _later(pos: dict[int, np.ndarray], value: int, at: int) -> np.ndarray:
    """Up to :data:`NEAR_CANDIDATES` indices of ``value`` at or after ``at``."""
    p = pos.get(value)
    if p is None:
        return np.zeros(0, dtype=np.int64)
    k = int(np.searchsorted(p, at))
    return p[k : k + NEAR_CANDIDATES]


def align_window(tkeys: Sequence[tuple], nkeys: Sequence[tuple], start: int) -> list[tuple[int, int]]:
    """[(report index, timeline position)] from aligning the report's key sequence with the
    timeline's launches from ``start`` on (:func:`near_pairs`).

    Timeline launches of a kernel the report never ran cannot be partners and are left out first
    (a report of the launches a kernel filter selected is then a window again). Unlike a greedy
    in-order walk, a launch the report has and the timeline lacks (or the other way round: a gap
    in its window, a failed replay) does not shift the pairs after it. A timeline launch left
    without a partner weighs half a report kernel: the report is a part of the timeline.
    """
    lo = max(int(start), 0)
    codes: dict[tuple, int] = {}
    a = [codes.setdefault(k, len(codes)) for k in nkeys]
    at: list[int] = []
    b: list[int] = []
    for p, key in enumerate(tkeys[lo:], start=lo):
        c = codes.get(key)
        if c is not None:
            at.append(p)
            b.append(c)
            if len(b) == 2 * len(a) + ALIGN_SLACK:  # the report covers about its own length
                break
    pairs = near_pairs(a, b, b_weight=0.5)
    if pairs is None:  # not a window of the timeline with a few differences
        if len(a) * len(b) <= ALIGN_MAX_CELLS:
            pairs = aligned_pairs(a, b)
        else:
            pairs = _walk(_places(b), a, 0)[0]
    return [(i, at[j]) for i, j in pairs]


def match_kernels(timeline: Trace, ncu: Trace, start: int | None = None) -> MatchReport:
    """Pair the report's kernels with the timeline's (see the module docstring).

    Parameters
    ----------
    timeline
        A trace with real kernel times (Nsight Systems, PyTorch profiler, ...).
    ncu
        A counter report (``source_format`` ``ncu-rep`` or ``ncu-csv``), kernels in launch order.
    start
        The timeline launch-order position of the report's first kernel, when known; searched
        for otherwise.
    """
    tk_df, nk_df = timeline.kernels, ncu.kernels
    order = launch_order(tk_df)
    full_pos = np.empty(len(order), dtype=np.int64)
    full_pos[order] = np.arange(len(order))
    capture = ncu.meta.ncu_capture
    kfilter = capture.kernel_filter if capture is not None else None
    filtered_out = 0
    if isinstance(kfilter, str) and kfilter.strip() and len(order):
        keep = filter_mask(tk_df["name"].astype(str).to_numpy()[order].tolist(), kfilter)
        filtered_out = int((~keep).sum())
        order = order[keep]
    # the same kernel: full signature (two instantiations of one template never pair), unless the
    # two files spell names so differently that the signatures find fewer partners than base names
    tkeys_all = kernel_keys(tk_df, exact=True)
    nkeys = kernel_keys(nk_df, exact=True)
    have = set(tkeys_all)
    exact_hits = sum(k in have for k in nkeys)
    coarse_t, coarse_n = kernel_keys(tk_df), kernel_keys(nk_df)
    have_c = set(coarse_t)
    exact_names = exact_hits >= sum(k in have_c for k in coarse_n)
    if not exact_names:
        tkeys_all, nkeys = coarse_t, coarse_n
    tkeys = [tkeys_all[i] for i in order]
    tl_pos = _places(tkeys)
    notes: list[str] = []
    if not exact_names:
        notes.append("the two files spell kernel names differently: paired on base names (no template arguments)")
    if filtered_out:
        notes.append(f"{filtered_out} timeline kernel(s) are not selected by the report's kernel filter ({kfilter!r}) and were not candidates")

    equal = 0
    ties: list[int] = []
    tie_kernels: list[int] = []
    source = "given"
    if start is None and nkeys:
        source = "search"
        first = next((i for i, k in enumerate(nkeys) if k in tl_pos), None)
        if first is None:
            start = -1
            notes.append("no report kernel has a (name, grid, block) that the timeline has")
        else:
            hint = capture.launch_skip if capture is not None else None
            scored: list[tuple] = []
            window = nkeys[first : first + SCORE_WINDOW]
            for cand in tl_pos[nkeys[first]]:
                pairs, skipped = _walk(tl_pos, window, int(cand))
                scored.append((len(pairs), -skipped, int(cand)))
            top = max(s[:2] for s in scored)
            ties = [s[2] for s in scored if s[:2] == top]
            equal = len(ties)
            ids = tk_df["id"].to_numpy()
            tie_kernels = [int(ids[int(order[c])]) for c in ties]
            ties = [c - first for c in ties]
            if isinstance(hint, int) and len(ties) > 1:
                # --launch-skip counts the launches the -k filter selects, unless the report was
                # taken with --launch-skip-before-match (then it counts every launch)
                every = capture is not None and capture.skip_before_match
                rank = {c: (int(full_pos[order[c + first]]) - first if every else c) for c in ties}
                # closest; at equal distance the later one (ncu profiles the first match at or after the skip)
                start = min(ties, key=lambda c: (abs(rank[c] - hint), rank[c] < hint, c))
                source = f"search, closest to --launch-skip {hint}"
            else:
                start = ties[0]
            if equal > 1:
                notes.append(
                    f"{equal} window starts fit equally well (the program repeats itself); "
                    f"chose timeline launch {start} ({source})"
                )
    start = -1 if start is None else int(start)
    pairs = align_window(tkeys, nkeys, start) if start >= 0 else []

    tl_ids = tk_df["id"].to_numpy()
    nc_ids = nk_df["id"].to_numpy()
    t_idx = np.asarray([order[p] for _, p in pairs], dtype=np.int64)
    n_idx = np.asarray([i for i, _ in pairs], dtype=np.int64)
    pair_df = pd.DataFrame(
        {
            "timeline_id": tl_ids[t_idx] if len(t_idx) else np.zeros(0, dtype=np.int64),
            "ncu_id": nc_ids[n_idx] if len(n_idx) else np.zeros(0, dtype=np.int64),
            "name": tk_df["name"].astype(str).to_numpy()[t_idx] if len(t_idx) else np.zeros(0, dtype=object),
        }
    )
    unmatched_ncu = np.setdiff1d(nc_ids, pair_df["ncu_id"].to_numpy())
    unmatched_tl = np.setdiff1d(tl_ids, pair_df["timeline_id"].to_numpy())
    if len(unmatched_ncu):
        left = np.flatnonzero(np.isin(nc_ids, unmatched_ncu)).tolist()
        absent = sum(nkeys[i] not in tl_pos for i in left)
        if absent:
            notes.append(f"{absent} report kernel(s) found no timeline kernel with the same name, grid and block")
        if len(left) > absent:
            notes.append(f"{len(left) - absent} report kernel(s) found no launch of theirs at their place in the window "
                         "(the report ran them once more, or the timeline elsewhere)")
    return MatchReport(
        ncu_total=len(nk_df),
        timeline_total=len(tk_df),
        pairs=pair_df,
        unmatched_ncu=unmatched_ncu,
        unmatched_timeline=unmatched_tl,
        start=start,
        start_source=source if start >= 0 else "",
        equal_starts=equal,
        notes=notes,
        tool="ncu" if ncu.meta.source_format.startswith("ncu") else "counter run",
        starts=ties if ties else ([start] if start >= 0 and len(pair_df) else []),
        start_kernels=tie_kernels if ties else ([int(pair_df["timeline_id"].to_numpy()[0])] if start >= 0 and len(pair_df) else []),
        filtered_out=filtered_out,
    )


def known(col: str, values: np.ndarray) -> np.ndarray:
    """Which values of a kernels column are known (not the schema's missing value)."""
    spec = schema.KERNELS.column(col)
    if spec.dtype == schema.FLOAT:
        return ~np.isnan(values.astype(np.float64))
    if spec.dtype in (schema.INT, schema.I32):
        return values != (-1 if spec.missing is None else spec.missing)
    if spec.dtype == schema.BOOL:
        return values.astype(bool)
    return np.asarray([str(v) != "" for v in values], dtype=bool)


def copy_values(kernels: pd.DataFrame, col: str, rows: np.ndarray, values: np.ndarray, where: np.ndarray) -> None:
    """``kernels[col][rows[where]] = values[where]`` for any column dtype (in place on ``kernels``,
    a frame the caller owns)."""
    if not where.any():
        return
    spec = schema.KERNELS.column(col)
    if spec.dtype == schema.CAT:
        arr = kernels[col].astype(str).to_numpy(dtype=object).copy()
        arr[rows[where]] = np.asarray(values, dtype=object)[where]
        kernels[col] = pd.Categorical(arr)
        return
    arr = kernels[col].to_numpy().copy()
    arr[rows[where]] = values[where]
    kernels[col] = arr


def merge_ncu(timeline: Trace, ncu: Trace, start: int | None = None) -> tuple[Trace, MatchReport]:
    """A copy of ``timeline`` whose matched kernels carry the report's measured columns.

    The timeline keeps its times; ``registers``/``shared_mem`` are filled where the timeline did
    not know them; the report's ``metrics`` rows of matched kernels are appended to the
    timeline's metrics with their kernel ids translated. Inputs are not modified.
    """
    report = match_kernels(timeline, ncu, start)
    kernels = timeline.kernels.copy()
    if report.matched:
        t_rows = report.pairs["timeline_id"].to_numpy()  # ids are row positions (schema invariant)
        n_rows = report.pairs["ncu_id"].to_numpy()
        for col in MEASURED:
            src = ncu.kernels[col].to_numpy()[n_rows]
            copy_values(kernels, col, t_rows, src, known(col, src))
        for col in LAUNCH_FILL:
            src = ncu.kernels[col].to_numpy()[n_rows]
            dst = kernels[col].to_numpy().copy()
            fill = (dst[t_rows] < 0) & (src >= 0)
            dst[t_rows[fill]] = src[fill]
            kernels[col] = dst
        counters = kernels["counters"].astype(str).to_numpy(dtype=object).copy()
        counters[t_rows] = "measured"
        kernels["counters"] = pd.Categorical(counters)
        source = kernels["counters_from"].to_numpy().copy()
        source[t_rows] = t_rows
        kernels["counters_from"] = source
    metrics = timeline.metrics
    if report.matched and len(ncu.metrics):
        to_tl = dict(zip(report.pairs["ncu_id"].to_numpy().tolist(), report.pairs["timeline_id"].to_numpy().tolist()))
        m = ncu.metrics[ncu.metrics["kernel"].isin(list(to_tl))]
        if len(timeline.metrics):
            # what the timeline already says about a kernel (its launch attributes) stays once
            have = set(zip(timeline.metrics["kernel"].tolist(), timeline.metrics["metric"].astype(str).tolist()))
            keep = [(k, mm) not in have for k, mm in zip(m["kernel"].map(to_tl).tolist(), m["metric"].astype(str).tolist())]
            m = m[np.asarray(keep, dtype=bool)]
        mapped = {
            "kernel": m["kernel"].map(to_tl).to_numpy(dtype=np.int64),
            "section": m["section"].astype(str).to_numpy(dtype=object),
            "metric": m["metric"].astype(str).to_numpy(dtype=object),
            "unit": m["unit"].astype(str).to_numpy(dtype=object),
            "value": m["value"].to_numpy(dtype=np.float64),
            "text": m["text"].to_numpy(dtype=object),
        }
        old = timeline.metrics
        cols = {
            k: np.concatenate([old[k].astype(str).to_numpy(dtype=object) if k in ("section", "metric", "unit") else old[k].to_numpy(), v])
            for k, v in mapped.items()
        }
        metrics = schema.make_table("metrics", len(cols["kernel"]), cols)
    meta = dataclasses.replace(
        timeline.meta,
        extra={**timeline.meta.extra, "ncu": f"{ncu.meta.path}: {report.matched} of {report.ncu_total} kernels matched"},
        warnings=list(timeline.meta.warnings),
    )
    merged = dataclasses.replace(timeline, meta=meta, kernels=kernels, metrics=metrics)
    return merged, report


def describe(report: MatchReport) -> list[str]:
    """Lines for a terminal: the summary, where the window starts, and the notes."""
    lines = [report.summary()]
    if report.start >= 0:
        lines.append(f"  window starts at timeline launch {report.start} ({report.start_source})")
    lines += [f"  {n}" for n in report.notes]
    return lines


__all__ = ["MEASURED", "MatchReport", "copy_values", "known", "base_name", "describe", "align_window", "aligned_pairs", "kernel_keys", "launch_order", "match_kernels", "merge_ncu"]
