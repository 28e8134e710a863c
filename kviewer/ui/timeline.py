"""The unified timeline: every open trace as a collapsible group of lanes, drawn with pyqtgraph.

One :class:`TracksItem` (a custom GraphicsObject) draws every lane. A frame asks each visible
lane's mipmap for the bars in view at pixel resolution (:mod:`kviewer.session.lod`), groups the
rectangles by colour and hands each colour's rectangles to ``QPainter.drawRects`` straight from a
numpy array (one call per colour, no Python object per bar). The frame is cached and recomputed
only when the view range, the size, the layout or the colours change; hovering or selecting just
repaints the cached frame and an overlay.

Coordinates: x is display nanoseconds (each trace shifted to start at 0), y is pixels from the
top of the first row (the view box's y range is kept equal to its pixel height), so rows keep a
fixed height when the window is resized and drag pans both ways.
"""

from __future__ import annotations

import bisect
import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QPainter,
    QPainterPath,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QMenu, QScrollBar, QToolButton, QToolTip, QVBoxLayout, QWidget

from kviewer import analysis
from kviewer.session import colors
from kviewer.session.axis_ticks import tick_labels
from kviewer.session.format import display_text, format_duration, format_time
from kviewer.session.lanes import LANE_H, LaneLayout, Row
from kviewer.session.lod import SampledCounter
from kviewer.session.mfu_view import marker_tooltip_lines
from kviewer.session.open_trace import MFU
from kviewer.session.tracks import CounterTrack, Group, Lane, TraceTracks, bring_out_metric, metric_tracks_of
from kviewer.ui.colors import qbrushes
from kviewer.ui.viewstate import Selection, ViewState

if TYPE_CHECKING:
    from PySide6.QtGui import QKeyEvent

    import kviewer.analysis.activity

LABEL_W = 230
INDENT = 12.0
#: bars at least this wide (px) get their name written inside
LABEL_MIN_PX = 46.0
MAX_LABELS = 600
ZOOM_STEP = 0.8
PAN_STEP = 0.15
HEADER_BG = QColor(232, 236, 241)
ROOT_BG = QColor(214, 221, 230)
SELECT_PEN = QColor(20, 20, 20)
FLOW_COLOUR = QColor(200, 40, 40)
COUNTER_COLOUR = {"utilisation": QColor(46, 125, 50), "concurrency": QColor(40, 90, 170), "memory": QColor(150, 90, 20),
                  "mark": QColor(200, 30, 30),
                  # sampled GPU metrics: the pixel's lowest sample solid, up to its highest lighter
                  "gpu_metric": QColor(150, 80, 20), "gpu_metric_max": QColor(150, 80, 20, 90)}
COUNTER_BG = QColor(244, 247, 244)
RANGE_FILL = QColor(60, 120, 220, 40)
IDLE_FILL = QColor(220, 60, 40, 38)
IDLE_EDGE = QColor(220, 60, 40, 110)
RANGE_EDGE = QColor(40, 90, 200)


@dataclass
class Frame:
    """What one view range looks like, ready to paint (device-independent pixel coordinates
    relative to the view box's top-left)."""

    key: tuple[Any, ...]
    rects: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    segments: list[tuple[int, int, int]] = field(default_factory=list)
    """(palette index, first, end) runs of ``rects``, which are sorted by colour"""
    inner: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    labels: list[tuple[QRectF, str, bool]] = field(default_factory=list)
    counters: list[tuple[str, np.ndarray]] = field(default_factory=list)
    marks: list[np.ndarray] = field(default_factory=list)
    """lines drawn over the counter rows (a memory row's peak)"""
    idle: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    """idle gaps on stream lanes longer than the threshold, shaded"""
    critpath: list[tuple[QColor, np.ndarray]] = field(default_factory=list)
    """(colour, rects) of the critical path's bands (ui/critpath_overlay.py), when one is shown"""
    """(counter kind, rects) of the counter rows: one column per pixel"""
    bars: int = 0


def _draw_rects(p: QPainter, rects: np.ndarray, first: int, end: int) -> None:
    """``drawRects`` on rows ``[first, end)`` of a C-contiguous (n, 4) float64 array: QRectF is
    four doubles, so the array *is* a QRectF[] and no Python object per rectangle is made."""
    if end <= first:
        return
    ptr = shiboken6.wrapInstance(rects.ctypes.data + first * 32, QRectF)
    p.drawRects(ptr, end - first)  # type: ignore[call-overload]  # the stubs lack (QRectF*, int)


class TimeAxis(pg.AxisItem):
    """Bottom axis labelled in ns, µs, ms or s, chosen from the tick spacing."""

    def __init__(self) -> None:
        super().__init__("bottom")
        self.enableAutoSIPrefix(False)
        self.timeline: TimelineView | None = None
        #: tick spacing -> the labels of that level's ticks, made with the other levels' (tickValues)
        self._labels: dict[float, list[str]] = {}

    def redraw(self) -> None:
        """Draw the ticks again (traces opened or closed: an empty window has none)."""
        self.picture = None
        self.update()

    def set_clock(self, text: str) -> None:
        """The axis label says what time 0 is (``"time since session start"``, the one clock of
        every surface: :func:`kviewer.session.tracks.clock_label`); none with nothing open."""
        if text:
            self.setLabel(text)
        else:
            self.showLabel(False)

    def mouseDragEvent(self, ev: Any) -> None:
        """Dragging along the time axis selects a range (as in Nsight Systems and Perfetto)."""
        if self.timeline is None or ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev)
            return
        ev.accept()
        self.timeline.drag_select(self.mapToScene(ev.buttonDownPos()), self.mapToScene(ev.pos()), ev.isFinish())

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        """pyqtgraph's tick levels, labelled all together (:func:`tick_labels`: one unit, one
        anchor, no label twice); an empty window has no time to mark, so no ticks."""
        if self.timeline is not None and not self.timeline.state.traces:
            self._labels = {}
            return []
        levels = super().tickValues(minVal, maxVal, size)
        self._labels = {sp: labels for (sp, _), labels in zip(levels, tick_labels(levels, min(minVal, maxVal)))}
        return levels

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        labels = self._labels.get(spacing)
        if labels is not None and len(labels) == len(values):
            return labels
        return tick_labels([(spacing, values)])[0]


