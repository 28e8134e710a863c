"""Analysis work off the GUI thread, the newest request per channel winning (Hotspot's jobtracker).

The loading mechanism (:mod:`kviewer.ui.loading`) does the same for files: a ``QRunnable`` on a
private one-thread pool reports back through signals of a ``QObject`` that lives in the GUI thread,
so results arrive as queued calls on the GUI thread. Here a request names a *channel* ("fusion",
"compare", ...): when a newer request on the same channel is made before an older one finishes,
the older result is dropped, so a slow computation for a trace the user already left never
overwrites the one they are looking at.

Usage::

    runner = BackgroundRunner(parent)
    runner.run("fusion", lambda: fusion_candidates(trace), on_done=show, on_error=report)
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal


class _Signals(QObject):
    done = Signal(int, object)
    failed = Signal(int, str)


class _Task(QRunnable):
    def __init__(self, ticket: int, fn: Callable[[], Any], signals: _Signals) -> None:
        super().__init__()
        self.ticket = ticket
        self.fn = fn
        self.signals = signals

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:  # noqa: BLE001  # reported to the requester, never lost in the worker thread
            from kviewer.errors import KViewerError

            if isinstance(exc, KViewerError):  # a typed error already says what went wrong
                message = str(exc)
            else:
                message = f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc(limit=3)}"
            self.signals.failed.emit(self.ticket, message)
        else:
            self.signals.done.emit(self.ticket, result)


class BackgroundRunner(QObject):
    """Runs callables on one worker thread; calls back on the GUI thread."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self.signals = _Signals(self)
        self.signals.done.connect(self._on_done)
        self.signals.failed.connect(self._on_failed)
        self._next = 0
        self._latest: dict[str, int] = {}
        self._callbacks: dict[int, tuple[str, Callable[[Any], None], Callable[[str], None] | None]] = {}

    def run(self, channel: str, fn: Callable[[], Any], on_done: Callable[[Any], None], on_error: Callable[[str], None] | None = None) -> int:
        """Run ``fn()`` in the background; ``on_done(result)`` or ``on_error(message)`` is called on
        the GUI thread unless a newer request on ``channel`` came meanwhile. Returns the ticket."""
        self._next += 1
        ticket = self._next
        self._latest[channel] = ticket
        self._callbacks[ticket] = (channel, on_done, on_error)
        self.pool.start(_Task(ticket, fn, self.signals))
        return ticket

    def cancel(self, channel: str) -> None:
        """Forget the pending request on ``channel`` (its result will be dropped)."""
        self._latest.pop(channel, None)

    def pending(self, channel: str | None = None) -> bool:
        """Whether a request (on ``channel``, or any) has not reported yet."""
        return any(channel is None or ch == channel for ch, _d, _e in self._callbacks.values())

    def wait(self, msecs: int = -1) -> bool:
        """Block until every request has run (for shutdown and tests)."""
        return bool(self.pool.waitForDone(msecs))

    def _take(self, ticket: int) -> tuple[Callable[[Any], None], Callable[[str], None] | None] | None:
        entry = self._callbacks.pop(ticket, None)
        if entry is None:
            return None
        channel, on_done, on_error = entry
        if self._latest.get(channel) != ticket:
            return None  # superseded (or cancelled): the newest request wins
        del self._latest[channel]
        return on_done, on_error

    def _on_done(self, ticket: int, result: Any) -> None:
        found = self._take(ticket)
        if found is not None:
            found[0](result)

    def _on_failed(self, ticket: int, message: str) -> None:
        found = self._take(ticket)
        if found is not None and found[1] is not None:
            found[1](message)
