"""The open document: what a window (or the headless path) has open, without Qt.

- the open traces, each owned by an :class:`~kviewer.session.open_trace.OpenTrace` (its time
  offset and A/B role, its attached counter report, its analyses as pending/failed/ready) and
  drawn from its :class:`~kviewer.session.tracks.TraceTracks`;
- the compare pair (A, B) and its :class:`~kviewer.analysis.compare.CompareResult`.

The methods here and :mod:`kviewer.session.compare` are the commands that change an open trace;
views send them and learn about the changes through the events (plain callbacks; the GUI adapts
them to Qt signals). Closing a trace forgets everything that belongs to it, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kviewer.session.events import Event
from kviewer.session.open_trace import CRITPATH, FROM_SOL, FUSION, MFU, PENDING, SOL, AnalysisState, Failed, OpenTrace, Ready

if TYPE_CHECKING:
    from kviewer.analysis.compare import CompareResult
    from kviewer.analysis.fusion import FusionResult
    from kviewer.core import Trace
    from kviewer.session.analyses import SolInfo
    from kviewer.session.tracks import TraceTracks


@dataclass(frozen=True)
class ComparePair:
    """Trace ``b`` compared with trace ``a`` (keys of open traces)."""

    a: int
    b: int
    result: CompareResult


class Document:
    """Open traces (each an :class:`OpenTrace`) and the compare pair.

    Events
    ------
    traces_changed()
        a trace was opened or closed, or the content of an open one changed (its kernels, its
        speed of light, its display offset or label): every view reloads.
    analysis_changed(key)
        an analysis of trace ``key`` started, finished, failed or was dropped.
    compare_changed()
        a comparison started or stopped.
    """

    def __init__(self) -> None:
        self.traces: list[TraceTracks] = []
        """what the views draw, in opening order (one per :attr:`open` trace)"""
        self.open: dict[int, OpenTrace] = {}
        self.compare: ComparePair | None = None
        self.traces_changed = Event("traces_changed")
        self.analysis_changed = Event("analysis_changed")
        self.compare_changed = Event("compare_changed")

    # traces ------------------------------------------------------------------------------------
    def add(self, tracks: TraceTracks) -> OpenTrace:
        """Open a loaded trace."""
        opened = OpenTrace(tracks)
        self.open[tracks.key] = opened
        self.traces.append(tracks)
        self.traces_changed.emit()
        return opened

    def remove(self, key: int, notify: bool = True) -> bool:
        """Close trace ``key`` and forget what belongs to it; False when it was not open.

        A comparison with it ends first (the other trace goes back to its own times).
        ``notify=False`` leaves :attr:`traces_changed` to the caller (:meth:`changed`), which
        first settles what depends on the trace (the selection)."""
        if key not in self.open:
            return False
        if self.compare is not None and key in (self.compare.a, self.compare.b):
            self.end_compare(notify=False)
        self.traces = [t for t in self.traces if t.key != key]
        closed = self.open.pop(key)
        if closed.analyses:
            self.analysis_changed.emit(key)  # its analyses are gone with it
        if notify:
            self.traces_changed.emit()
        return True

    def trace(self, key: int | None) -> TraceTracks | None:
        """The view model of open trace ``key`` (None when not open)."""
        opened = self.open.get(key) if key is not None else None
        return opened.tracks if opened is not None else None

    def get(self, key: int | None) -> OpenTrace | None:
        """The owner of open trace ``key`` (None when not open)."""
        return self.open.get(key) if key is not None else None

    def changed(self) -> None:
        """The content of open traces changed (kernels, speed of light, display offsets)."""
        self.traces_changed.emit()

    def end_compare(self, notify: bool = True) -> None:
        """Leave compare mode: both traces back on their own times and labels (what
        :func:`kviewer.session.compare.stop_compare` runs, and closing a compared trace).

        ``notify=False`` leaves :attr:`traces_changed` to the caller (closing a trace)."""
        pair = self.compare
        if pair is None:
            return
        for key in (pair.a, pair.b):
            opened = self.open.get(key)
            if opened is not None:
                opened._place(opened.own_offset_ns, None)
        self.compare = None
        if notify:
            self.traces_changed.emit()
        self.compare_changed.emit()

    # analyses ----------------------------------------------------------------------------------
    def sol(self, key: int) -> SolInfo | None:
        """The speed of light of trace ``key`` (None: not open, or no kernels)."""
        t = self.trace(key)
        return t.sol_info if t is not None else None

    def set_sol(self, key: int, info: SolInfo, trace: Trace | None = None) -> None:
        """Trace ``key`` has a new speed of light (a GPU chosen; counters attached, with the merged
        ``trace``): its bars are recoloured, the results computed from the old one are dropped."""
        opened = self.open.get(key)
        if opened is None:
            return
        opened._set_sol(info, trace)
        self.analysis_changed.emit(key)
        self.traces_changed.emit()

    def begin(self, key: int, name: str) -> None:
        """Analysis ``name`` of trace ``key`` is being computed."""
        opened = self.open.get(key)
        if opened is not None:
            opened.analyses[name] = PENDING
            self.analysis_changed.emit(key)

    def settle(self, key: int, name: str, state: Ready[Any] | Failed) -> None:
        """Analysis ``name`` of trace ``key`` is done (or failed)."""
        opened = self.open.get(key)
        if opened is not None:
            opened.analyses[name] = state
            self.analysis_changed.emit(key)

    def analysis(self, key: int, name: str) -> AnalysisState | None:
        opened = self.open.get(key)
        return opened.analysis(name) if opened is not None else None

    def fusion(self, key: int) -> FusionResult | None:
        """The fusion candidates of trace ``key`` when computed."""
        opened = self.open.get(key)
        return opened.ready(FUSION) if opened is not None else None

    def ready(self, key: int, name: str) -> Any:
        """The result of analysis ``name`` of trace ``key`` when it is ready, else None (the MFU
        per step: :data:`MFU`; the critical paths: :data:`CRITPATH`)."""
        opened = self.open.get(key)
        return opened.ready(name) if opened is not None else None

    def drop_analysis(self, key: int) -> None:
        """Forget the analyses computed from the trace's speed of light (fusion, MFU)."""
        opened = self.open.get(key)
        if opened is None:
            return
        dropped = [name for name in FROM_SOL if opened.analyses.pop(name, None) is not None]
        if dropped:
            self.analysis_changed.emit(key)

    # attached reports --------------------------------------------------------------------------
    def attach(self, key: int, report: Trace, result: Any, info: SolInfo) -> None:
        """Counter ``report`` is attached to trace ``key``: its kernels carry the merged counters
        (``result``, an :class:`~kviewer.analysis.attach.AttachResult`) with their speed of light."""
        opened = self.open.get(key)
        if opened is None:
            return
        opened._attach(report, result)
        self.set_sol(key, info, result.trace)

    def report_of(self, key: int) -> Trace | None:
        """The counter report attached to trace ``key``, None when none."""
        opened = self.open.get(key)
        return opened.report if opened is not None else None

    def base_of(self, key: int) -> Trace | None:
        """The trace ``key`` as loaded (before an attached report's counters), None when not open."""
        opened = self.open.get(key)
        return opened.base if opened is not None else None


__all__ = ["SOL", "FUSION", "MFU", "CRITPATH", "ComparePair", "Document"]
