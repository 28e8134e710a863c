"""Analysis work off the GUI thread, the newest request per channel winning (Hotspot's jobtracker).

A request names a *channel* ("fusion", "compare", ...): when a newer request on the same channel is
made before an older one finishes, the older result is dropped, so a slow computation for a trace
the user already left never overwrites the one they are looking at. The work runs on the
application's :mod:`~kviewer.ui.dispatch` pool (plain Python threads that never touch Qt); the
callbacks run on the GUI thread, and never after :meth:`BackgroundRunner.close`.

Usage::

    runner = BackgroundRunner()
    runner.run("fusion", lambda: fusion_candidates(trace), on_done=show, on_error=report)
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from kviewer.errors import KViewerError
from kviewer.ui.dispatch import Owner, Task, dispatcher


def error_message(exc: BaseException) -> str:
    """What the user is told about a failed background computation."""
    if isinstance(exc, KViewerError):  # a typed error already says what went wrong
        return str(exc)
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=3))
    return f"{type(exc).__name__}: {exc}\n\n{detail}"


class BackgroundRunner:
    """Runs callables on the analysis worker; calls back on the GUI thread."""

    def __init__(self, name: str = "analysis") -> None:
        self.owner = Owner(name)
        self._latest: dict[str, Task] = {}

    def run(self, channel: str, fn: Callable[[], Any], on_done: Callable[[Any], None], on_error: Callable[[str], None] | None = None) -> Task:
        """Run ``fn()`` in the background; ``on_done(result)`` or ``on_error(message)`` is called on
        the GUI thread unless a newer request on ``channel`` came meanwhile."""
        old = self._latest.pop(channel, None)
        if old is not None:
            old.drop()  # superseded: the newest request wins (and a queued one never starts)

        def done(result: Any) -> None:
            if self._latest.get(channel) is task:
                del self._latest[channel]
                on_done(result)

        def failed(exc: BaseException) -> None:
            if self._latest.get(channel) is task:
                del self._latest[channel]
                if on_error is not None:
                    on_error(error_message(exc))

        task = dispatcher().submit(self.owner, lambda _progress: fn(), done, failed, pool="analysis")
        self._latest[channel] = task
        return task

    def cancel(self, channel: str) -> None:
        """Forget the pending request on ``channel`` (its result will be dropped)."""
        task = self._latest.pop(channel, None)
        if task is not None:
            task.drop()

    def pending(self, channel: str | None = None) -> bool:
        """Whether a request (on ``channel``, or any) has not reported yet."""
        return any(channel is None or ch == channel for ch in self._latest)

    def wait(self, msecs: int = -1) -> bool:
        """Block until this runner's work has run (for shutdown and tests); results are delivered
        by the event loop afterwards."""
        return dispatcher().wait(self.owner, timeout=3600.0 if msecs < 0 else msecs / 1000)

    def close(self) -> None:
        """No callback runs after this (the window is closing)."""
        self.owner.close()
        for task in self._latest.values():
            task.drop()
        self._latest.clear()
