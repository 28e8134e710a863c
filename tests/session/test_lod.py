"""Level of detail: what a frame draws covers every visible bar, and stays small."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kviewer.session.lod import LaneLOD, merge_runs


def _lane(n: int, seed: int, dense: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dur = rng.integers(1, 5_000 if dense else 5_000_000, n)
    gap = rng.integers(0, 200 if dense else 50_000_000, n)
    start = np.cumsum(dur + gap).astype(np.int64)
    return start, start + dur, rng.integers(0, 20, n).astype(np.uint16)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=3000),
    seed=st.integers(min_value=0, max_value=10_000),
    dense=st.booleans(),
    lo=st.floats(min_value=0.0, max_value=1.0),
    width_frac=st.floats(min_value=1e-6, max_value=1.0),
    width_px=st.integers(min_value=50, max_value=3000),
)
def test_frame_covers_every_visible_bar(n: int, seed: int, dense: bool, lo: float, width_frac: float, width_px: int) -> None:
    start, end, colour = _lane(n, seed, dense)
    lod = LaneLOD.build(start, end, colour)
    total = float(end[-1] - start[0])
    t0 = start[0] + lo * total
    t1 = t0 + max(width_frac * total, 10.0)
    m = lod.frame(t0, t1, width_px)
    scale = width_px / (t1 - t0)
    visible = (end >= t0) & (start <= t1)
    xs = np.clip((start[visible] - t0) * scale, -2, width_px + 2)
    xe = np.clip((end[visible] - t0) * scale, -2, width_px + 2)
    drawn_s = m.start
    drawn_e = np.maximum(m.end, m.start + 1.0)  # bars are at least one pixel wide
    # every visible bar's start pixel falls inside a drawn rectangle (merging never loses a bar)
    for a, b in zip(xs, xe):
        i = np.searchsorted(drawn_s, a + 1e-6, side="right") - 1
        assert i >= 0 and drawn_s[i] <= a + 1e-6 and drawn_e[i] >= min(b, a + 1.0) - 1.0 - 1e-6
    # and the number of rectangles is bounded by the pixels, not by the bars
    assert len(m.start) <= 2 * width_px + 8
    # counts add up: merged rectangles stand for the bars they replaced (levels drop none)
    for lvl in lod.levels:
        assert int(lvl.count.sum()) == n
        assert np.all(np.diff(lvl.start) >= 0)


def test_merge_keeps_the_colour_of_the_longest_member() -> None:
    start = np.array([0.0, 0.3, 0.5, 10.0])
    end = np.array([0.2, 0.45, 0.9, 20.0])
    colour = np.array([1, 2, 3, 4], dtype=np.uint16)
    rep = np.arange(4)
    count = np.ones(4, dtype=np.int64)
    m = merge_runs(start, end, colour, rep, count, end - start, 1.0)
    assert list(m.start) == [0.0, 10.0]
    assert list(m.end) == [0.9, 20.0]
    assert list(m.colour) == [3, 4]  # the 0.4-long bar dominates the first run
    assert list(m.count) == [3, 1]


def test_levels_are_built_for_a_million_bars_and_frames_stay_small() -> None:
    start, end, colour = _lane(1_000_000, 1, dense=True)
    lod = LaneLOD.build(start, end, colour)
    assert len(lod.levels) > 5
    m = lod.frame(float(start[0]), float(end[-1]), 1600)
    assert len(m.start) <= 2 * 1600 + 8
    # a zoomed-in view draws the raw bars themselves
    mid = start[500_000]
    z = lod.frame(float(mid), float(mid + 50_000), 1600)
    assert (z.count == 1).all()
    assert set(lod.raw.rep[z.rep]) <= set(range(499_000, 502_000))


def test_hit_finds_the_bar_under_the_cursor_or_a_near_one() -> None:
    start = np.array([0, 100, 1000], dtype=np.int64)
    end = np.array([50, 200, 1010], dtype=np.int64)
    lod = LaneLOD.build(start, end, np.zeros(3, dtype=np.uint16))
    assert lod.hit(120, 0) == 1
    assert lod.hit(60, 5) == -1
    assert lod.hit(55, 10) == 0
    assert lod.hit(995, 10) == 2
    assert lod.hit(5000, 10) == -1
