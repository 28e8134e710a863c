"""Attaching a counter report (Nsight Compute, rocprof ``--pmc``) to an open timeline trace.

How a report gets attached:

- ``kviewer TRACE REPORT`` (or ``REPORT TRACE``: the report then waits for the timeline of the same
  request), or dropping/opening a report while a timeline trace is open: a loaded
  file that is a counter report (:func:`kviewer.analysis.attach.is_counter_report`) goes onto the
  current timeline trace (else the last opened one) instead of opening as a trace of its own —
  unless a comparison was asked for (File › Compare With…) or compare mode is on;
- File › Attach Counter Report…: the chosen file goes onto the current trace.

The merge (:func:`kviewer.analysis.attach.attach_counters`), the speed of light on the merged
counters and the recolouring run on the background runner; the GUI thread only swaps the trace's
kernels in place through the document's command (same kernels, same ids: the timeline lanes stay),
which keeps the report and the :class:`~kviewer.analysis.attach.AttachResult` with the open trace
for the Counters dock, which shows the
match report and, when several windows fit equally well, lets the user choose the step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from kviewer import analysis as kv_analysis, session
from kviewer.session.analyses import sol_for_load
from kviewer.ui import dialogs

if TYPE_CHECKING:
    import kviewer.analysis.attach
    from kviewer.core import Trace
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.analysis_docks import AnalysisDocks
    from kviewer.ui.background import BackgroundRunner
    from kviewer.ui.viewstate import ViewState


def attach_work(base: Trace, report: Trace, start: int | None, device: str | None = None) -> tuple[Any, Any]:
    """Worker side (no Qt): the attach result and the speed of light of the merged trace
    (on ``device`` when the user chose the GPU for this trace)."""
    result = kv_analysis.attach.attach_counters(base, report, start=start)
    info = session.analyses.compute_sol(result.trace, device) if device is not None else sol_for_load(result.trace)
    return result, info


class CounterAttach(QObject):
    """Decides which loaded files are attached, runs the merges, keeps the reports for re-choice.

    Signals
    -------
    attached(int)
        the key of the trace whose kernels now carry a report's counters.
    """

    attached = Signal(int)

    def __init__(
        self,
        window: Any,
        state: ViewState,
        runner: BackgroundRunner,
        analysis: AnalysisDocks,
        status: Callable[[str], None],
        blocked: Callable[[], bool],
        open_alone: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.state = state
        self.runner = runner
        self.analysis = analysis
        self.status = status
        self.blocked = blocked
        self.open_alone = open_alone or (lambda _path: None)
        """True while a comparison was asked for (a report then opens as a trace of its own)"""
        self.document = state.document
        self._alone_paths: set[str] = set()
        """reports that matched nothing: reopened as traces of their own"""
        self._alone: list[int] = []
        """keys of counter reports of the current open request that opened as traces"""
        self._expect: dict[str, int | None] = {}
        """absolute path -> the trace key the user asked to attach it to"""

    def expect(self, path: str, key: int | None) -> None:
        """File › Attach Counter Report…: attach ``path`` to trace ``key`` once it has loaded."""
        self._expect[os.path.abspath(path)] = key

    def take(self, tracks: TraceTracks) -> bool:
        """Called with every loaded file before it opens: True when it was attached instead."""
        path = os.path.abspath(tracks.trace.meta.path)
        if path in self._alone_paths:
            self._alone_paths.discard(path)
            return False
        explicit = path in self._expect
        want = self._expect.pop(path, None)
        if not kv_analysis.attach.is_counter_report(tracks.trace):
            if explicit:
                self.status(f"{os.path.basename(path)} is not a counter report: opened as a trace")
            return False
        if self.blocked() and not explicit:
            return False
        target = self.state.trace(want) if want is not None else None
        if target is None or not kv_analysis.attach.is_timeline(target.trace):
            target = self._target()
        if target is None:
            if explicit:
                self.status("No timeline trace is open to attach the report to: opened on its own")
            return False
        self.attach(target.key, tracks.trace)
        return True

    def note_alone(self, tracks: TraceTracks) -> None:
        """A counter report opened as a trace of its own (no timeline was open yet): a timeline
        of the same open request that loads after it (``kviewer REPORT TRACE``) adopts it."""
        self._alone.append(tracks.key)

    def adopt(self, timeline: TraceTracks) -> None:
        """A timeline has opened: attach the reports of this request that opened alone before it."""
        if self.blocked() or not kv_analysis.attach.is_timeline(timeline.trace):
            self._alone = []
            return
        for key in self._alone:
            report = self.state.trace(key)
            if report is not None:
                self.state.remove_trace(key)
                self.attach(timeline.key, report.trace)
        self._alone = []

    def request_done(self) -> None:
        """The open request ended: reports opened alone stay so."""
        self._alone = []

    def _target(self) -> TraceTracks | None:
        cur = self.state.current
        if cur is not None and kv_analysis.attach.is_timeline(self.document.base_of(cur.key) or cur.trace):
            return cur
        for t in reversed(self.state.traces):
            if kv_analysis.attach.is_timeline(self.document.base_of(t.key) or t.trace):
                return t
        return None

    def attach(self, key: int, report: Trace, start: int | None = None) -> None:
        """Merge ``report`` onto the open trace ``key`` in the background."""
        tracks = self.state.trace(key)
        if tracks is None:
            return
        base = self.document.base_of(key) or tracks.trace
        name = os.path.basename(report.meta.path)
        self.status(f"Attaching {name} to {tracks.label}…")

        def done(r: tuple[Any, Any]) -> None:
            if self.state.trace(key) is not tracks:
                return  # closed meanwhile
            result, info = r
            if not result.matched:
                # an unrelated report: the trace stays as it was, the report opens on its own
                self.status(f"None of the {result.match.ncu_total} kernels of {name} has a name, grid and block that "
                            f"{tracks.label} runs: the report opened on its own")
                self._alone_paths.add(os.path.abspath(report.meta.path))
                self.open_alone(report.meta.path)
                return
            # the merged kernels and their SOL: bars recoloured, old results dropped, views reload
            self.document.attach(key, report, result, info)
            self.analysis.refresh()
            where = f" ({', '.join(result.steps)})" if result.steps else ""
            choice = "; several steps fit equally well: choose in the Counters dock" if result.ambiguous else ""
            self.status(f"{name}: {result.matched} of {result.match.ncu_total} kernels matched on {tracks.label}{where}{choice}")
            self.attached.emit(key)

        def failed(message: str) -> None:
            self.status("")
            dialogs.show_error(self.window, "Could not attach the report", f"{name} onto {tracks.label}: {message}")

        device = getattr(tracks.sol_info, "device", None)
        self.runner.run(f"attach:{key}", lambda: attach_work(base, report, start, device), done, failed)

    def choose_window(self, key: int, start: int) -> None:
        """Re-attach the report of trace ``key`` at another window start (another step)."""
        report = self.document.report_of(key)
        tracks = self.state.trace(key)
        if report is None or tracks is None or getattr(tracks, "counters", None) is None:
            return
        if tracks.counters.match.start == start:
            return
        self.attach(key, report, start)

    @property
    def reports(self) -> dict[int, Trace]:
        """trace key -> the attached report (kept by the open document, forgotten when its trace
        closes)."""
        return {key: o.report for key, o in self.document.open.items() if o.report is not None}
