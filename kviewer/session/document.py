"""The open document: what a window (or the headless path) has open, without Qt.

- the traces, each laid out as :class:`~kviewer.session.tracks.TraceTracks` (with its speed of
  light, :attr:`TraceTracks.sol_info`);
- the compare pair (A, B) and its :class:`~kviewer.analysis.compare.CompareResult`;
- the counter reports attached to traces (the trace as loaded is kept, so a report can be
  attached again at another step);
- the cached analysis results of each trace (fusion candidates, or why they failed).

Closing a trace forgets everything that belongs to it, in one place. Views learn about changes
through the events (plain callbacks; the GUI adapts them to Qt signals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kviewer.session.events import Event

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


@dataclass(frozen=True)
class Attached:
    """A counter report attached to an open trace."""

    base: Trace
    """the trace as it was loaded, before the report's counters were merged onto it"""
    report: Trace


class Document:
    """Open traces, the compare pair, attached reports and cached analysis results.

    Events
    ------
    traces_changed()
        a trace was opened or closed, or the content of an open one changed (its kernels, its
        speed of light, its display offset): every view reloads.
    analysis_changed(key)
        a cached analysis result of trace ``key`` was stored or dropped.
    compare_changed()
        a comparison started or stopped.
    """

    def __init__(self) -> None:
        self.traces: list[TraceTracks] = []
        self.compare: ComparePair | None = None
        self.attached: dict[int, Attached] = {}
        self.fusion: dict[int, FusionResult] = {}
        """fusion candidates per trace key (computed once per speed of light)"""
        self.fusion_errors: dict[int, str] = {}
        """why the fusion candidates of a trace could not be computed"""
        self.traces_changed = Event("traces_changed")
        self.analysis_changed = Event("analysis_changed")
        self.compare_changed = Event("compare_changed")

    # traces ------------------------------------------------------------------------------------
    def add(self, tracks: TraceTracks) -> None:
        self.traces.append(tracks)
        self.traces_changed.emit()

    def remove(self, key: int, notify: bool = True) -> bool:
        """Close trace ``key`` and forget what belongs to it; False when it was not open.

        ``notify=False`` leaves :attr:`traces_changed` to the caller (:meth:`changed`), which
        first settles what depends on the trace (the selection)."""
        before = len(self.traces)
        self.traces = [t for t in self.traces if t.key != key]
        if len(self.traces) == before:
            return False
        self.forget(key)
        if notify:
            self.traces_changed.emit()
        return True

    def trace(self, key: int | None) -> TraceTracks | None:
        if key is None:
            return None
        for t in self.traces:
            if t.key == key:
                return t
        return None

    def forget(self, key: int) -> None:
        """Drop the attached report and cached results of trace ``key`` (closed). A compare pair
        with it is left to its owner, which puts the other trace back on its own times."""
        self.attached.pop(key, None)
        self.drop_analysis(key)

    def changed(self) -> None:
        """The content of open traces changed (kernels, speed of light, display offsets)."""
        self.traces_changed.emit()

    # analyses ----------------------------------------------------------------------------------
    def sol(self, key: int) -> SolInfo | None:
        """The speed of light of trace ``key`` (None: not open, or no kernels)."""
        t = self.trace(key)
        return t.sol_info if t is not None else None

    def set_sol(self, key: int, info: SolInfo, trace: Trace | None = None) -> None:
        """Trace ``key`` has a new speed of light (a GPU chosen; counters attached, with the merged
        ``trace``): its bars are recoloured, the results computed from the old one are dropped."""
        t = self.trace(key)
        if t is None:
            return
        if info.ok or trace is not None:
            t.set_sol(info, trace)
        else:
            t.sol_info = info
        self.drop_analysis(key)
        self.traces_changed.emit()

    def set_fusion(self, key: int, result: FusionResult) -> None:
        if self.trace(key) is None:
            return
        self.fusion[key] = result
        self.fusion_errors.pop(key, None)
        self.analysis_changed.emit(key)

    def set_fusion_error(self, key: int, why: str) -> None:
        if self.trace(key) is None:
            return
        self.fusion_errors[key] = why
        self.fusion.pop(key, None)
        self.analysis_changed.emit(key)

    def drop_analysis(self, key: int) -> None:
        had = key in self.fusion or key in self.fusion_errors
        self.fusion.pop(key, None)
        self.fusion_errors.pop(key, None)
        if had:
            self.analysis_changed.emit(key)

    # compare and attached reports --------------------------------------------------------------
    def set_compare(self, pair: ComparePair | None) -> None:
        self.compare = pair
        self.compare_changed.emit()

    def attach(self, key: int, base: Trace, report: Trace) -> None:
        self.attached[key] = Attached(base, report)

    def base_of(self, key: int) -> Trace | None:
        """The trace ``key`` as loaded (before an attached report's counters), None when not open."""
        a = self.attached.get(key)
        if a is not None:
            return a.base
        t = self.trace(key)
        return t.trace if t is not None else None
