"""An analysis of an open trace, asked for by a view and kept by the trace's owner.

The result lives in the trace's :class:`~kviewer.session.open_trace.OpenTrace` slot (``Pending`` /
``Failed`` / ``Ready`` through :meth:`Document.begin <kviewer.session.document.Document.begin>`
and :meth:`~kviewer.session.document.Document.settle`), so it goes with the trace when it closes
and with the speed of light when that changes (see :meth:`OpenTrace._set_sol`); nothing is cached
beside it. The first view to ask starts the job on the runner (channel ``{name}:{key}``); a view
asking while it runs is called back when the slot settles (``analysisChanged``), whichever
:class:`AnalysisRequests` started it. A failure is kept as ``Failed``: it is not asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kviewer.errors import AnalysisError
from kviewer.session.open_trace import Failed, Ready, run_analysis


class AnalysisRequests:
    """Requests analysis ``name`` of open traces; ``job(tracks)`` returns the worker's callable
    (it must not touch the view model on the worker: capture what it needs), and
    ``current(tracks, now)`` says whether a result computed for ``tracks`` still fits the trace
    as it is now (not given another trace or speed of light meanwhile)."""

    def __init__(self, runner: Any, state: Any, name: str, job: Callable[[Any], Callable[[], Any]],
                 current: Callable[[Any, Any], bool] | None = None) -> None:
        self.runner = runner
        self.state = state
        self.name = name
        self.job = job
        self.current = current
        self._waiting: dict[int, list[Callable[[], None]]] = {}
        state.analysisChanged.connect(self._changed)

    def request(self, tracks: Any, then: Callable[[], None]) -> Ready[Any] | Failed | None:
        """The analysis of ``tracks`` when settled (Ready or Failed); None while it is computed:
        ``then()`` is called on the GUI thread once it is settled (or dropped)."""
        doc = self.state.document
        key = int(tracks.key)
        if doc.get(key) is None:
            return None  # not open (closed meanwhile): nothing to compute
        got = doc.analysis(key, self.name)
        if isinstance(got, (Ready, Failed)):
            return got
        waiting = self._waiting.setdefault(key, [])
        if then not in waiting:
            waiting.append(then)
        if got is None:
            self._start(tracks)
        return None

    def _start(self, tracks: Any) -> None:
        doc = self.state.document
        key = int(tracks.key)
        trace, info = tracks.trace, tracks.sol_info
        path = trace.meta.path
        fn = self.job(tracks)
        doc.begin(key, self.name)

        def done(settled: Ready[Any] | Failed) -> None:
            now = self.state.trace(key)
            if now is None or now.trace is not trace or (self.current is not None and not self.current(info, now)):
                return  # closed, or its trace or speed of light changed meanwhile (the slot was dropped)
            doc.settle(key, self.name, settled)

        def failed(message: str) -> None:
            done(Failed(AnalysisError(message.split("\n", 1)[0], path=path)))

        self.runner.run(f"{self.name}:{key}", lambda: run_analysis(fn, path), done, failed)

    def _changed(self, key: int) -> None:
        opened = self.state.document.get(key)
        if key not in self._waiting or (opened is not None and opened.pending(self.name)):
            return
        for then in self._waiting.pop(key, []):
            then()


def same_sol(info: Any, now: Any) -> bool:
    """A result computed from speed of light ``info`` fits trace ``now`` while it has that one."""
    return now.sol_info is info
