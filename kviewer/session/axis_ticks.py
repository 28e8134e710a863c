"""Labels of the time axis's ticks, every level at once (no Qt).

pyqtgraph lays ticks out in levels: the major ticks, then finer levels between them, and asks for
each level's labels separately. Labelling each level on its own gave two levels that each wrote
offsets from their own first tick, so the same "+100 µs" appeared twice at deep zoom; a minor level
also picked its own unit ("1 ms" next to "1200 µs"). Here the labels of all levels are made
together: one unit (the major spacing's), one anchor, and each level written with the decimals its
own spacing needs, so two different ticks never read the same.

Only the ticks' spacing and precision are decided here; the values are display nanoseconds from
whatever origin the timeline shows (that is not this module's business).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["tick_labels", "FAR"]

#: ticks at least this many (major) spacings away from 0 are written as offsets from one anchor
#: tick ("8.26118 s", "+20 µs"), not in full ("8261180 µs", or eight ticks that all read "8.261 s")
FAR = 1000.0

_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))


def _unit(ns: float) -> tuple[str, float]:
    """The largest unit in which ``ns`` is at least 1."""
    for unit, div in _UNITS:
        if ns >= div:
            return unit, div
    return "ns", 1.0


def _decimals(step: float) -> int:
    """Decimals that write every multiple of ``step`` (a tick spacing in the label's unit) exactly:
    0 for 5, 1 for 0.5, 2 for 0.25."""
    if step <= 0 or not math.isfinite(step):
        return 0
    for d in range(0, 10):
        if abs(round(step, d) - step) <= step * 1e-6:
            return d
    return 9


def _number(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    # "-0" (a tick at a rounding error below zero) reads as zero
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def tick_labels(levels: Sequence[tuple[float, Sequence[float]]], visible_from: float | None = None) -> list[list[str]]:
    """The label of every tick of every level, major level first (pyqtgraph's ``tickValues``
    order: ``[(spacing, values), ...]`` in display ns, a finer level holding only the ticks the
    coarser ones lack).

    Near 0 compared with the spacing, ticks are written in full in the major spacing's unit, each
    level with the decimals its spacing needs ("1 ms", "1.2 ms"). Far from 0 (late in a long
    trace, zoomed in) the first major tick is written in full to the precision its spacing needs
    and every other tick as a signed offset from it ("8.26118 s", "+20 µs", "+30 µs"), so labels
    keep their digits without growing long. Two different ticks never get the same label.

    ``visible_from`` (display ns): where the axis's drawn part starts. The anchor is then the first
    major tick clear of that edge, since a tick on the edge is not drawn (its label would be cut)
    and the offsets would be left without the tick they count from.
    """
    out: list[list[str]] = [[] for _ in levels]
    spacings = [float(sp) for sp, _ in levels]
    filled = [i for i, (_, vals) in enumerate(levels) if len(vals) and spacings[i] > 0]
    if not filled:
        return [[""] * len(vals) for _, vals in levels]
    major = spacings[filled[0]]
    unit, div = _unit(major)
    far = max(abs(float(v)) for i in filled for v in levels[i][1]) >= major * FAR
    if not far:
        for i in filled:
            d = _decimals(spacings[i] / div)
            out[i] = [f"{_number(float(v) / div, d)} {unit}" for v in levels[i][1]]
        return _blank_missing(out, levels)
    a_level = filled[0]
    majors = [float(v) for v in levels[a_level][1]]
    anchor = majors[0]
    if visible_from is not None:
        # clear of the edge by a fifth of a spacing (pyqtgraph drops a tick on it)
        anchor = next((v for v in majors if v >= visible_from + 0.2 * major), anchor)
    a_unit, a_div = _unit(abs(anchor))
    a_digits = _decimals(spacings[a_level] / a_div) if spacings[a_level] < a_div else 0
    for i in filled:
        d = _decimals(spacings[i] / div)
        labels = []
        for v in levels[i][1]:
            off = float(v) - anchor
            if i == a_level and off == 0.0:
                labels.append(f"{_number(anchor / a_div, a_digits)} {a_unit}")
                continue
            text = _number(abs(off) / div, d)
            labels.append(f"{'+' if off >= 0 else '−'}{text} {unit}")
        out[i] = labels
    return _blank_missing(out, levels)


def _blank_missing(out: list[list[str]], levels: Sequence[tuple[float, Sequence[float]]]) -> list[list[str]]:
    """Levels with no ticks (or a spacing of 0) get as many empty labels as they have values."""
    return [labels if len(labels) == len(vals) else [""] * len(vals) for labels, (_, vals) in zip(out, levels)]
