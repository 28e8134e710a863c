"""The critical path drawn over the timeline, and its breakdown for a step in the Range dock.

:class:`CriticalPathOverlay` holds the path segments of every step of one trace
(:func:`kviewer.analysis.critpath.critical_paths`, laid on lanes by :func:`path_bands` on a
worker) and the timeline draws each one as a band along the bottom of the lane it crosses (a
kernel's stream, a launch call's thread), coloured by its class, when one is set
(``TimelineView.critical_path``): the bands are built with the timeline's frame
(:meth:`CriticalPathOverlay.band_rects`), so a repaint reuses them.

:class:`StepBreakdown` is the Range dock's "Critical path" tab: when the selected range is a
step (its edges within 1 % of the step's window), the step's breakdown and the operations on
its path that cost most.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from kviewer import analysis
from kviewer.session.format import format_duration, format_percent
from kviewer.session.open_trace import CRITPATH, Failed
from kviewer.ui.analysis_requests import AnalysisRequests
from kviewer.ui.background import BackgroundRunner

if TYPE_CHECKING:
    import kviewer.analysis.critpath
    from kviewer.analysis.critpath import CritPathResult
    from kviewer.session.tracks import TraceTracks

#: one colour per breakdown class (kviewer.analysis.critpath.CLASSES order)
CLASS_COLOURS = (
    QColor(46, 160, 67),    # gpu_kernel
    QColor(137, 87, 229),   # memcpy
    QColor(240, 136, 62),   # launch
    QColor(56, 132, 255),   # cpu
    QColor(218, 54, 51),    # sync
    QColor(27, 170, 170),   # comm
    QColor(150, 150, 150),  # idle
)
BAND_PX = 4.0



def _critpath_job(tracks: TraceTracks) -> Callable[[], CritPathResult]:
    trace = tracks.trace
    return lambda: analysis.critpath.critical_paths(trace)


def critpath_requests(runner: BackgroundRunner, state: Any) -> AnalysisRequests:
    """Requests for the critical paths of open traces, kept in each trace's
    :data:`~kviewer.session.open_trace.CRITPATH` slot (computed once per trace, on the runner)."""
    return AnalysisRequests(runner, state, CRITPATH, _critpath_job)


def path_bands(result: CritPathResult, lane_of: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, class, lane) of every path segment of ``result`` that lies on a lane, sorted by
    start; times in trace ns, lanes index the trace's lanes (``lane_of``: the view model's
    ``TraceTracks.lane_of``, row -> lane per table). Pure: built on a worker with the paths."""
    g = result.graph
    starts, ends, classes, lanes = [], [], [], []
    k_lane = lane_of.get("kernels", np.zeros(0, dtype=np.int64))
    o_lane = lane_of.get("gpu_ops", np.zeros(0, dtype=np.int64))
    c_lane = lane_of.get("cpu_slices", np.zeros(0, dtype=np.int64))
    for step in result.steps:
        seg = step.segments
        node = seg["node"].to_numpy()
        lane_kind = seg["lane"].to_numpy()
        lane = np.full(len(seg), -1, dtype=np.int64)
        gpu = (lane_kind == analysis.critpath.LANE_GPU) & (node >= 0)
        if gpu.any():
            tab = g.g_table[node[gpu]]
            row = g.g_row[node[gpu]]
            got = np.full(len(row), -1, dtype=np.int64)
            kk = tab == 0
            if len(k_lane):
                got[kk] = k_lane[row[kk]]
            if len(o_lane):
                got[~kk] = o_lane[row[~kk]]
            lane[gpu] = got
        # host calls, and the host work between calls on the lane of the call next to it
        host = ((lane_kind == analysis.critpath.LANE_HOST) | (lane_kind == analysis.critpath.LANE_GAP)) & (node >= 0)
        if host.any() and len(c_lane):
            lane[host] = c_lane[g.h_row[node[host]]]
        keep = lane >= 0
        starts.append(seg["start"].to_numpy()[keep])
        ends.append(seg["end"].to_numpy()[keep])
        classes.append(seg["cls"].to_numpy()[keep].astype(np.int64))
        lanes.append(lane[keep])
    start = np.concatenate(starts) if starts else np.zeros(0)
    end = np.concatenate(ends) if ends else np.zeros(0)
    cls = np.concatenate(classes) if classes else np.zeros(0, dtype=np.int64)
    lane_ = np.concatenate(lanes) if lanes else np.zeros(0, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    return start[order], end[order], cls[order], lane_[order]


class CriticalPathOverlay:
    """Path segments of one trace, ready to lay out (see the module doc). The timeline builds its
    band rectangles with each frame (:meth:`band_rects`, cached with the frame: a repaint draws
    them again without computing them); :attr:`version` changes with the path, which the frame's
    key holds."""

    def __init__(self, timeline: Any) -> None:
        self.timeline = timeline
        self.key: int | None = None
        self.version = 0
        self.start = np.zeros(0)
        self.end = np.zeros(0)
        self.cls = np.zeros(0, dtype=np.int64)
        self.lane = np.zeros(0, dtype=np.int64)

    def set_path(self, key: int, bands: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Show the path segments ``bands`` (:func:`path_bands`) of trace ``key``."""
        self.key = key
        self.start, self.end, self.cls, self.lane = bands
        self._changed()

    def clear(self) -> None:
        self.key = None
        self.start = self.end = np.zeros(0)
        self.cls = self.lane = np.zeros(0, dtype=np.int64)
        self._changed()

    def _changed(self) -> None:
        self.version += 1  # in the timeline frame's key: its bands are built again
        if self.timeline.critical_path is self:
            self.timeline.item.invalidate()

    def band_rects(self, x0: float, x1: float, top: float, width: float) -> list[tuple[QColor, np.ndarray]]:
        """(colour, rectangles) of the bands along the bottom of each lane the path crosses, in
        frame pixel coordinates (see ``TracksItem.frame``)."""
        if self.key is None or not len(self.start):
            return []
        tl = self.timeline
        tracks = tl.state.trace(self.key)
        if tracks is None:
            return []
        off = tracks.offset_ns
        t0, t1 = x0 + off, x1 + off
        vis = (self.end > t0) & (self.start < t1)
        if not vis.any():
            return []
        scale = width / max(x1 - x0, 1e-9)
        xs = np.clip((self.start[vis] - t0) * scale, -10.0, width + 10.0)
        xe = np.clip((self.end[vis] - t0) * scale, -10.0, width + 10.0)
        lanes = self.lane[vis]
        cls = self.cls[vis]
        ys = np.full(len(lanes), np.nan)
        for ln in np.unique(lanes).tolist():
            if not 0 <= ln < len(tracks.lanes):
                continue
            row = tl.row_of_lane(tracks, tracks.lanes[ln])
            if row is not None:
                ys[lanes == ln] = row.y - top + row.h - BAND_PX
        ok = np.isfinite(ys)
        out = []
        for c in np.unique(cls[ok]).tolist():
            m = ok & (cls == c)
            rects = np.ascontiguousarray(np.stack([xs[m], ys[m], np.maximum(xe[m] - xs[m], 1.0), np.full(int(m.sum()), BAND_PX)], axis=1))
            out.append((CLASS_COLOURS[c], rects))
        return out


class StepBreakdown(QWidget):
    """The Range dock's critical-path tab (see the module doc)."""

    def __init__(self, runner: BackgroundRunner, state: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.paths = critpath_requests(runner, state)
        self._want: tuple[TraceTracks, int, int] | None = None
        """the last refresh's arguments (shown again when the paths arrive)"""
        self.step: Any = None
        """the :class:`~kviewer.analysis.critpath.StepPath` shown (None when the range is no step)"""
        self.label = QLabel("Select a step (the What-if dock lists them) to see its critical path.")
        self.label.setWordWrap(True)
        self.label.setObjectName("stepBreakdown")
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        scroll = QScrollArea()  # the table must not hold the dock (and the window) taller
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(scroll, 1)

    def refresh(self, tracks: TraceTracks | None, t0: int, t1: int) -> None:
        """Show the breakdown of the step whose window is [t0, t1] (trace ns), if any."""
        self.step = None
        self._want = None if tracks is None else (tracks, t0, t1)
        if tracks is None:
            return
        got = self.paths.request(tracks, self._again)
        if got is None:
            self.label.setText("critical path: computing…")
        elif isinstance(got, Failed):
            self.label.setText(f"critical path: {got.problem}")
        else:
            self._show(got.result, t0, t1)

    def _again(self) -> None:
        if self._want is not None:
            self.refresh(*self._want)

    def _show(self, result: CritPathResult, t0: int, t1: int) -> None:
        for s in result.steps:
            tol = 0.01 * max(s.measured_ns, 1)
            if abs(s.start - t0) <= tol and abs(s.end - t1) <= tol:
                self.step = s
                break
        if self.step is None:
            self.label.setText("The range is not a step: select a step's window (the What-if dock lists the steps) to see its "
                               "critical path.")
            return
        s = self.step
        total = max(s.critical_path_ns, 1)
        parts = "".join(
            f"<tr><td><span style='color:{CLASS_COLOURS[i].name()}'>■</span> {c}</td><td align=right>{format_duration(s.breakdown[c])}</td>"
            f"<td align=right>{format_percent(s.breakdown[c] / total * 100)}</td></tr>" for i, c in enumerate(analysis.critpath.CLASSES))
        top = "".join(f"<tr><td>{html.escape(str(t['name'])[:80])}</td><td>{t['kind']}</td><td align=right>{format_duration(float(t['ns']))}</td>"
                      f"<td align=right>{format_percent(t['pct'])}</td></tr>" for t in s.top[:8])
        queued = f"<br>{format_duration(s.unlaunched_ns)} of the path is {html.escape(analysis.critpath.UNLAUNCHED)}" if s.unlaunched_ns else ""
        self.label.setText(f"<b>{html.escape(s.name)}</b>: critical path {format_duration(s.critical_path_ns)} "
                           f"(step {format_duration(s.measured_ns)}){queued}<table>{parts}</table><br><b>On the path</b><table>{top}</table>")
