"""The one view state every view observes: open traces, visible range, selection, highlight, filter.

Views never talk to each other: the table sets the selection here and the timeline follows it,
the timeline sets the range here and the status bar follows it (Hotspot's FilterAndZoomStack).
Setters only emit when the value really changes, so two views that mirror a value cannot ping-pong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    import numpy as np

    from kviewer.session.tracks import TraceTracks


@dataclass(frozen=True)
class Selection:
    """One selected bar: a row of a table of an open trace."""

    trace: int
    """TraceTracks.key"""
    table: str
    row: int


class ViewState(QObject):
    tracesChanged = Signal()
    rangeChanged = Signal(float, float)
    selectionChanged = Signal(object)
    """Selection | None"""
    revealRequested = Signal(object)
    """Selection: make it visible (scroll/zoom the timeline to it)"""
    highlightChanged = Signal()
    filterChanged = Signal(str)
    currentTraceChanged = Signal(object)
    """TraceTracks | None: the trace the status bar describes"""
    timeSelectionChanged = Signal(object)
    """(t0, t1) in display ns, or None: the range dragged on the time axis (the Range panel's)"""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.traces: list[TraceTracks] = []
        self.range: tuple[float, float] = (0.0, 1.0)
        self.selection: Selection | None = None
        #: trace key -> bool mask over its kernels (a selected group, or the table filter)
        self.highlight: dict[int, np.ndarray] = {}
        self.filter_text = ""
        self.current: TraceTracks | None = None
        self.time_selection: tuple[float, float] | None = None

    # traces ----------------------------------------------------------------------------------
    def add_trace(self, tracks: TraceTracks) -> None:
        self.traces.append(tracks)
        self.tracesChanged.emit()
        self.set_current(tracks)

    def remove_trace(self, key: int) -> None:
        before = len(self.traces)
        self.traces = [t for t in self.traces if t.key != key]
        if len(self.traces) == before:
            return
        self.highlight.pop(key, None)
        if self.selection is not None and self.selection.trace == key:
            self.set_selection(None)
        self.tracesChanged.emit()
        if self.current is not None and self.current.key == key:
            self.set_current(self.traces[-1] if self.traces else None)

    def trace(self, key: int) -> TraceTracks | None:
        for t in self.traces:
            if t.key == key:
                return t
        return None

    def set_current(self, tracks: TraceTracks | None) -> None:
        if tracks is not self.current:
            self.current = tracks
            self.currentTraceChanged.emit(tracks)

    def span(self) -> tuple[float, float]:
        """The display range that holds every open trace."""
        if not self.traces:
            return (0.0, 1.0)
        # a trace aligned with another (compare mode) may start before 0
        lo = min(0, min(t.span[0] for t in self.traces))
        hi = max(t.span[1] for t in self.traces)
        return (float(lo), float(max(hi, lo + 1)))

    # range -----------------------------------------------------------------------------------
    def set_range(self, t0: float, t1: float) -> None:
        if t1 <= t0:
            return
        if (t0, t1) != self.range:
            self.range = (float(t0), float(t1))
            self.rangeChanged.emit(self.range[0], self.range[1])

    def set_time_selection(self, rng: tuple[float, float] | None) -> None:
        """Select a time range (display ns, either order) or clear it with None."""
        if rng is not None:
            t0, t1 = sorted((float(rng[0]), float(rng[1])))
            rng = (t0, t1) if t1 > t0 else None
        if rng != self.time_selection:
            self.time_selection = rng
            self.timeSelectionChanged.emit(rng)

    # selection -------------------------------------------------------------------------------
    def set_selection(self, sel: Selection | None, reveal: bool = False) -> None:
        if sel != self.selection:
            self.selection = sel
            if sel is not None:
                tr = self.trace(sel.trace)
                if tr is not None:
                    self.set_current(tr)
            self.selectionChanged.emit(sel)
        if reveal and sel is not None:
            self.revealRequested.emit(sel)

    def set_highlight(self, highlight: dict[int, np.ndarray]) -> None:
        self.highlight = highlight
        self.highlightChanged.emit()

    def set_filter(self, text: str) -> None:
        if text != self.filter_text:
            self.filter_text = text
            self.filterChanged.emit(text)
