"""The Qt side of the view state: a thin adapter that turns the session's events into Qt signals.

The state itself (open document, range, selection, highlight, filter, zoom/filter stack) lives in
:class:`kviewer.session.viewstate.ViewState`, without Qt. Widgets connect to the signals here, so a
widget that Qt deletes is disconnected by Qt; writers call the session's setters through the
delegating methods below. Only this adapter emits the signals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from kviewer.session.viewstate import FILTER, PICK, Selection
from kviewer.session.viewstate import ViewState as SessionViewState

if TYPE_CHECKING:
    import numpy as np

    from kviewer.session.document import Document
    from kviewer.session.tracks import TraceTracks

__all__ = ["FILTER", "PICK", "Selection", "ViewState"]


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
    stackChanged = Signal()
    timeSelectionChanged = Signal(object)
    """(t0, t1) in display ns, or None: the range dragged on the time axis (the Range panel's)"""
    compareChanged = Signal()
    """a comparison started or stopped (the document's ``compare_changed``)"""
    analysisChanged = Signal(int)
    """an analysis of the trace with this key started, finished, failed or was dropped"""

    def __init__(self, parent: QObject | None = None, session: SessionViewState | None = None) -> None:
        super().__init__(parent)
        self.session = session if session is not None else SessionViewState()
        s = self.session
        # the session lives as long as this adapter: its events hold only these emitters
        s.traces_changed.connect(self.tracesChanged.emit)
        s.range_changed.connect(self.rangeChanged.emit)
        s.selection_changed.connect(self.selectionChanged.emit)
        s.reveal_requested.connect(self.revealRequested.emit)
        s.highlight_changed.connect(self.highlightChanged.emit)
        s.filter_changed.connect(self.filterChanged.emit)
        s.current_changed.connect(self.currentTraceChanged.emit)
        s.stack_changed.connect(self.stackChanged.emit)
        s.time_selection_changed.connect(self.timeSelectionChanged.emit)
        s.document.compare_changed.connect(self.compareChanged.emit)
        s.document.analysis_changed.connect(self.analysisChanged.emit)

    # what the views read -----------------------------------------------------------------------
    @property
    def document(self) -> Document:
        return self.session.document

    @property
    def traces(self) -> list[TraceTracks]:
        return self.session.traces

    @property
    def range(self) -> tuple[float, float]:
        return self.session.range

    @property
    def selection(self) -> Selection | None:
        return self.session.selection

    @property
    def highlight(self) -> dict[int, np.ndarray]:
        return self.session.highlight

    @property
    def filter_text(self) -> str:
        return self.session.filter_text

    @property
    def current(self) -> TraceTracks | None:
        return self.session.current

    def trace(self, key: int | None) -> TraceTracks | None:
        return self.session.trace(key)

    def span(self) -> tuple[float, float]:
        return self.session.span()

    def clock(self) -> str:
        return self.session.clock()

    # what the views write ----------------------------------------------------------------------
    def add_trace(self, tracks: TraceTracks) -> None:
        self.session.add_trace(tracks)

    def remove_trace(self, key: int) -> None:
        self.session.remove_trace(key)

    def traces_updated(self) -> None:
        """The content of open traces changed (kernels, colours, offsets): every view reloads."""
        self.session.document.changed()

    def set_current(self, tracks: TraceTracks | None) -> None:
        self.session.set_current(tracks)

    def set_range(self, t0: float, t1: float) -> None:
        self.session.set_range(t0, t1)

    @property
    def time_selection(self) -> tuple[float, float] | None:
        return self.session.time_selection

    def set_time_selection(self, rng: tuple[float, float] | None) -> None:
        """Select a time range (display ns, either order) or clear it with None."""
        self.session.set_time_selection(rng)

    def zoom_target(self) -> tuple[float, float] | None:
        """What F shows: the newer of the dragged range and the selected bar (session's doc)."""
        return self.session.zoom_target()

    def set_selection(self, sel: Selection | None, reveal: bool = False) -> None:
        self.session.set_selection(sel, reveal)

    def set_highlight(self, highlight: dict[int, np.ndarray], layer: str = PICK) -> None:
        self.session.set_highlight(highlight, layer)

    def clear_highlight(self, layer: str | None = None) -> None:
        self.session.clear_highlight(layer)

    def set_filter(self, text: str) -> None:
        self.session.set_filter(text)

    def push(self, range_: tuple[float, float] | None = None, filter_text: str | None = None) -> None:
        self.session.push(range_, filter_text)

    def pop(self) -> bool:
        return self.session.pop()

    def reset(self) -> None:
        self.session.reset()