class LaneAxis(pg.AxisItem):
    """The left column: group headers (click to collapse) and lane labels."""

    def __init__(self, timeline: TimelineView) -> None:
        super().__init__("left")
        self.timeline = timeline
        self.setWidth(LABEL_W)
        self.font = QFont()
        self.font.setPointSizeF(8.5)
        self.bold = QFont(self.font)
        self.bold.setBold(True)

    def paint(self, p: QPainter, opt: Any, widget: Any) -> None:
        tl = self.timeline
        vb = tl.vb
        top = vb.viewRange()[1][0]
        height = self.geometry().height()
        width = self.geometry().width()
        p.setClipRect(QRectF(0, 0, width, height))
        p.fillRect(QRectF(0, 0, width, height), QColor(248, 249, 251))
        for row in tl.rows_between(top, top + height):
            y = row.y - top
            rect = QRectF(4 + row.depth * INDENT, y, width - 8 - row.depth * INDENT, row.h)
            if row.kind == "header":
                bg = ROOT_BG if row.depth == 0 else HEADER_BG
                p.fillRect(QRectF(0, y, width, row.h), bg)
                p.setFont(self.bold if row.depth == 0 else self.font)
                p.setPen(QColor(30, 30, 30))
                arrow = "▸ " if row.group is not None and row.group.collapsed else "▾ "
                text = QFontMetricsF(p.font()).elidedText(arrow + display_text(row.label), Qt.TextElideMode.ElideRight, rect.width())
                p.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)
            else:
                p.setFont(self.font)
                p.setPen(QColor(70, 70, 70))
                if row.kind == "counter":
                    p.fillRect(QRectF(0, y, width, row.h), COUNTER_BG)
                rect.adjust(INDENT, 0, 0, 0)
                text = QFontMetricsF(self.font).elidedText(display_text(row.label), Qt.TextElideMode.ElideRight, rect.width())
                p.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)
        p.setPen(QColor(190, 195, 200))
        p.drawLine(QPointF(width - 0.5, 0), QPointF(width - 0.5, height))

    def mouseClickEvent(self, ev: Any) -> None:
        row = self.timeline.row_at(self.timeline.vb.viewRange()[1][0] + ev.pos().y())
        if row is None:
            return
        ev.accept()
        if ev.button() == Qt.MouseButton.LeftButton and row.kind == "header":
            self.timeline.toggle_group(row.group)
        elif ev.button() == Qt.MouseButton.RightButton:
            self.timeline.row_menu(row).exec(ev.screenPos().toPoint())

    def hoverEvent(self, ev: Any) -> None:
        if ev.isExit():
            return
        row = self.timeline.row_at(self.timeline.vb.viewRange()[1][0] + ev.pos().y())
        if row is not None and row.kind == "header" and row.group is not None and row.group.tooltip:
            self.setToolTip(row.group.tooltip)
        elif row is not None and row.counter is not None:
            self.setToolTip(row.counter.tooltip)
        else:
            self.setToolTip("")


class TimelineViewBox(pg.ViewBox):
    """As in Nsight Systems and Perfetto: the wheel scrolls the rows, Ctrl+wheel zooms time around
    the cursor, Shift+wheel pans time; drag pans time and scrolls rows; Shift+drag selects a range."""

    def __init__(self, timeline: TimelineView) -> None:
        super().__init__(enableMenu=False, invertY=True)
        self.timeline = timeline
        self.setMouseEnabled(x=True, y=False)
        self.disableAutoRange()

    def wheelEvent(self, ev: Any, axis: Any = None) -> None:
        mods = ev.modifiers()
        if mods & Qt.KeyboardModifier.ControlModifier:
            super().wheelEvent(ev, axis)
            return
        ev.accept()
        if mods & Qt.KeyboardModifier.ShiftModifier:
            self.timeline.pan(-ev.delta() / 120.0 * PAN_STEP / 2.0)
        else:
            self.timeline.scroll_by(-ev.delta() / 2.0)

    def mouseClickEvent(self, ev: Any) -> None:
        """Right click: the view's menu (zoom to the selection, back, fit, clear the range)."""
        if ev.button() != Qt.MouseButton.RightButton:
            super().mouseClickEvent(ev)
            return
        ev.accept()
        self.timeline.view_menu().exec(ev.screenPos().toPoint())

    def mouseDragEvent(self, ev: Any, axis: Any = None) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if ev.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.timeline.drag_select(ev.buttonDownScenePos(), ev.scenePos(), ev.isFinish())
            return
        d = self.mapToView(ev.pos()) - self.mapToView(ev.lastPos())
        self.translateBy(x=-d.x())
        self.timeline.scroll_by(-(ev.pos().y() - ev.lastPos().y()))


