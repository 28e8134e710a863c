"""One open trace and everything that belongs to it, without Qt: the one owner of an open trace.

An :class:`OpenTrace` holds

- the trace as loaded (:attr:`OpenTrace.base`) and its timeline view model
  (:attr:`OpenTrace.tracks`, a :class:`~kviewer.session.tracks.TraceTracks` the views draw);
- where it is drawn on the shared time axis (:attr:`OpenTrace.offset_ns`) and its role in a
  comparison ("A", "B" or None), which makes its label;
- what is attached to it (a counter report and the :class:`~kviewer.analysis.attach.AttachResult`);
- its analyses, each :class:`Pending` (being computed), :class:`Failed` (with the typed
  :class:`~kviewer.errors.AnalysisError`) or :class:`Ready` (with the result).

Only the session's commands change an open trace: :class:`~kviewer.session.document.Document`
(open, close, attach, analyses), :mod:`kviewer.session.compare` (offsets and A/B roles) and
:mod:`kviewer.session.lanes` (the row layout). Widgets send these commands and draw; the headless
screenshot runs the same ones, so a picture of ``kviewer A B`` equals the window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from kviewer.errors import AnalysisError

if TYPE_CHECKING:
    from kviewer.core import Trace
    from kviewer.session.analyses import SolInfo
    from kviewer.session.tracks import TraceTracks

T = TypeVar("T")

#: the analyses an open trace keeps: its speed of light, the fusion candidates and the MFU per
#: step computed from it, and the critical paths of its steps (of the trace alone)
SOL, FUSION, MFU, CRITPATH = "sol", "fusion", "mfu", "critpath"
#: the analyses computed from the speed of light: dropped when it changes
FROM_SOL = (FUSION, MFU)


@dataclass(frozen=True)
class Pending:
    """The analysis is being computed."""


@dataclass(frozen=True)
class Failed:
    """The analysis could not be computed; ``error`` says why."""

    error: AnalysisError

    @property
    def problem(self) -> str:
        return self.error.problem


@dataclass(frozen=True)
class Ready(Generic[T]):
    """The analysis is done."""

    result: T


AnalysisState = Union[Pending, Failed, Ready[Any]]
PENDING = Pending()


def run_analysis(fn: Callable[[], T], path: str | None = None) -> Ready[T] | Failed:
    """Run ``fn`` (on a worker) and return its state: :class:`Ready` with the result, or
    :class:`Failed` with an :class:`AnalysisError` (an unexpected exception becomes one, so an
    analysis bug never takes the window down)."""
    try:
        return Ready(fn())
    except AnalysisError as exc:
        return Failed(exc)
    except Exception as exc:  # noqa: BLE001
        return Failed(AnalysisError(f"{type(exc).__name__}: {exc}", path=path))


def sol_state(info: SolInfo, path: str | None = None) -> Ready[SolInfo] | Failed:
    """A computed speed of light as an analysis state: Failed when it says why there is none
    (unknown GPU), Ready otherwise (a trace without kernels is Ready: nothing to compute)."""
    if info.ok or info.no_kernels:
        return Ready(info)
    return Failed(AnalysisError(info.problem or info.why, path=path))


class OpenTrace:
    """One open trace: what it is, where it is drawn, what is attached, its analyses."""

    def __init__(self, tracks: TraceTracks) -> None:
        self.tracks = tracks
        self.base: Trace = tracks.trace
        """the trace as it was loaded (before a counter report's counters were merged onto it)"""
        self.report: Trace | None = None
        """the attached counter report (kept so it can be attached again at another step)"""
        self.own_offset_ns = tracks.offset_ns
        """the offset of its own clock (0: the tables' times, from the trace's time 0)"""
        self.role: str | None = None
        """"A" or "B" while compared, else None"""
        self.analyses: dict[str, AnalysisState] = {}
        if tracks.sol_info is not None:
            self.analyses[SOL] = sol_state(tracks.sol_info, tracks.trace.meta.path)

    # what it is ------------------------------------------------------------------------------
    @property
    def key(self) -> int:
        return self.tracks.key

    @property
    def label(self) -> str:
        """The file's short name."""
        return self.tracks.label

    @property
    def display_label(self) -> str:
        """The label of its timeline group: ``A · name`` while compared."""
        return f"{self.role} · {self.label}" if self.role else self.label

    @property
    def trace(self) -> Trace:
        """The trace on display (with an attached report's counters merged)."""
        return self.tracks.trace

    @property
    def offset_ns(self) -> int:
        return self.tracks.offset_ns

    @property
    def counters(self) -> Any:
        """The :class:`~kviewer.analysis.attach.AttachResult` of the attached report, or None."""
        return self.tracks.counters

    @property
    def source(self) -> Any:
        """The file's identity at load (for the analysis cache), None when unknown."""
        return self.tracks.source

    def analysis(self, name: str) -> AnalysisState | None:
        """The state of analysis ``name`` (:data:`SOL`, :data:`FUSION`, :data:`MFU`,
        :data:`CRITPATH`); None: not asked for."""
        return self.analyses.get(name)

    def ready(self, name: str) -> Any:
        """The result of analysis ``name`` when it is ready, else None."""
        state = self.analyses.get(name)
        return state.result if isinstance(state, Ready) else None

    def pending(self, name: str) -> bool:
        return isinstance(self.analyses.get(name), Pending)

    # changes (called by the session's commands only) -------------------------------------------
    @property
    def clock(self) -> str:
        """How its times on display are counted (``"since session start"``; compared as B, on A's)."""
        return self.tracks.clock

    def _place(self, offset_ns: int, role: str | None, aligned_clock: str = "") -> None:
        """Draw at ``offset_ns`` with ``role`` (compare mode), on the clock ``aligned_clock``
        names when it is another trace's; see :mod:`kviewer.session.compare`."""
        self.tracks.set_display_offset(offset_ns, aligned_clock)
        self.role = role
        self.tracks.root.label = self.display_label

    def _set_sol(self, info: SolInfo, trace: Trace | None = None) -> None:
        if info.ok or trace is not None:
            self.tracks.set_sol(info, trace)
        else:
            self.tracks.sol_info = info
        self.analyses[SOL] = sol_state(info, self.trace.meta.path)
        for name in FROM_SOL:  # computed from the old speed of light
            self.analyses.pop(name, None)
        if trace is not None:  # another trace (counters merged): its critical paths are its own
            self.analyses.pop(CRITPATH, None)

    def _attach(self, report: Trace, result: Any) -> None:
        self.report = report
        self.tracks.counters = result
