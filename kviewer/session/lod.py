"""Level of detail for timeline lanes: a slice mipmap over sorted numpy arrays (no Qt).

A *lane* is one row of the timeline whose bars do not nest (one GPU stream, one CPU depth). Its
bars are sorted by start. Drawing a million bars per frame is impossible in 16 ms, and pointless:
a screen is ~2000 pixels wide. So, as Perfetto's slice mipmap does, every lane keeps a few
pre-merged *levels*: at level ``k`` consecutive bars narrower than ``bucket_k`` ns whose gap is
smaller than ``bucket_k`` are merged into one bar (coloured like its longest member). A frame picks
the coarsest level whose bucket is at most one pixel, takes the visible slice with
``searchsorted`` and merges once more at pixel resolution. The number of bars a frame touches is
then bounded by a small multiple of the pixel width, whatever the trace size.

The levels are built once per lane (in the loading thread), so panning and zooming only redo the
cheap per-frame part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: bucket of the first merged level, ns; finer zoom levels draw the raw bars
FIRST_BUCKET_NS = 64
#: each level merges at a bucket this many times wider than the one before
LEVEL_FACTOR = 4


@dataclass
class Level:
    """Bars of one lane at one resolution.

    Attributes
    ----------
    bucket
        Merge threshold in ns (0 for the raw level).
    start, end
        int64 ns, sorted by start.
    cend
        Running maximum of ``end``: monotonic, so ``searchsorted(cend, t0)`` finds the first bar
        that may reach into a view starting at ``t0`` even when bars overlap slightly.
    colour
        Palette index of each bar (the longest member's for merged bars).
    rep
        Index into the lane's raw arrays of the representative (longest) member.
    count
        How many raw bars each bar stands for (1 = a single bar).
    maxdur
        Duration of the longest member (used to pick the colour when merging further).
    """

    bucket: int
    start: np.ndarray
    end: np.ndarray
    cend: np.ndarray
    colour: np.ndarray
    rep: np.ndarray
    count: np.ndarray
    maxdur: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])


@dataclass
class Merged:
    """The result of :func:`merge_runs` (float or int coordinates)."""

    start: np.ndarray
    end: np.ndarray
    colour: np.ndarray
    rep: np.ndarray
    count: np.ndarray
    maxdur: np.ndarray


def merge_runs(
    start: np.ndarray,
    end: np.ndarray,
    colour: np.ndarray,
    rep: np.ndarray,
    count: np.ndarray,
    maxdur: np.ndarray,
    threshold: float,
) -> Merged:
    """Merge runs of consecutive bars narrower than ``threshold`` separated by gaps below it.

    Works on ns (building levels) and on pixels (per frame) alike. Bars must be sorted by start.
    A merged bar spans its first start to its members' last end, and takes the colour and
    representative of its longest member, so a dense region looks like what dominates it.
    """
    n = start.shape[0]
    if n <= 1:
        return Merged(start, end, colour, rep, count, maxdur)
    width = end - start
    narrow = width < threshold
    reach = np.maximum.accumulate(end)
    gap_small = (start[1:] - reach[:-1]) < threshold
    join = narrow[1:] & narrow[:-1] & gap_small
    if not join.any():
        return Merged(start, end, colour, rep, count, maxdur)
    head = np.empty(n, dtype=bool)
    head[0] = True
    np.logical_not(join, out=head[1:])
    firsts = np.flatnonzero(head)
    new_start = start[firsts]
    new_end = np.maximum.reduceat(end, firsts)
    new_count = np.add.reduceat(count, firsts)
    seg_max = np.maximum.reduceat(maxdur, firsts)
    # the longest member of each run: the first position where maxdur reaches the run's maximum
    seg_id = np.cumsum(head) - 1
    hits = np.flatnonzero(maxdur == seg_max[seg_id])
    _, first_hit = np.unique(seg_id[hits], return_index=True)
    pick = hits[first_hit]
    return Merged(new_start, new_end, colour[pick], rep[pick], new_count, seg_max)


@dataclass
class LaneLOD:
    """The mipmap of one lane."""

    levels: list[Level] = field(default_factory=list)

    @classmethod
    def build(cls, start: np.ndarray, end: np.ndarray, colour: np.ndarray) -> LaneLOD:
        """Build every level for bars sorted by start (int64 ns) with palette indices."""
        start = np.ascontiguousarray(start, dtype=np.int64)
        end = np.ascontiguousarray(end, dtype=np.int64)
        # a bar with a bad (negative) duration is drawn as a point rather than breaking the order
        end = np.maximum(end, start)
        colour = np.ascontiguousarray(colour, dtype=np.uint16)
        n = start.shape[0]
        raw = Level(
            0,
            start,
            end,
            np.maximum.accumulate(end) if n else end,
            colour,
            np.arange(n, dtype=np.int64),
            np.ones(n, dtype=np.int64),
            end - start,
        )
        levels = [raw]
        if n <= 1:
            return cls(levels)
        span = int(raw.cend[-1] - start[0])
        bucket = FIRST_BUCKET_NS
        prev = raw
        while bucket < max(span, 1) * LEVEL_FACTOR and len(prev) > 1:
            m = merge_runs(prev.start, prev.end, prev.colour, prev.rep, prev.count, prev.maxdur, bucket)
            if m.start.shape[0] == len(prev):
                # nothing merged at this resolution: share the arrays instead of copying them
                lvl = Level(bucket, prev.start, prev.end, prev.cend, prev.colour, prev.rep, prev.count, prev.maxdur)
            else:
                lvl = Level(bucket, m.start, m.end, np.maximum.accumulate(m.end), m.colour, m.rep, m.count, m.maxdur)
            levels.append(lvl)
            prev = lvl
            bucket *= LEVEL_FACTOR
        return cls(levels)

    @property
    def raw(self) -> Level:
        return self.levels[0]

    def level_for(self, ns_per_px: float) -> Level:
        """The coarsest level whose bucket is at most one pixel wide."""
        best = self.levels[0]
        for lvl in self.levels[1:]:
            if lvl.bucket <= ns_per_px:
                best = lvl
            else:
                break
        return best

    def visible(self, t0: float, t1: float, ns_per_px: float) -> tuple[Level, int, int]:
        """The level to draw and the slice ``[i0, i1)`` of its bars that reach into ``[t0, t1]``."""
        lvl = self.level_for(ns_per_px)
        i0 = int(np.searchsorted(lvl.cend, t0, side="left"))
        i1 = int(np.searchsorted(lvl.start, t1, side="right"))
        return lvl, i0, max(i0, i1)

    def frame(self, t0: float, t1: float, width_px: float) -> Merged:
        """Bars to draw for the view ``[t0, t1]`` on ``width_px`` pixels, in pixel x coordinates.

        Bars are clipped to a little outside the view (so huge coordinates never reach the
        painter) and merged at one-pixel resolution.
        """
        span = max(t1 - t0, 1e-9)
        ns_per_px = span / max(width_px, 1.0)
        lvl, i0, i1 = self.visible(t0, t1, ns_per_px)
        scale = width_px / span
        xs = (lvl.start[i0:i1] - t0) * scale
        xe = (lvl.end[i0:i1] - t0) * scale
        np.clip(xs, -2.0, width_px + 2.0, out=xs)
        np.clip(xe, -2.0, width_px + 2.0, out=xe)
        return merge_runs(xs, xe, lvl.colour[i0:i1], lvl.rep[i0:i1], lvl.count[i0:i1], lvl.maxdur[i0:i1], 1.0)

    def hit(self, t: float, tolerance_ns: float) -> int:
        """Raw index of the bar under time ``t`` (or the nearest within the tolerance), else -1."""
        raw = self.raw
        n = len(raw)
        if n == 0:
            return -1
        i = int(np.searchsorted(raw.start, t, side="right")) - 1
        # a bar that contains t wins; among near misses, the closest edge
        best, best_d = -1, tolerance_ns
        for j in (i, i - 1, i + 1):
            if 0 <= j < n:
                s, e = raw.start[j], raw.end[j]
                if s <= t <= e:
                    return j
                d = s - t if t < s else t - e
                if d <= best_d:
                    best, best_d = j, d
        return best


@dataclass
class StepCounter:
    """A counter track: a step function of time built from intervals (no Qt).

    ``value(t)`` is how many intervals cover ``t`` (kernels in flight), or, with ``busy=True``,
    1 where at least one does and 0 elsewhere (GPU utilisation). A frame asks for the mean value
    over each pixel column: the running integral at the column edges, differenced, so a pixel that
    is 30 % busy reads 0.3 however many kernels it holds.
    """

    t: np.ndarray
    """breakpoints, int64 ns, strictly increasing"""
    v: np.ndarray
    """value on ``[t[j], t[j+1])`` (0 after the last breakpoint)"""
    integral: np.ndarray
    """integral of the value from ``t[0]`` to ``t[j]`` (value x ns)"""
    _tf: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def from_intervals(cls, start: np.ndarray, end: np.ndarray, busy: bool = False) -> StepCounter:
        start = np.asarray(start, dtype=np.int64)
        end = np.maximum(np.asarray(end, dtype=np.int64), start)
        times = np.concatenate([start, end])
        delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
        # at a tie the end goes first: back-to-back kernels are not in flight together
        order = np.lexsort((delta, times))
        times = times[order]
        count = np.cumsum(delta[order])
        if not len(times):
            return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
        last = np.r_[times[1:] != times[:-1], True]
        t = times[last]
        v = count[last].astype(np.float64)
        if busy:
            v = np.minimum(v, 1.0)
        integral = np.r_[0.0, np.cumsum(v[:-1] * np.diff(t).astype(np.float64))]
        return cls(t, v, integral)

    @property
    def peak(self) -> float:
        return float(self.v.max()) if len(self.v) else 0.0

    def integral_at(self, x: np.ndarray) -> np.ndarray:
        """The integral of the value from the first breakpoint up to each time in ``x``."""
        x = np.asarray(x, dtype=np.float64)
        if not len(self.t):
            return np.zeros(x.shape)
        if self._tf is None:
            # searchsorted of float times in an int64 array converts the array on every call
            # (2 million breakpoints: milliseconds per frame); convert once
            self._tf = self.t.astype(np.float64)
        j = np.searchsorted(self._tf, x, side="right") - 1
        jc = np.clip(j, 0, len(self.t) - 1)
        out = self.integral[jc] + self.v[jc] * (x - self._tf[jc])
        return np.where(j < 0, 0.0, out)

    def mean(self, t0: float, t1: float) -> float:
        """Mean value over ``[t0, t1]``."""
        if t1 <= t0:
            return 0.0
        a, b = self.integral_at(np.array([t0, t1], dtype=np.float64))
        return float((b - a) / (t1 - t0))

    def per_pixel(self, t0: float, t1: float, width_px: int) -> np.ndarray:
        """Mean value over each of ``width_px`` equal columns of ``[t0, t1]``."""
        n = max(int(width_px), 1)
        edges = np.linspace(t0, t1, n + 1)
        return np.diff(self.integral_at(edges)) / max((t1 - t0) / n, 1e-12)


#: samples per block of each coarser level of a :class:`SampledCounter`
SAMPLE_BLOCK = 32


@dataclass
class SampledCounter:
    """A counter track of sampled values (GPU metrics): each sample's value holds until the next
    sample. A frame asks for the lowest and highest value over each pixel column, so a short peak
    shows at any zoom (a mean per pixel would hide it). Like the lane mipmap, coarser levels keep
    the min/max of blocks of :data:`SAMPLE_BLOCK` samples (and blocks of blocks), so a frame
    touches a small multiple of the pixel width, not every sample: 600,000 samples a metric
    (10 kHz x 60 s) cost a frame what a few thousand do. ``t``/``v`` are views of the trace's
    ``gpu_samples`` (no copy); the levels add about 2/SAMPLE_BLOCK of that.
    """

    t: np.ndarray
    """sample times, int64 ns, sorted"""
    v: np.ndarray
    """float64 values"""
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    """per coarser level: (first time of each block, block min, block max)"""
    hold_ns: float = math.inf
    """how long a sample's value is held when no sample follows (twice the median sampling
    period): after the last sample, and across a gap in the sampling, the track is empty"""

    @classmethod
    def build(cls, t: np.ndarray, v: np.ndarray) -> SampledCounter:
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        bt, lo, hi = t, v, v
        while len(bt) > 4 * SAMPLE_BLOCK:
            starts = np.arange(0, len(bt), SAMPLE_BLOCK)
            bt = bt[starts]
            lo = np.minimum.reduceat(lo, starts)
            hi = np.maximum.reduceat(hi, starts)
            levels.append((bt, lo, hi))
        hold = 2.0 * float(np.median(np.diff(t))) if len(t) > 1 else math.inf
        return cls(t, v, levels, hold)

    @property
    def peak(self) -> float:
        return float(np.nanmax(self.v)) if len(self.v) else 0.0

    def per_pixel_minmax(self, t0: float, t1: float, width_px: int) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) of the value over each of ``width_px`` equal columns of ``[t0, t1]``; NaN
        before the first sample. A column with no sample shows the value held from the one before."""
        n = max(int(width_px), 1)
        # integer edges (the first ns at or after each float edge): searchsorted of floats in the
        # int64 times would convert the whole array on every frame
        edges = np.ceil(np.linspace(t0, t1, n + 1)).astype(np.int64)
        # the finest level with at most ~8 entries per column over the view
        t, lo, hi = self.t, self.v, self.v
        i0 = int(np.searchsorted(self.t, edges[0]))
        i1 = int(np.searchsorted(self.t, edges[-1]))
        per_px = (i1 - i0) / n
        for bt, blo, bhi in self.levels:
            if per_px <= 8:
                break
            t, lo, hi = bt, blo, bhi
            per_px /= SAMPLE_BLOCK
        if not len(t):
            nan = np.full(n, np.nan)
            return nan, nan.copy()
        idx = np.searchsorted(t, edges, side="left")
        a, b = idx[:-1], idx[1:]
        # the value held at each column's left edge (the sample before it), NaN before the first
        prev = a - 1
        # the raw sample before the edge decides whether a value is still held there
        j = np.searchsorted(self.t, edges[:-1], side="left") - 1
        held = (prev >= 0) & (j >= 0) & (edges[:-1] - self.t[np.clip(j, 0, len(self.t) - 1)] <= self.hold_ns)
        held_lo = np.where(held, lo[np.clip(prev, 0, len(lo) - 1)], np.nan)
        held_hi = np.where(held, hi[np.clip(prev, 0, len(hi) - 1)], np.nan)
        out_lo, out_hi = held_lo.copy(), held_hi.copy()
        full = np.flatnonzero(b > a)
        if len(full):
            first, last = int(a[full[0]]), int(b[full[-1]])
            starts = a[full] - first
            mn = np.minimum.reduceat(lo[first:last], starts)
            mx = np.maximum.reduceat(hi[first:last], starts)
            out_lo[full] = np.fmin(mn, held_lo[full])
            out_hi[full] = np.fmax(mx, held_hi[full])
        return out_lo, out_hi

    def per_pixel(self, t0: float, t1: float, width_px: int) -> np.ndarray:
        """The highest value in each column (what a plain area track draws: peaks stay visible)."""
        return self.per_pixel_minmax(t0, t1, width_px)[1]