class TracksItem(pg.GraphicsObject):
    """Draws every visible lane of the timeline (see the module doc)."""

    def __init__(self, timeline: TimelineView) -> None:
        super().__init__()
        self.timeline = timeline
        self.brushes = qbrushes()
        rgb = colors.palette_rgb()
        self.dark_text = [colors.text_colour_is_dark(c) for c in rgb]
        self.font = QFont()
        self.font.setPointSizeF(8.0)
        self.metrics = QFontMetricsF(self.font)
        self._frame: Frame | None = None
        self._gaps: dict[tuple[Lane, float], tuple[np.ndarray, np.ndarray]] = {}

    def boundingRect(self) -> QRectF:
        # the item covers what is in view (what is drawn is decided per frame from the view
        # range). Not the whole time axis: mapped to pixels, a rect of 1e15 ns overflows the int
        # coordinates of Qt's update regions, and an update (a new selection) repainted nothing
        vb = self.timeline.vb
        (x0, x1), (y0, y1) = vb.viewRange()
        return QRectF(x0, y0, max(x1 - x0, 1e-9), max(y1 - y0, 1e-9))

    def view_changed(self) -> None:
        """The view range moved: the bounding rect follows."""
        self.prepareGeometryChange()
        self.invalidate()

    def invalidate(self) -> None:
        self._frame = None
        self.update()

    # frame -----------------------------------------------------------------------------------
    def frame(self, x0: float, x1: float, top: float, width: float, height: float) -> Frame:
        tl = self.timeline
        cp = tl.critical_path
        key = (x0, x1, top, width, height, tl.layout_version, tl.colour_version, None if cp is None else (id(cp), cp.version))
        if self._frame is not None and self._frame.key == key:
            return self._frame
        fr = Frame(key)
        if cp is not None:
            fr.critpath = cp.band_rects(x0, x1, top, width)
        idle_parts: list[np.ndarray] = []
        parts_rect: list[np.ndarray] = []
        parts_col: list[np.ndarray] = []
        inner_parts: list[np.ndarray] = []
        label_jobs: list[tuple[Row, Lane, np.ndarray, np.ndarray, np.ndarray, float, float]] = []
        for row in tl.rows_between(top, top + height):
            lane = row.lane
            pad = 2.0
            if row.kind == "counter" and row.counter is not None:
                self._counter_frame(fr, row, x0, x1, top, width)
                continue
            if row.kind == "header":
                if row.group is None or not row.group.collapsed:
                    continue
                lane = row.group.first_lane()  # a collapsed group shows its first lane as a summary
                pad = 4.0
            if lane is None or len(lane.lod.raw) == 0:
                continue
            off = row.tracks.offset_ns
            if row.kind == "lane" and lane.shows_idle and tl.idle_threshold() > 0:
                gr = self._idle_rects(lane, tl.idle_threshold(), x0 + off, x1 + off, width, row.y - top, row.h)
                if gr is not None:
                    idle_parts.append(gr)
            m = lane.lod.frame(x0 + off, x1 + off, width)
            n = m.start.shape[0]
            if n == 0:
                continue
            y = row.y - top + pad
            h = row.h - 2 * pad
            # a pixel column is painted when any bar overlaps it: snap outwards to whole pixels,
            # so sub-pixel gaps between dense bars do not show as white hairlines
            x = np.floor(m.start)
            w = np.maximum(np.ceil(m.end) - x, 1.0)
            r = np.empty((n, 4), dtype=np.float64)
            r[:, 0] = x
            r[:, 1] = y
            r[:, 2] = w
            r[:, 3] = h
            parts_rect.append(r)
            parts_col.append(m.colour)
            fr.bars += n
            if row.kind == "lane" and lane.inner is not None:
                single = (m.count == 1) & (w >= 3.0)
                if single.any():
                    raw = lane.lod.raw
                    rep = m.rep[single]
                    tsol = lane.inner[rep]
                    dur = np.maximum(raw.end[rep] - raw.start[rep], 1)
                    ok = np.isfinite(tsol) & (tsol > 0)
                    if ok.any():
                        frac = np.clip(tsol[ok] / dur[ok], 0.0, 1.0)
                        ir = np.empty((int(ok.sum()), 4))
                        ir[:, 0] = x[single][ok]
                        # a band along the bottom of the bar, below the name
                        ir[:, 1] = y + h * 0.68
                        ir[:, 2] = np.maximum(w[single][ok] * frac, 1.0)
                        ir[:, 3] = h * 0.32
                        inner_parts.append(ir)
            wide = np.flatnonzero(w >= LABEL_MIN_PX)
            if len(wide) and row.kind == "lane":
                # a merged bar is named after its longest member
                label_jobs.append((row, lane, x[wide], w[wide], m.rep[wide], y, h))
        if parts_rect:
            rects = np.concatenate(parts_rect)
            cols = np.concatenate(parts_col)
            order = np.argsort(cols, kind="stable")
            fr.rects = np.ascontiguousarray(rects[order])
            cols = cols[order]
            bounds = np.flatnonzero(np.diff(cols.astype(np.int64))) + 1
            starts = np.r_[0, bounds]
            ends = np.r_[bounds, len(cols)]
            fr.segments = [(int(cols[s]), int(s), int(e)) for s, e in zip(starts, ends)]
        if inner_parts:
            fr.inner = np.ascontiguousarray(np.concatenate(inner_parts))
        if idle_parts:
            fr.idle = np.ascontiguousarray(np.concatenate(idle_parts))
        budget = MAX_LABELS
        for row, lane, xs, ws, reps, y, h in label_jobs:
            colour = lane.lod.raw.colour[reps]
            for x, w, pos, c in zip(xs.tolist(), ws.tolist(), reps.tolist(), colour.tolist()):
                if budget <= 0:
                    break
                x_vis = max(x, 0.0)
                w_vis = min(x + w, width) - x_vis
                if w_vis < LABEL_MIN_PX:
                    continue
                text = self.metrics.elidedText(display_text(row.tracks.name_of(*lane.entry(pos))), Qt.TextElideMode.ElideRight, w_vis - 6)
                if len(text) <= 1:
                    continue
                fr.labels.append((QRectF(x_vis + 3, y, w_vis - 6, h), text, self.dark_text[c]))
                budget -= 1
        self._frame = fr
        return fr

    def _idle_rects(self, lane: Lane, threshold: float, t0: float, t1: float, width: float, y: float, h: float) -> np.ndarray | None:
        """The lane's gaps of at least ``threshold`` ns that reach into the view, as rectangles."""
        key = (lane, float(threshold))
        gaps = self._gaps.get(key)
        if gaps is None:
            raw = lane.lod.raw
            gap = raw.start[1:] - raw.cend[:-1]
            i = np.flatnonzero(gap >= threshold)
            gaps = (raw.cend[i], raw.start[i + 1])
            self._gaps[key] = gaps
        gs, ge = gaps
        a = int(np.searchsorted(ge, t0, side="left"))
        b = int(np.searchsorted(gs, t1, side="right"))
        if b <= a:
            return None
        scale = width / max(t1 - t0, 1e-9)
        xs = np.clip((gs[a:b] - t0) * scale, -2.0, width + 2.0)
        xe = np.clip((ge[a:b] - t0) * scale, -2.0, width + 2.0)
        keep = xe - xs >= 2.0  # a gap narrower than two pixels is not worth a shade
        if not keep.any():
            return None
        r = np.empty((int(keep.sum()), 4))
        r[:, 0] = xs[keep]
        r[:, 1] = y + 1.0
        r[:, 2] = xe[keep] - xs[keep]
        r[:, 3] = h - 2.0
        return r

    def _counter_frame(self, fr: Frame, row: Row, x0: float, x1: float, top: float, width: float) -> None:
        """A counter row: per pixel column, the mean value over its time as a filled column."""
        ct = row.counter
        assert ct is not None
        n = max(int(math.ceil(width)), 1)
        off = row.tracks.offset_ns
        t1 = x0 + off + (x1 - x0) * n / max(width, 1e-9)
        if ct.mark_ns is not None:  # e.g. a memory row's peak: a red line across the row, over its area
            px = (ct.mark_ns - off - x0) / max(x1 - x0, 1e-9) * width
            if 0.0 <= px <= width:
                fr.marks.append(np.array([[px - 1.0, row.y - top + 1.0, 2.0, row.h - 2.0]]))
        if isinstance(ct.counter, SampledCounter):
            lo, hi = ct.counter.per_pixel_minmax(x0 + off, t1, n)
            self._counter_columns(fr, row, top, hi, ct.scale, ct.kind + "_max")
            self._counter_columns(fr, row, top, lo, ct.scale, ct.kind)
            return
        self._counter_columns(fr, row, top, ct.counter.per_pixel(x0 + off, t1, n), ct.scale, ct.kind)

    def _counter_columns(self, fr: Frame, row: Row, top: float, values: np.ndarray, scale: float, kind: str) -> None:
        """One filled column per pixel, ``values / scale`` of the row's height (NaN: nothing)."""
        frac = np.clip(np.nan_to_num(values / max(scale, 1e-12), nan=0.0), 0.0, 1.0)
        h = row.h - 2.0
        # heights to half a pixel; neighbouring columns of one height become one rectangle
        # (a busy GPU is a few long bars, not 1600 one-pixel ones)
        q = np.ceil(frac * h * 2.0).astype(np.int64)
        q[(frac > 0) & (q < 2)] = 2  # anything running shows at least one pixel
        heads = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        ends = np.r_[heads[1:], len(q)]
        keep = q[heads] > 0
        if not keep.any():
            return
        heads, ends = heads[keep], ends[keep]
        bottom = row.y - top + row.h - 1.0
        r = np.empty((len(heads), 4))
        r[:, 0] = heads
        r[:, 2] = ends - heads
        r[:, 3] = q[heads] / 2.0
        r[:, 1] = bottom - r[:, 3]
        fr.counters.append((kind, np.ascontiguousarray(r)))

    # paint -----------------------------------------------------------------------------------
    def paint(self, p: QPainter, opt: Any, widget: Any) -> None:
        tl = self.timeline
        vb = tl.vb
        (x0, x1), (top, bottom) = vb.viewRange()
        tr = p.transform()
        width = tr.m11() * (x1 - x0)
        height = bottom - top
        if width <= 0 or height <= 0:
            return
        ox = tr.m11() * x0 + tr.dx()
        oy = tr.m22() * top + tr.dy()
        sy = tr.m22()
        fr = self.frame(x0, x1, top, width, height)
        p.save()
        p.resetTransform()
        p.translate(ox, oy)
        p.scale(1.0, sy)
        # group header bands
        notes: list[tuple[QRectF, str]] = []
        for row in tl.rows_between(top, bottom):
            if row.kind == "header":
                p.fillRect(QRectF(0, row.y - top, width, row.h), ROOT_BG if row.depth == 0 else HEADER_BG)
                if row.group is not None and row.group.note:
                    notes.append((QRectF(8.0, row.y - top, max(width - 16.0, 1.0), row.h), row.group.note))
            elif row.kind == "counter":
                p.fillRect(QRectF(0, row.y - top, width, row.h), COUNTER_BG)
        p.setPen(Qt.PenStyle.NoPen)
        if len(fr.idle):
            p.setBrush(IDLE_FILL)
            p.setPen(QPen(IDLE_EDGE, 1.0))
            _draw_rects(p, fr.idle, 0, len(fr.idle))
            p.setPen(Qt.PenStyle.NoPen)
        for kind, rects in fr.counters:
            p.setBrush(COUNTER_COLOUR.get(kind, QColor(90, 90, 90)))
            _draw_rects(p, rects, 0, len(rects))
        for rects in fr.marks:
            p.setBrush(COUNTER_COLOUR["mark"])
            _draw_rects(p, rects, 0, len(rects))
        for colour, first, end in fr.segments:
            p.setBrush(self.brushes[colour])
            _draw_rects(p, fr.rects, first, end)
        if len(fr.inner):
            # the SOL floor inside each kernel bar: the gap to the bar's end is time above the bound
            p.setBrush(QColor(0, 0, 0, 90))
            _draw_rects(p, fr.inner, 0, len(fr.inner))
        if fr.labels:
            p.setFont(self.font)
            dark, light = QColor(20, 20, 20), QColor(255, 255, 255)
            for rect, text, is_dark in fr.labels:
                p.setPen(dark if is_dark else light)
                p.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)
        if fr.critpath:  # ui/critpath_overlay.py
            p.setPen(Qt.PenStyle.NoPen)
            for band, rects in fr.critpath:
                p.setBrush(band)
                _draw_rects(p, rects, 0, len(rects))
        if notes:
            # a trace with nothing to lay out in time (a summary-only file) says why, across the lanes
            p.setFont(self.font)
            p.setPen(QColor(90, 60, 20))
            for rect, text in notes:
                elided = QFontMetricsF(self.font).elidedText(display_text(text), Qt.TextElideMode.ElideRight, rect.width())
                p.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), elided)
        self._paint_time_selection(p, x0, x1, width, height)
        self._paint_selection(p, x0, x1, top, width)
        p.restore()

    def _paint_time_selection(self, p: QPainter, x0: float, x1: float, width: float, height: float) -> None:
        """The selected range: a tinted band with its edges and its duration written at the top."""
        rng = self.timeline.state.time_selection
        if rng is None:
            return
        scale = width / max(x1 - x0, 1e-9)
        a = min(max((rng[0] - x0) * scale, -10.0), width + 10.0)
        b = min(max((rng[1] - x0) * scale, -10.0), width + 10.0)
        if b < 0 or a > width:
            return
        p.fillRect(QRectF(a, 0, max(b - a, 1.0), height), RANGE_FILL)
        p.setPen(QPen(RANGE_EDGE, 1.0))
        p.drawLine(QPointF(a, 0), QPointF(a, height))
        p.drawLine(QPointF(b, 0), QPointF(b, height))
        text = format_duration(rng[1] - rng[0])
        p.setFont(self.font)
        tw = self.metrics.horizontalAdvance(text) + 10
        cx = min(max((a + b) / 2.0, tw / 2.0), width - tw / 2.0)
        box = QRectF(cx - tw / 2.0, 2, tw, self.metrics.height() + 4)
        p.fillRect(box, QColor(255, 255, 255, 230))
        p.setPen(RANGE_EDGE)
        p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)

    def _bar_px(self, tracks: TraceTracks, table: str, row_id: int, x0: float, x1: float, top: float, width: float) -> QRectF | None:
        """Where a row's bar is, in frame pixels (its lane's row, or the collapsed header's)."""
        loc = tracks.locate(table, row_id)
        if loc is None:
            return None
        lane, pos = loc
        row = self.timeline.row_of_lane(tracks, lane)
        if row is None:
            return None
        raw = lane.lod.raw
        scale = width / max(x1 - x0, 1e-9)
        xs = (raw.start[pos] - tracks.offset_ns - x0) * scale
        xe = (raw.end[pos] - tracks.offset_ns - x0) * scale
        xs = min(max(xs, -10.0), width + 10.0)
        xe = min(max(xe, -10.0), width + 10.0)
        return QRectF(xs, row.y - top + 1, max(xe - xs, 1.0), row.h - 2)

    def _paint_selection(self, p: QPainter, x0: float, x1: float, top: float, width: float) -> None:
        tl = self.timeline
        sel = tl.state.selection
        if sel is None:
            return
        tracks = tl.state.trace(sel.trace)
        if tracks is None:
            return
        rect = self._bar_px(tracks, sel.table, sel.row, x0, x1, top, width)
        if rect is None:
            return
        p.setBrush(Qt.BrushStyle.NoBrush)
        # a dark outline with a white halo inside: visible on any bar colour and on white
        p.setPen(QPen(SELECT_PEN, 2.0))
        p.drawRect(rect.adjusted(-1, -1, 1, 1))
        p.setPen(QPen(QColor(255, 255, 255), 1.0))
        p.drawRect(rect.adjusted(0.5, 0.5, -0.5, -0.5))
        if sel.table == "kernels":
            src = int(tracks.launch_of_kernel[sel.row]) if sel.row < len(tracks.launch_of_kernel) else -1
            if src >= 0:
                launch = self._bar_px(tracks, "cpu_slices", src, x0, x1, top, width)
                if launch is not None:
                    p.setPen(QPen(SELECT_PEN, 1.5))
                    p.drawRect(launch)
                    _arrow(p, QPointF(launch.left(), launch.center().y()), QPointF(rect.left(), rect.center().y()))


