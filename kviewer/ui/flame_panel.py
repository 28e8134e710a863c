"""The Call tree dock: the python call tree of one thread as an icicle chart (with_stack=True).

Frames are :func:`kviewer.analysis.calltree.call_tree` (the same as ``kviewer calltree``): each
frame is drawn at its own time (the x axis follows the timeline's visible range) and at its depth
(outermost on top), so a frame's width is its inclusive time. Clicking a frame selects it (Details
shows it), selects its time range, zooms the timeline to it and highlights the kernels it launched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from kviewer import analysis
from kviewer.session.colors import SHADES, stable_shade
from kviewer.session.format import format_duration
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.dock_gate import DockGate
from kviewer.ui.viewstate import Selection, ViewState

if TYPE_CHECKING:
    import kviewer.analysis.calltree

ROW_H = 16
#: one warm colour per stable shade of a frame's name (the same in every run, unlike hash())
_SHADE_COLOURS = [QColor.fromHsv(20 + s * 40 // SHADES, 110 + (s * 5 % SHADES) * 60 // SHADES, 235) for s in range(SHADES)]


class IcicleView(QWidget):
    """Paints the frames of one thread between the view's time range."""

    def __init__(self, panel: FlamePanel) -> None:
        super().__init__(panel)
        self.panel = panel
        self.setMouseTracking(True)

    def _frames(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(call-tree positions, start, end, depth) of the shown thread's frames, in display ns:
        computed once per thread (:meth:`FlamePanel._thread_changed`), not per paint or mouse move."""
        return self.panel.frames

    def _x(self, t: np.ndarray) -> np.ndarray:
        t0, t1 = self.panel.state.range
        return (t - t0) / max(t1 - t0, 1e-9) * self.width()

    def paintEvent(self, _e: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(250, 250, 250))
        got = self._frames()
        if got is None:
            painter.end()
            return
        rows, start, end, depth = got
        t0, t1 = self.panel.state.range
        vis = (end >= t0) & (start <= t1)
        x0 = np.clip(self._x(start[vis]), -1, self.width() + 1)
        x1 = np.clip(self._x(end[vis]), -1, self.width() + 1)
        wide = (x1 - x0) >= 0.5
        names = self.panel.tree.names
        shades = self.panel.shades
        fm = painter.fontMetrics()
        for r, a, b, d in zip(rows[vis][wide].tolist(), x0[wide].tolist(), x1[wide].tolist(), depth[vis][wide].tolist()):
            rect = QRectF(a, d * ROW_H, max(b - a, 1.0), ROW_H - 1)
            painter.fillRect(rect, _SHADE_COLOURS[int(shades[r])])
            if rect.width() > 30:
                painter.setPen(QColor(30, 30, 30))
                painter.drawText(rect.adjusted(2, 0, -2, 0), int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                                 fm.elidedText(names[r], Qt.TextElideMode.ElideRight, int(rect.width()) - 4))
        painter.end()

    def frame_at(self, x: float, y: float) -> int | None:
        """The call-tree position of the frame under a point, or None."""
        got = self._frames()
        if got is None:
            return None
        rows, start, end, depth = got
        t0, t1 = self.panel.state.range
        t = t0 + x / max(self.width(), 1) * (t1 - t0)
        hit = np.flatnonzero((depth == int(y // ROW_H)) & (start <= t) & (end >= t))
        return int(rows[hit[0]]) if len(hit) else None

    def mousePressEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        i = self.frame_at(e.position().x(), e.position().y())
        if i is not None:
            self.panel.choose(i)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        i = self.frame_at(e.position().x(), e.position().y())
        p = self.panel
        if i is None or p.tree is None:
            self.setToolTip("")
            return

        self.setToolTip(f"{p.tree.names[i]}\ninclusive {format_duration(float(p.tree.inclusive_ns[i]))}, "
                        f"self {format_duration(float(p.tree.self_ns[i]))}")


class FlamePanel(QWidget):
    def __init__(self, state: ViewState, runner: BackgroundRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = runner
        self.tree: Any = None
        self.thread_rows: np.ndarray | None = None
        self.frames: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        """(call-tree positions, start, end, depth) of the shown thread's frames (display ns)"""
        self.shades: np.ndarray = np.zeros(0, dtype=np.int64)
        """the stable shade of every frame's name (indexed by call-tree position)"""
        self.offset = 0
        self.key = -1
        self.threads = QComboBox()
        self.threads.setObjectName("flameThread")
        self.status = QLabel("")
        head = QHBoxLayout()
        head.addWidget(QLabel("Thread"))
        head.addWidget(self.threads, 1)
        head.addWidget(self.status)
        self.icicle = IcicleView(self)
        # deep stacks scroll: the dock never asks the window for their height
        self.scroller = QScrollArea()
        self.scroller.setWidgetResizable(True)
        self.scroller.setWidget(self.icicle)
        self.scroller.setMinimumHeight(40)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        lay.addWidget(self.scroller, 1)
        self.threads.currentIndexChanged.connect(self._thread_changed)
        self.gate = DockGate(self.refresh)
        """computes only while the dock is on screen (the window tells it the dock)"""
        self.shown: tuple[int, int, int] | None = None
        """(trace key, id of its trace, display offset) filled for"""
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.tracesChanged.connect(self.refresh)
        state.rangeChanged.connect(lambda *_: self.icicle.update())

    def refresh(self) -> None:
        """Fill for the current trace, when on screen and it changed since the last fill."""
        tracks = self.state.current
        if tracks is None:
            self.shown = None
            self.runner.cancel("calltree")
            self._show(None, 0, -1)
            return
        want = (tracks.key, id(tracks.trace), tracks.offset_ns)
        if want == self.shown or not self.gate.on_screen():
            return
        self.shown = want
        trace = tracks.trace
        offset, key = tracks.offset_ns, tracks.key
        self.status.setText("computing…")
        self.runner.run("calltree", lambda: _tree_and_shades(trace), lambda got: self._show(got[0], offset, key, got[1]),
                        lambda m: self.status.setText(m.splitlines()[0]))

    def _show(self, tree: Any, offset: int, key: int, shades: np.ndarray | None = None) -> None:
        self.tree, self.offset, self.key = tree, offset, key
        self.shades = shades if shades is not None else np.zeros(0, dtype=np.int64)
        self.threads.blockSignals(True)
        self.threads.clear()
        if tree is not None and len(tree):
            pairs = sorted(set(zip(tree.pid.tolist(), tree.tid.tolist())))
            for pid, tid in pairs:
                self.threads.addItem(f"pid {pid} · tid {tid}", (pid, tid))
            what = "frames from CPU samples (sampled stacks)" if tree.sampled else "python frames"
            self.status.setText(f"{len(tree):,} {what}")
        else:
            self.status.setText("no python frames (PyTorch profiler: with_stack=True) and no CPU samples with stacks "
                                "(nsys --sample=cpu --backtrace=...)" if tree is not None else "")
        self.threads.blockSignals(False)
        self._thread_changed()

    def _thread_changed(self, *_: Any) -> None:
        data = self.threads.currentData()
        if self.tree is None or data is None:
            self.thread_rows = None
            self.frames = None
        else:
            pid, tid = data
            rows = self.thread_rows = np.flatnonzero((self.tree.pid == pid) & (self.tree.tid == tid))
            start = (self.tree.start[rows] - self.offset).astype(np.float64)
            self.frames = (rows, start, start + self.tree.inclusive_ns[rows], self.tree.depth[rows])
            depth = int(self.tree.depth[rows].max(initial=0)) + 1
            self.icicle.setMinimumHeight(depth * ROW_H)
        self.icicle.update()

    def choose(self, i: int) -> None:
        """Select frame ``i`` (a call-tree position): its range, its row, the kernels it launched."""
        tracks = self.state.trace(self.key)
        if tracks is None or self.tree is None:
            return
        t0 = float(self.tree.start[i] - self.offset)
        t1 = t0 + float(self.tree.inclusive_ns[i])
        self.state.set_time_selection((t0, t1))
        slice_id = int(self.tree.ids[i])
        if slice_id >= 0:  # an event frame; a sampled frame has no row of its own
            self.state.set_selection(Selection(self.key, "cpu_slices", slice_id))
            kernels = analysis.calltree.launched_kernels(tracks.trace, slice_id)
        else:
            s0 = int(self.tree.start[i])
            kernels = analysis.calltree.launched_between(tracks.trace, int(self.tree.pid[i]), int(self.tree.tid[i]), s0, s0 + int(self.tree.inclusive_ns[i]))
        if len(kernels):
            ks = tracks.trace.kernels
            mask = np.zeros(len(ks), dtype=bool)  # the highlight is a mask over the trace's kernels
            mask[kernels] = True
            self.state.set_highlight({self.key: mask})
            t1 = max(t1, float(ks["end"].to_numpy()[kernels].max() - self.offset))
        pad = (t1 - t0) * 0.05
        self.state.set_range(t0 - pad, t1 + pad)


def _tree_and_shades(trace: Any) -> tuple[Any, np.ndarray]:
    """The call tree of ``trace`` and the colour shade of each frame (on a worker)."""
    tree = analysis.calltree.call_tree(trace)
    return tree, _shades(tree.names)


def _shades(names: list[str]) -> np.ndarray:
    """:func:`~kviewer.session.colors.stable_shade` of each name (each distinct name hashed once)."""
    memo: dict[str, int] = {}
    return np.fromiter((memo[n] if n in memo else memo.setdefault(n, stable_shade(n)) for n in names), dtype=np.int64, count=len(names))
