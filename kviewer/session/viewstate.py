"""The one view state every view observes: visible range, selection, highlight, filter, and a
zoom/filter stack (Hotspot's FilterAndZoomStack), over an open :class:`~kviewer.session.document.Document`.

Views never talk to each other: the table sets the selection here and the timeline follows it,
the timeline sets the range here and the status bar follows it. Setters only emit when the value
really changes, so two views that mirror a value cannot ping-pong. No Qt: the GUI adapts the
events to Qt signals (:mod:`kviewer.ui.viewstate`); the headless path and the CLI use it as it is.

The highlight has one owner and one rule. Two layers write it:

- ``FILTER``: the kernels the table's filter keeps (dims the others on the timeline);
- ``PICK``: kernels the user picked as a group (a table group row, roofline points, a fusion
  candidate, a compare row).

The highlight shown is the pick when there is one, else the filter's. A new filter text replaces
the pick (the newest intent wins); clearing the pick shows the filter's highlight again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kviewer import session
from kviewer.session.document import Document
from kviewer.session.events import Event

if TYPE_CHECKING:
    import numpy as np

    import kviewer.session.tracks
    from kviewer.session.tracks import TraceTracks

#: highlight layers (see the module doc)
FILTER, PICK = "filter", "pick"


@dataclass(frozen=True)
class Selection:
    """One selected bar: a row of a table of an open trace."""

    trace: int
    """TraceTracks.key"""
    table: str
    row: int


@dataclass(frozen=True)
class ViewFrame:
    """One entry of the zoom/filter stack: a visible range and a filter."""

    range: tuple[float, float]
    filter_text: str


class ViewState:
    """Range, selection, highlight and filter of a document's views, with plain-Python events.

    Events
    ------
    traces_changed()
        traces opened or closed, or their content changed (the document's event).
    range_changed(t0, t1)
    selection_changed(Selection | None)
    reveal_requested(Selection)
        make it visible (scroll/zoom the timeline to it).
    highlight_changed()
    filter_changed(str)
    current_changed(TraceTracks | None)
        the trace the status bar and the analysis docks describe.
    stack_changed()
        the zoom/filter stack grew or shrank.
    """

    def __init__(self, document: Document | None = None) -> None:
        self.document = document if document is not None else Document()
        self.range: tuple[float, float] = (0.0, 1.0)
        self.selection: Selection | None = None
        self.filter_text = ""
        self.current: TraceTracks | None = None
        self.time_selection: tuple[float, float] | None = None
        """the range dragged on the time axis (display ns, t0 < t1), or None: the Range panel's"""
        self._range_is_newer = False
        """whether the time selection was made after the selected bar (what F zooms to)"""
        self._layers: dict[str, dict[int, np.ndarray]] = {FILTER: {}, PICK: {}}
        self.stack: list[ViewFrame] = []
        """frames to go back to (:meth:`pop`), the oldest first"""
        self.traces_changed = self.document.traces_changed
        self.range_changed = Event("range_changed")
        self.selection_changed = Event("selection_changed")
        self.reveal_requested = Event("reveal_requested")
        self.highlight_changed = Event("highlight_changed")
        self.filter_changed = Event("filter_changed")
        self.current_changed = Event("current_changed")
        self.stack_changed = Event("stack_changed")
        self.time_selection_changed = Event("time_selection_changed")

    # traces ------------------------------------------------------------------------------------
    @property
    def traces(self) -> list[TraceTracks]:
        return self.document.traces

    def trace(self, key: int | None) -> TraceTracks | None:
        return self.document.trace(key)

    def add_trace(self, tracks: TraceTracks) -> None:
        self.document.add(tracks)
        self.set_current(tracks)

    def remove_trace(self, key: int) -> None:
        if not self.document.remove(key, notify=False):
            return
        for layer in self._layers.values():
            layer.pop(key, None)
        if self.selection is not None and self.selection.trace == key:
            self.set_selection(None)
        self.document.changed()
        if self.current is not None and self.current.key == key:
            self.set_current(self.traces[-1] if self.traces else None)

    def set_current(self, tracks: TraceTracks | None) -> None:
        if tracks is not self.current:
            self.current = tracks
            self.current_changed.emit(tracks)

    def span(self) -> tuple[float, float]:
        """The display range that holds every open trace."""
        if not self.traces:
            return (0.0, 1.0)
        # from the first event shown (an nsys trace's first event may come seconds after its
        # time 0, the session start)
        lo = min(t.span[0] for t in self.traces)
        hi = max(t.span[1] for t in self.traces)
        return (float(lo), float(max(hi, lo + 1)))

    def clock(self) -> str:
        """What the time axis counts from (:func:`~kviewer.session.tracks.clock_label`)."""
        return session.tracks.clock_label(self.traces)

    # range -------------------------------------------------------------------------------------
    def set_range(self, t0: float, t1: float) -> None:
        if t1 <= t0:
            return
        if (t0, t1) != self.range:
            self.range = (float(t0), float(t1))
            self.range_changed.emit(self.range[0], self.range[1])

    # selection ---------------------------------------------------------------------------------
    def set_selection(self, sel: Selection | None, reveal: bool = False) -> None:
        if sel != self.selection:
            self.selection = sel
            if sel is not None:
                self._range_is_newer = False
                tr = self.trace(sel.trace)
                if tr is not None:
                    self.set_current(tr)
            self.selection_changed.emit(sel)
        if reveal and sel is not None:
            self.reveal_requested.emit(sel)

    # highlight ---------------------------------------------------------------------------------
    @property
    def highlight(self) -> dict[int, np.ndarray]:
        """trace key -> bool mask over its kernels: the pick, else the filter's (module doc)."""
        pick = self._layers[PICK]
        return pick if pick else self._layers[FILTER]

    def set_highlight(self, highlight: dict[int, np.ndarray], layer: str = PICK) -> None:
        """Set one layer of the highlight (module doc)."""
        if layer not in self._layers:
            raise ValueError(f"unknown highlight layer {layer!r}; one of {', '.join(self._layers)}")
        before = self.highlight
        self._layers[layer] = dict(highlight)
        if before or self.highlight:
            self.highlight_changed.emit()

    def clear_highlight(self, layer: str | None = None) -> None:
        """Clear one layer (None: both); clearing the pick shows the filter's highlight again."""
        before = self.highlight
        for name in ([layer] if layer is not None else list(self._layers)):
            self._layers[name] = {}
        if before or self.highlight:
            self.highlight_changed.emit()

    # time selection ----------------------------------------------------------------------------
    def set_time_selection(self, rng: tuple[float, float] | None) -> None:
        """Select a time range (display ns, either order) or clear it with None."""
        if rng is not None:
            t0, t1 = sorted((float(rng[0]), float(rng[1])))
            rng = (t0, t1) if t1 > t0 else None
        if rng != self.time_selection:
            self.time_selection = rng
            self._range_is_newer = rng is not None
            self.time_selection_changed.emit(rng)

    # what F zooms to ---------------------------------------------------------------------------
    def bar_span(self, sel: Selection) -> tuple[float, float] | None:
        """Display ns (start, end) of a selected bar, at least 1 ns long; None when it is gone."""
        tracks = self.trace(sel.trace)
        if tracks is None:
            return None
        df = tracks.trace.table(sel.table)
        if not (0 <= sel.row < len(df)):
            return None
        s = float(df["start"].to_numpy()[sel.row] - tracks.offset_ns)
        e = float(df["end"].to_numpy()[sel.row] - tracks.offset_ns)
        return s, max(e, s + 1.0)

    def zoom_target(self) -> tuple[float, float] | None:
        """The range F (View › Zoom to Selection) shows, as in Perfetto and Nsight Systems: the
        dragged time range exactly, or the selected bar with some context around it, whichever
        the user made last; None when there is neither (F then fits everything)."""
        bar = self.bar_span(self.selection) if self.selection is not None else None
        rng = self.time_selection
        if rng is not None and (bar is None or self._range_is_newer):
            return rng
        if bar is None:
            return None
        s, e = bar
        pad = max((e - s) * 0.15, 50.0)
        return s - pad, e + pad

    # filter ------------------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """A new filter text; it replaces the picked highlight (the filter's own highlight follows
        from the table, which applies the filter)."""
        if text != self.filter_text:
            self.filter_text = text
            if self._layers[PICK]:
                self._layers[PICK] = {}
                self.highlight_changed.emit()
            self.filter_changed.emit(text)

    # zoom/filter stack -------------------------------------------------------------------------
    def push(self, range_: tuple[float, float] | None = None, filter_text: str | None = None) -> None:
        """Remember the current range and filter, then show ``range_`` and/or ``filter_text``."""
        self.stack.append(ViewFrame(self.range, self.filter_text))
        self.stack_changed.emit()
        if filter_text is not None:
            self.set_filter(filter_text)
        if range_ is not None:
            self.set_range(*range_)

    def pop(self) -> bool:
        """Go back to the range and filter before the last :meth:`push`; False when none."""
        if not self.stack:
            return False
        frame = self.stack.pop()
        self.stack_changed.emit()
        self.set_filter(frame.filter_text)
        self.set_range(*frame.range)
        return True

    def reset(self) -> None:
        """Back to where the first :meth:`push` started; the stack is emptied."""
        if not self.stack:
            return
        frame = self.stack[0]
        self.stack.clear()
        self.stack_changed.emit()
        self.set_filter(frame.filter_text)
        self.set_range(*frame.range)