def _arrow(p: QPainter, a: QPointF, b: QPointF) -> None:
    """A flow arrow from a to b (a cubic curve and an arrowhead at b)."""
    pen = QPen(FLOW_COLOUR, 1.6)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    path = QPainterPath(a)
    dx = max(abs(b.x() - a.x()) * 0.5, 20.0)
    path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
    p.drawPath(path)
    p.setBrush(FLOW_COLOUR)
    p.drawPolygon(QPolygonF([b, QPointF(b.x() - 7, b.y() - 4), QPointF(b.x() - 7, b.y() + 4)]))


class TimelineCanvas(pg.PlotWidget):
    """The PlotWidget; handles the Perfetto keys (so they work wherever focus is inside it)."""

    def __init__(self, timeline: TimelineView) -> None:
        self.timeline = timeline
        super().__init__(
            background="w",
            viewBox=TimelineViewBox(timeline),
            axisItems={"bottom": TimeAxis(), "left": LaneAxis(timeline)},
        )
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def keyPressEvent(self, ev: QKeyEvent) -> None:
        if self.timeline.handle_key(ev.key(), ev.modifiers()):
            ev.accept()
            return
        super().keyPressEvent(ev)


class TimelineView(QWidget):
    """The timeline widget: observes the :class:`ViewState`, never another view."""

    closeRequested = Signal(int)

    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.rows: list[Row] = []
        self._row_tops: list[float] = []
        self._lane_rows: dict[tuple[int, int], Row] = {}
        self.layout_version = 0
        self.colour_version = 0
        self.top = 0.0
        self._syncing = False
        #: the row layout (pins, hidden rows, order, collapsed groups, lane filter): Qt-free
        self.lanes_layout = LaneLayout()
        #: gaps on a stream at least this long are shaded (0: none; None: the analysis default,
        #: looked up once a trace is open: it lives with the pandas code)
        self.idle_threshold_ns: float | None = None
        #: the critical path drawn over the lanes (a ui.critpath_overlay.CriticalPathOverlay), None: not shown
        self.critical_path: Any = None

        self.canvas = TimelineCanvas(self)
        self.plot = self.canvas.getPlotItem()
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.vb: TimelineViewBox = self.plot.getViewBox()
        for name in ("bottom", "left"):
            ax = self.plot.getAxis(name)
            ax.setPen(pg.mkPen(120, 120, 120))
            ax.setTextPen(pg.mkPen(40, 40, 40))
        self.item = TracksItem(self)
        self.time_axis: TimeAxis = self.plot.getAxis("bottom")
        self.time_axis.timeline = self
        self.vb.addItem(self.item, ignoreBounds=True)
        self.vb.setXRange(0, 1, padding=0)
        self.scrollbar = QScrollBar(Qt.Orientation.Vertical)
        self.scrollbar.setObjectName("timelineScrollBar")
        self.scrollbar.valueChanged.connect(lambda v: self.scroll_to(float(v)) if int(self.top) != v else None)
        self.search = QLineEdit()
        self.search.setObjectName("laneSearch")
        self.search.setPlaceholderText("Search lanes (GPU, stream, thread, NVTX…)")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(LABEL_W)
        self.search.setMaximumWidth(LABEL_W + 120)
        self.search.textChanged.connect(self.set_lane_filter)
        self.show_hidden = QToolButton()
        self.show_hidden.setText("Show hidden lanes")
        self.show_hidden.clicked.connect(self.unhide_all)
        self.show_hidden.hide()
        top_bar = QHBoxLayout()
        top_bar.setContentsMargins(2, 2, 2, 0)
        top_bar.addWidget(self.search)
        top_bar.addWidget(self.show_hidden)
        top_bar.addStretch(1)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(0)
        body.addWidget(self.canvas, 1)
        body.addWidget(self.scrollbar)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top_bar)
        lay.addLayout(body, 1)

        self.vb.sigRangeChanged.connect(lambda *_: self.item.view_changed())
        self.vb.sigXRangeChanged.connect(self._on_vb_range)
        self.vb.sigResized.connect(self._on_resize)
        self.canvas.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.canvas.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        state.tracesChanged.connect(self._on_traces)
        state.rangeChanged.connect(self._on_state_range)
        state.selectionChanged.connect(lambda _sel: self.repaint_overlay())
        state.revealRequested.connect(self.reveal)
        state.highlightChanged.connect(self._on_highlight)
        state.timeSelectionChanged.connect(lambda _r: self.repaint_overlay())

    # layout ----------------------------------------------------------------------------------
    @property
    def hidden(self) -> set[Lane | CounterTrack]:
        """Lanes and counter rows the user hid."""
        return self.lanes_layout.hidden

    @property
    def pinned(self) -> list[tuple[TraceTracks, Lane | CounterTrack]]:
        """Rows pinned to the top, in pin order."""
        return self.lanes_layout.pinned

    @property
    def lane_filter(self) -> str:
        return self.lanes_layout.filter

    def relayout(self) -> None:
        rows = self.lanes_layout.layout(self.state.traces)
        self.rows = rows
        self._row_tops = [r.y for r in rows]
        self._lane_rows = self.lanes_layout.lane_rows
        self.layout_version += 1
        self.show_hidden.setVisible(bool(self.hidden))
        self.show_hidden.setText(f"Show {len(self.hidden)} hidden lane{'s' if len(self.hidden) != 1 else ''}")
        if self.search.text().strip() != self.lane_filter:
            self.search.setText(self.lane_filter)  # a restored layout's filter
        self.scroll_to(self.top)
        self.item.invalidate()
        self.plot.getAxis("left").update()

    def idle_threshold(self) -> float:
        if self.idle_threshold_ns is None:
            self.idle_threshold_ns = float(analysis.activity.IDLE_GAP_NS)
        return self.idle_threshold_ns

    def set_idle_threshold(self, ns: float | None) -> None:
        """Shade the gaps on each stream lasting at least ``ns`` (0: none)."""
        self.idle_threshold_ns = ns
        self.item._gaps.clear()
        self.item.invalidate()

    # lane management: commands to the Qt-free row layout, then a redraw -----------------------
    def set_lane_filter(self, text: str) -> None:
        """Show only the lanes whose label, or a group above them, contains ``text``."""
        if text.strip() != self.lane_filter:
            self.lanes_layout.set_filter(text)
            self.relayout()

    def hide_item(self, item: Lane | CounterTrack) -> None:
        self.lanes_layout.hide(item)
        self.relayout()

    def unhide_all(self) -> None:
        self.lanes_layout.unhide_all()
        self.relayout()

    def pin(self, tracks: TraceTracks, item: Lane | CounterTrack) -> None:
        """Keep a lane or counter row at the top of the timeline, above every trace."""
        if self.lanes_layout.pin(tracks, item):
            self.relayout()

    def unpin(self, item: Lane | CounterTrack) -> None:
        self.lanes_layout.unpin(item)
        self.relayout()

    def move_row(self, row: Row, step: int) -> None:
        """Move a lane, counter or group ``step`` places among its siblings (pinned rows: in
        the pinned list)."""
        if self.lanes_layout.move(row, step):
            self.relayout()

    def row_menu(self, row: Row) -> QMenu:
        """The context menu of a row's label: collapse, pin, move, hide (and close a trace)."""
        menu = QMenu(self)
        item: Any = row.lane or row.counter
        if row.kind == "header" and row.group is not None:
            menu.addAction("Expand" if row.group.collapsed else "Collapse", lambda g=row.group: self.toggle_group(g))
        if item is not None:
            if row.parent is None:
                menu.addAction("Unpin", lambda: self.unpin(item))
            else:
                menu.addAction("Pin to Top", lambda: self.pin(row.tracks, item))
        if row.parent is not None or item is not None:
            menu.addAction("Move Up", lambda: self.move_row(row, -1))
            menu.addAction("Move Down", lambda: self.move_row(row, 1))
        if item is not None:
            menu.addAction("Hide", lambda: self.hide_item(item))
        if row.kind == "header" and row.group is not None:
            self._metrics_menu(menu, row.group)
        if self.hidden:
            menu.addAction(f"Show Hidden Lanes ({len(self.hidden)})", self.unhide_all)
        if row.kind == "header" and row.depth == 0 and row.group is row.tracks.root:
            menu.addSeparator()
            key = row.tracks.key
            menu.addAction(f"Close {row.tracks.label}", lambda: self.closeRequested.emit(key))
        return menu

    def view_menu(self) -> QMenu:
        """The context menu of the lanes' area: the View menu's navigation, for the mouse."""
        menu = QMenu(self)
        state = self.state
        zoom = menu.addAction("Zoom to Selection\tF", self.fit_selection)
        zoom.setEnabled(state.zoom_target() is not None)
        zoom.setToolTip("The dragged range (Shift+drag, or drag along the time axis) or the selected bar, whichever is newer")
        back = menu.addAction("Zoom Back\tBackspace", state.pop)
        back.setEnabled(bool(state.session.stack))
        menu.addAction("Fit All\tCtrl+0", self.fit_all)
        if state.time_selection is not None:
            menu.addSeparator()
            menu.addAction("Clear Range", lambda: state.set_time_selection(None))
        return menu

    def _metrics_menu(self, menu: QMenu, group: Group) -> None:
        """A GPU's sampled metrics, each checked when its track is shown: uncheck to hide it,
        check one of the closed group's to bring it out beside the others."""
        tracks = metric_tracks_of(group)
        if not tracks:
            return
        sub = menu.addMenu("GPU Metrics")
        for track, is_open in tracks:
            shown = is_open and track not in self.hidden
            act = sub.addAction(track.label)
            act.setCheckable(True)
            act.setChecked(shown)
            act.setToolTip(track.tooltip)

            def toggle(_checked: bool, t: CounterTrack = track, was: bool = shown) -> None:
                if was:
                    self.hide_item(t)
                    return
                self.hidden.discard(t)
                bring_out_metric(group, t)
                self.relayout()

            act.triggered.connect(toggle)

    @property
    def content_height(self) -> float:
        return (self.rows[-1].y + self.rows[-1].h) if self.rows else 0.0

    def rows_between(self, y0: float, y1: float) -> list[Row]:
        i = max(bisect.bisect_right(self._row_tops, y0) - 1, 0)
        j = bisect.bisect_right(self._row_tops, y1)
        return self.rows[i:j]

    def row_at(self, y: float) -> Row | None:
        i = bisect.bisect_right(self._row_tops, y) - 1
        if 0 <= i < len(self.rows) and y < self.rows[i].y + self.rows[i].h:
            return self.rows[i]
        return None

    def row_of_lane(self, tracks: TraceTracks, lane: Lane) -> Row | None:
        return self._lane_rows.get((tracks.key, lane.index))

    def lane_count(self) -> int:
        return sum(len(t.lanes) for t in self.state.traces)

    def toggle_group(self, group: Group | None) -> None:
        if group is not None:
            self.lanes_layout.toggle(group)
            self.relayout()

    # vertical scrolling ----------------------------------------------------------------------
    def _view_height(self) -> float:
        return max(float(self.vb.height()), 1.0)

    def scroll_to(self, top: float) -> None:
        h = self._view_height()
        limit = max(self.content_height - h + 20.0, 0.0)
        self.top = float(min(max(top, 0.0), limit))
        self.vb.setYRange(self.top, self.top + h, padding=0)
        sb = self.scrollbar
        sb.blockSignals(True)
        sb.setRange(0, int(math.ceil(limit)))
        sb.setPageStep(int(h))
        sb.setSingleStep(int(LANE_H))
        sb.setValue(int(round(self.top)))
        sb.blockSignals(False)
        sb.setVisible(limit > 0)

    def scroll_by(self, dy: float) -> None:
        self.scroll_to(self.top + dy)

    def _on_resize(self, *_: Any) -> None:
        self.scroll_to(self.top)

    def repaint_overlay(self) -> None:
        """Repaint now (the selection outline, the range): the item's bounding rect is the whole
        time axis, too large for Qt's partial updates, so the viewport is updated as a whole."""
        self.item.update()
        self.canvas.viewport().update()

    # range -----------------------------------------------------------------------------------
    def visible_range(self) -> tuple[float, float]:
        x0, x1 = self.vb.viewRange()[0]
        return float(x0), float(x1)

    def set_range(self, t0: float, t1: float) -> None:
        self.vb.setXRange(t0, t1, padding=0)

    def _on_vb_range(self, _vb: Any, rng: Any) -> None:
        if not self._syncing:
            self._syncing = True
            try:
                self.state.set_range(float(rng[0]), float(rng[1]))
            finally:
                self._syncing = False

    def _on_state_range(self, t0: float, t1: float) -> None:
        if self._syncing:
            return
        x0, x1 = self.visible_range()
        if abs(x0 - t0) > 1e-6 or abs(x1 - t1) > 1e-6:
            self._syncing = True
            try:
                self.set_range(t0, t1)
            finally:
                self._syncing = False

    def fit_all(self) -> None:
        lo, hi = self.state.span()
        pad = (hi - lo) * 0.02
        self.set_range(lo - pad, hi + pad)

    def _set_limits(self) -> None:
        lo, hi = self.state.span()
        span = max(hi - lo, 1.0)
        self.vb.setLimits(xMin=lo - span * 0.5, xMax=hi + span * 0.5, minXRange=10.0, maxXRange=span * 2.0)

    def _on_traces(self) -> None:
        self.time_axis.redraw()
        had_rows = bool(self.rows)
        self.plot.getAxis("bottom").set_clock(self.state.clock())
        self._set_limits()
        self.relayout()
        if not had_rows or not self.state.traces:
            self.fit_all()

    def _on_highlight(self) -> None:
        for tracks in self.state.traces:
            mask = self.state.highlight.get(tracks.key)
            if mask is not None or tracks.emphasis is not None:
                tracks.set_kernel_emphasis(mask)
        self.colour_version += 1
        self.item.invalidate()

    # keys ------------------------------------------------------------------------------------
    def zoom(self, factor: float, around: float | None = None) -> None:
        x0, x1 = self.visible_range()
        c = (x0 + x1) / 2.0 if around is None or not (x0 <= around <= x1) else around
        self.set_range(c - (c - x0) * factor, c + (x1 - c) * factor)

    def pan(self, fraction: float) -> None:
        x0, x1 = self.visible_range()
        d = (x1 - x0) * fraction
        self.set_range(x0 + d, x1 + d)

    def _cursor_time(self) -> float | None:
        pos = self.canvas.mapFromGlobal(self.cursor().pos())
        scene = self.canvas.mapToScene(pos)
        if not self.vb.sceneBoundingRect().contains(scene):
            return None
        return float(self.vb.mapSceneToView(scene).x())

    def handle_key(self, key: int, modifiers: Any) -> bool:
        if modifiers & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.MetaModifier):
            return False
        if key == Qt.Key.Key_W:
            self.zoom(ZOOM_STEP, self._cursor_time())
        elif key == Qt.Key.Key_S:
            self.zoom(1.0 / ZOOM_STEP, self._cursor_time())
        elif key == Qt.Key.Key_A:
            self.pan(-PAN_STEP)
        elif key == Qt.Key.Key_D:
            self.pan(PAN_STEP)
        elif key == Qt.Key.Key_F:
            self.fit_selection()
        elif key == Qt.Key.Key_Backspace:
            self.state.pop()  # back to the view before the last F
        elif key == Qt.Key.Key_Escape:
            if self.state.selection is None:
                self.state.set_time_selection(None)
            self.state.set_selection(None)
        elif key == Qt.Key.Key_Up:
            self.scroll_by(-LANE_H * 2)
        elif key == Qt.Key.Key_Down:
            self.scroll_by(LANE_H * 2)
        else:
            return False
        return True

    def fit_selection(self) -> None:
        """F: zoom to the dragged range or the selected bar, whichever is newer (as Perfetto and
        Nsight Systems do), or to everything when there is neither; Backspace comes back."""
        target = self.state.zoom_target()
        if target is None:
            self.fit_all()
            return
        self.state.push()  # Backspace comes back here (the zoom/filter stack)
        self.set_range(*target)

    def reveal(self, sel: Selection) -> None:
        """Make a selected bar visible: expand its groups, scroll to its row, pan (and zoom
        out or in only when it does not fit)."""
        tracks = self.state.trace(sel.trace)
        if tracks is None:
            return
        loc = tracks.locate(sel.table, sel.row)
        if loc is None:
            return
        lane, _pos = loc
        if self.lanes_layout.expand_to(tracks, lane):
            self.relayout()
        row = self.row_of_lane(tracks, lane)
        if row is not None:
            h = self._view_height()
            if row.y < self.top or row.y + row.h > self.top + h:
                self.scroll_to(row.y - h / 3.0)
        span = self.state.session.bar_span(sel)
        if span is None:
            return
        s, e = span
        x0, x1 = self.visible_range()
        width = x1 - x0
        if s >= x0 and e <= x1 and (e - s) * 400 >= width:
            return
        if (e - s) > width * 0.8 or (e - s) * 400 < width:
            # too wide to fit, or too narrow to see: frame it with context
            pad = max((e - s) * 2.0, 1000.0)
            self.set_range(s - pad, e + pad)
        else:
            c = (s + e) / 2.0
            self.set_range(c - width / 2.0, c + width / 2.0)

    # mouse -----------------------------------------------------------------------------------
    def drag_select(self, start_scene: QPointF, end_scene: QPointF, finished: bool) -> None:
        """Select the time range between two scene positions (a drag on the axis, Shift+drag)."""
        t0 = float(self.vb.mapSceneToView(start_scene).x())
        t1 = float(self.vb.mapSceneToView(end_scene).x())
        self.state.set_time_selection((t0, t1))


    def hit(self, scene_pos: QPointF) -> tuple[TraceTracks, Lane, int] | None:
        """(trace, lane, raw position) of the bar under a scene position, if any."""
        if not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.vb.mapSceneToView(scene_pos)
        row = self.row_at(float(p.y()))
        if row is None:
            return None
        lane = row.lane if row.kind == "lane" else (row.group.first_lane() if row.group is not None and row.group.collapsed else None)
        if lane is None:
            return None
        x0, x1 = self.visible_range()
        ns_per_px = (x1 - x0) / max(self.vb.width(), 1.0)
        pos = lane.lod.hit(float(p.x()) + row.tracks.offset_ns, 3.0 * ns_per_px)
        if pos < 0:
            return None
        return row.tracks, lane, pos

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        found = self.hit(scene_pos)
        if found is None:
            QToolTip.hideText()
            return

        tracks, lane, pos = found
        text = tooltip_text(tracks, *lane.entry(pos), mfu=self.state.document.ready(tracks.key, MFU))
        QToolTip.showText(self.canvas.mapToGlobal(self.canvas.mapFromScene(scene_pos)), text, self.canvas)

    def _on_mouse_clicked(self, ev: Any) -> None:
        if ev.button() != Qt.MouseButton.LeftButton or ev.double():
            return
        found = self.hit(ev.scenePos())
        if found is None:
            if self.vb.sceneBoundingRect().contains(ev.scenePos()):
                self.state.set_selection(None)
            return
        tracks, lane, pos = found
        self.state.set_selection(Selection(tracks.key, *lane.entry(pos)))

    # pictures --------------------------------------------------------------------------------
    def render_image(self, width: int, height: int) -> Any:
        """Render the timeline offscreen into a QImage of the given size (tests, benchmarks,
        screenshots)."""
        self.resize(width, height)
        img = QImage(width, height, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(QColor("white"))
        p = QPainter(img)
        self.canvas.render(p)
        p.end()
        return img


def tooltip_text(tracks: TraceTracks, table: str, row: int, mfu: Any = None) -> str:
    """Hover text: name, duration, launch shape, stream; bound and SOL when known; a step
    marker's MFU from ``mfu``, the trace's :class:`~kviewer.analysis.mfu.MfuResult` when known."""
    df = tracks.trace.table(table)
    r = df.iloc[row]
    lines = [f"<b>{_esc(str(r['short_name'] if table == 'kernels' else r['name']))}</b>"]
    lines.append(f"duration: {format_duration(float(r['dur']))}")
    lines.append(f"start: {format_time(float(r['start'] - tracks.offset_ns))} {_esc(tracks.clock)}")
    if table == "kernels":
        if int(r["grid_x"]) >= 0:
            lines.append(f"grid: {r['grid_x']}×{r['grid_y']}×{r['grid_z']}   block: {r['block_x']}×{r['block_y']}×{r['block_z']}")
        lines.append(f"device {r['device']} · stream {r['stream']}")
        bounds, t_sol, pct = tracks.sol_column("bound"), tracks.sol_column("t_sol_ns"), tracks.sol_column("sol_pct")
        if bounds is not None and str(bounds[row]):
            lines.append(f"bound: {bounds[row]}")
        if pct is not None and np.isfinite(pct[row]):
            lines.append(f"SOL: {float(pct[row]):.1f} % of speed of light")
        if t_sol is not None and np.isfinite(t_sol[row]):
            lines.append(f"SOL time: {format_duration(float(t_sol[row]))}")
        lat = tracks.launch_latency[row] if tracks.launch_latency is not None and row < len(tracks.launch_latency) else float("nan")
        if lat == lat:
            lines.append(f"launch latency: {format_duration(float(lat))}")
        for col, label in (("sm_throughput_pct", "SM throughput"), ("mem_throughput_pct", "memory throughput")):
            v = float(r[col])
            if np.isfinite(v):
                lines.append(f"{label}: {v:.1f} %")
    elif table == "gpu_ops":
        if int(r["bytes"]) >= 0:
            lines.append(f"{int(r['bytes']):,} bytes {r['direction']}".rstrip())
        lines.append(f"device {r['device']} · stream {r['stream']}")
    else:
        lines.append(f"{r['category']} · tid {r['tid']}")

        lines.extend(_esc(x) for x in marker_tooltip_lines(mfu, str(r["name"]), int(r["rank"])))
    sync = tracks.sync.get(table)
    if sync is not None and row < len(sync) and sync[row]:
        lines.append("<span style='color:#b3261e'>synchronisation: the host waits for the GPU</span>")
    return "<br>".join(lines)


def _esc(s: str) -> str:
    s = display_text(s)  # control and bidi characters shown, not obeyed
    return html.escape(s if len(s) < 200 else s[:199] + "…")
